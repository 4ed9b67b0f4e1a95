"""One process's ``Coordination``: every session's queue is its slot's own, in memory.

A turn is queued in its slot and run in arrival order by the slot's drain; the session is
opened when its first turn runs (waiting for a chat elsewhere as the CLI does) and let go
after ``gateway.idleSessionSeconds`` idle. Nobody else runs turns, so a turn is found, an
abort heard and a session's busy state read here alone; ``begin_stop`` answers the queued
turns "not sent". The failed sign-ins are counted in memory (``sign_ins.FailedAuth``), and
so are each person's turns (``core.quotas.LocalTurnQuota``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from clawd.core.quotas import LocalTurnQuota
from clawd.frontends.hub.coordination import HubSide
from clawd.frontends.hub.feed import Feed
from clawd.frontends.hub.turns import STOPPING, QueuedTurn, QueueFull, RemoteTurn, Slot

if TYPE_CHECKING:
    from clawd.frontends.hub.sign_ins import FailedAuth


class LocalCoordination:
    """``Coordination`` of one process (see the module docstring)."""

    def __init__(self, sign_ins: FailedAuth):
        self.sign_ins = sign_ins
        self._hub: HubSide | None = None

    def bind(self, hub: HubSide) -> None:
        self._hub = hub

    @property
    def hub(self) -> HubSide:
        assert self._hub is not None, "bound by the hub it serves"
        return self._hub

    # --- the turn queue and its order -------------------------------------------------------

    def feed(self, turn_id: str) -> Feed:
        return Feed()

    async def place(self, turn: QueuedTurn, idempotency: str | None
                    ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        hub = self.hub
        slot = hub._slot(turn.agent_id, turn.key)
        waiting = len(slot.queue) + (1 if slot.running is not None else 0)
        if waiting > hub.max_queued:
            raise QueueFull(turn.key, max(1, min(60, round(slot.seconds_per_turn * waiting))))
        hub._remember(turn, idempotency)
        slot.queue.append(turn)
        hub._wake(slot)
        return turn, True

    async def next_turn(self, slot: Slot) -> QueuedTurn | None:
        return slot.queue.popleft() if slot.queue else None

    async def find(self, turn_id: str) -> RemoteTurn | None:
        return None

    # --- busy state and aborts --------------------------------------------------------------

    async def busy(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        slots = {key: self.hub.slots.get((agent_id, key)) for key in keys}
        return {key: {"running": slot.running.id if slot and slot.running else None,
                      "queued": len(slot.queue) if slot else 0} for key, slot in slots.items()}

    async def request_abort(self, agent_id: str, key: str) -> RemoteTurn | None:
        return None

    async def answer(self, turn_id: str, number: int, approve: bool,
                     values: dict[str, Any] | None) -> bool:
        return False  # no other worker

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Nobody else to hear."""

    # --- holding a session and letting it go ------------------------------------------------

    def ran(self, slot: Slot) -> None:
        """Nothing more: the session stays open for the next turn."""

    def drained(self, slot: Slot) -> None:
        self.hub._let_go_later(slot)

    def let_go(self, slot: Slot) -> None:
        if slot.queue or slot.running is not None:
            return
        chat, slot.chat = slot.chat, None
        if chat is not None:
            chat.close()
        self.hub.slots.pop((slot.agent_id, slot.key), None)

    def begin_stop(self) -> None:
        for slot in self.hub.slots.values():
            while slot.queue:
                self.hub._not_run(slot.queue.popleft(), STOPPING)

    def close(self) -> None:
        """Nothing held open."""

    # --- failed sign-ins --------------------------------------------------------------------

    async def retry_after(self, client: str) -> int | None:
        return self.sign_ins.retry_after(client)

    async def failed(self, client: str) -> int | None:
        return self.sign_ins.failed(client)

    # --- each person's turns ----------------------------------------------------------------

    def turn_quota(self) -> LocalTurnQuota:
        return LocalTurnQuota()
