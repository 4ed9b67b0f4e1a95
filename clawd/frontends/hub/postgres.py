"""The ``Coordination`` of one of several workers on one database: each session's queue is
in the database.

A message is queued in ``gateway_turns`` (``storage.postgres.shared``) in arrival order,
whichever worker it reaches, and the worker that holds the session (its lease) claims and
runs the session's turns one after the other, whichever worker they reached. A worker that
does not hold the session takes it if nobody does, else hands back a ``RemoteTurn`` that
its client follows through the stored lines. Nobody waits on a lease, so two clients of one
session on two workers never starve each other and the session does not move between
workers from turn to turn: a holder with nothing queued lets the session go after
``gateway.idleSessionSeconds`` (at once when a chat elsewhere asks for it), and every
worker looks each ``SWEEP_SECONDS`` for turns queued for a session nobody runs (its holder
let go or died) and takes them. Turns of a session held by what does not run its queue (a
chat in a terminal) end with its "in use" error after ``sessions.lock.WAIT_SECONDS``, as in
one process, unless a worker runs one of its turns meanwhile; none waits longer than
``SHARED_WAIT_SECONDS``. A send retried on another worker, an
abort (of the running turn, wherever it runs), the bound on waiting turns, the failed
sign-ins (``storage.postgres.auth``) and each person's turns (``storage.postgres.quotas``)
reach across workers; every database call is made off
the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from clawd.core.errors import ClawdError, StoreUnavailable, http_message
from clawd.frontends.commands import Chat
from clawd.frontends.hub.coordination import HubSide
from clawd.frontends.hub.feed import Feed
from clawd.frontends.hub.stored import StoredFeed, Wakers, failed_lines, sink
from clawd.frontends.hub.turns import (
    IDEMPOTENCY_KEYS,
    STOPPING,
    IdempotencyConflict,
    QueuedTurn,
    QueueFull,
    RemoteTurn,
    Slot,
)
from clawd.sessions import lock
from clawd.sessions.lock import SessionBusyError

if TYPE_CHECKING:
    from clawd.storage.postgres.auth import PgFailedAuth
    from clawd.storage.postgres.shared import PgShared

log = logging.getLogger(__name__)

SHARED_WAIT_SECONDS = 600.0  # a turn waits this long for its session to be free
SWEEP_SECONDS = 1.0  # how often a worker looks for turns queued for a session nobody runs
NOT_TAKEN = ("the session stayed in use elsewhere (a chat in a terminal?) for 10 minutes; "
             "the message was not sent")
NOT_SENT = STOPPING
UNANSWERED = "the database stopped answering while the message was sent; it was not sent"


class PgCoordination:
    """``Coordination`` over ``shared`` (a ``storage.postgres.shared.PgShared``) and the
    failed sign-ins every worker counts (``storage.postgres.auth.PgFailedAuth``)."""

    def __init__(self, shared: PgShared, sign_ins: PgFailedAuth):
        self.shared, self.sign_ins = shared, sign_ins
        self._hub: HubSide | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._relays: set[asyncio.Task[None]] = set()  # turns followed from the database
        self.unsent: set[str] = set()  # queued when the database stopped answering
        self.wakers = Wakers()  # followers of turns other workers run, woken by NOTIFY
        # the turns this worker's clients sent that another worker runs, recent ones
        self.followed: OrderedDict[str, RemoteTurn] = OrderedDict()

    def bind(self, hub: HubSide) -> None:
        self._hub = hub

    @property
    def hub(self) -> HubSide:
        assert self._hub is not None, "bound by the hub it serves"
        return self._hub

    # --- sending ----------------------------------------------------------------------------

    def feed(self, turn_id: str) -> Feed:
        """Lines kept in the database too, for followers on other workers."""
        return Feed(sink(self.shared, turn_id), self.shared.wait_written)

    async def place(self, turn: QueuedTurn, idempotency: str | None
                    ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """Queued in the database; run here if this worker holds the session or can take
        it, else followed as its holder runs it."""
        hub, shared = self.hub, self.shared
        turn_id, agent_id, key = turn.id, turn.agent_id, turn.key
        # known before its row exists: a drain of this worker may claim it at once
        hub.turns[turn_id] = turn
        try:  # queued, and the session's turns not ended counted, in one round trip
            other, waiting = await asyncio.to_thread(
                shared.begin, turn_id, agent_id, key, turn.text, idempotency, turn.ephemeral,
                turn.asks, turn.job)
        except BaseException:
            hub.turns.pop(turn_id, None)
            raise
        if other is not None:  # a retry of a send another worker took
            hub.turns.pop(turn_id, None)
            if not other[1]:
                raise IdempotencyConflict.of(str(idempotency), key)
            return await hub.turn(other[0]) or self._remote(other[0], agent_id, key), False
        try:
            return await self._place(turn, idempotency, waiting - 1)
        except StoreUnavailable:  # queued, then the database stopped answering: not sent
            if turn.state != "queued":  # this worker's drain runs it already
                return turn, True
            hub.turns.pop(turn_id, None)
            hub.sent.pop((agent_id, key, idempotency or ""), None)
            self.unsent.add(turn_id)
            raise

    async def _place(self, turn: QueuedTurn, idempotency: str | None, waiting: int
                     ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """The turn, queued in the database, run here or followed from here; ``waiting``:
        every worker's turns of the session before it."""
        hub, shared = self.hub, self.shared
        turn_id, agent_id, key = turn.id, turn.agent_id, turn.key
        slot = hub._slot(agent_id, key)
        if waiting > hub.max_queued and await asyncio.to_thread(shared.drop, turn_id):
            hub.turns.pop(turn_id, None)
            raise QueueFull(key, max(1, min(60, round(slot.seconds_per_turn * waiting))))
        hub._remember(turn, idempotency)
        try:
            taken = await self._take(slot)
        except StoreUnavailable:
            raise
        except ClawdError as exc:  # the session cannot be opened at all
            if await asyncio.to_thread(shared.withdraw, turn_id):
                hub._not_run(turn, str(exc))
            return turn, True
        if taken:
            return turn, True
        if turn.state != "queued":  # claimed by this worker's drain meanwhile
            return turn, True
        hub.turns.pop(turn_id, None)  # the session's holder runs it: followed from here
        hub.sent.pop((agent_id, key, idempotency or ""), None)
        remote = self._remote(turn_id, agent_id, key, "queued")
        self.followed[turn_id] = remote
        while len(self.followed) > IDEMPOTENCY_KEYS:
            self.followed.popitem(last=False)
        return remote, True

    async def _take(self, slot: Slot) -> bool:
        """Hold the session (if nobody does) and run what is queued for it; whether this
        worker holds it. Raises ``ClawdError`` when it cannot be opened."""
        hub = self.hub
        slot.users += 1
        try:
            async with slot.taking:
                if slot.chat is None and not hub.stopping:
                    runtime = hub.agents.runtime(slot.agent_id)
                    try:
                        slot.chat = await asyncio.get_running_loop().run_in_executor(
                            hub.pool, partial(Chat.open, runtime, slot.key, wait=0))
                    except SessionBusyError as exc:
                        slot.busy = exc
                        return False
                if slot.chat is None:
                    return False
                hub._wake(slot)
                return True
        finally:
            slot.users -= 1

    async def find(self, turn_id: str) -> RemoteTurn | None:
        """A turn of any other worker; none has an id with a control character."""
        if not turn_id.isprintable():
            return None
        about = await asyncio.to_thread(self.shared.turn, turn_id)
        return None if about is None else self._remote(turn_id, about["agent"], about["key"],
                                                       about["state"])

    def _remote(self, turn_id: str, agent_id: str, key: str, state: str = "running"
                ) -> RemoteTurn:
        return RemoteTurn(turn_id, agent_id, key, StoredFeed(self.shared, turn_id, self.wakers),
                          state)

    async def busy(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """From every worker's turns (one query)."""
        found: dict[str, dict[str, Any]] = await asyncio.to_thread(self.shared.busy, agent_id,
                                                                   keys)
        return found

    async def request_abort(self, agent_id: str, key: str) -> RemoteTurn | None:
        """The session's running turn on the worker running it."""
        found = await asyncio.to_thread(self.shared.request_abort, agent_id, key)
        return self._remote(found, agent_id, key) if found else None

    async def answer(self, turn_id: str, number: int, approve: bool,
                     values: dict[str, Any] | None) -> bool:
        """Checked against the question's stored line, then heard by the turn's worker."""
        from clawd.storage.postgres import answers

        line = await asyncio.to_thread(answers.open_question, self.shared.db, turn_id, number)
        if line is None:
            return False
        self.hub.agents.approvals.check(line, approve, values)
        answer = {"approve": approve, "values": values}
        if not await asyncio.to_thread(answers.send, self.shared.db, turn_id, number, answer):
            raise ClawdError("the answer is too long to hand to the worker running the turn")
        return True

    # --- hearing other workers --------------------------------------------------------------

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hear the aborts other workers are asked for, the answers to questions of turns
        running here, the sessions a chat elsewhere waits for and the turns queued for the
        sessions this worker holds; sweep."""
        def on_loop(call: Callable[..., None], *, only: Callable[..., bool] | None = None
                    ) -> Callable[..., None]:
            """``call``, heard on the listener's thread, made on the event loop (when
            ``only`` says it concerns this worker: every worker hears every notice)."""
            def hand(*args: Any) -> None:
                if only is None or only(*args):
                    loop.call_soon_threadsafe(call, *args)
            return hand

        self.shared.listen(on_loop(self.hub._aborted), on_loop(self.hub._idle_now),
                           on_loop(self._queued, only=lambda *key: key in self.hub.slots),
                           on_loop(self.wakers.wake, only=self.wakers.followed),
                           self.hub._answered)  # on the listener's thread: it never waits
        self._sweeper = loop.create_task(self._sweep())

    def _queued(self, agent_id: str, key: str) -> None:
        """A turn was queued for the session on some worker: run it if this worker holds
        the session."""
        slot = self.hub.slots.get((agent_id, key))
        if slot is not None and slot.chat is not None and not self.hub.stopping:
            self.hub._wake(slot)

    async def _sweep(self) -> None:
        """Each ``SWEEP_SECONDS``: end the turns nobody could take for too long, and take
        the sessions whose turns wait while nobody runs them."""
        failing = False
        while not self.hub.stopping:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                if self.unsent:  # sends that failed half-way: ended before anyone runs them
                    unsent = list(self.unsent)
                    await asyncio.to_thread(self.shared.unsend, unsent,
                                            partial(failed_lines, message=UNANSWERED))
                    self.unsent.difference_update(unsent)
                await asyncio.to_thread(self.shared.expire, SHARED_WAIT_SECONDS,
                                        partial(failed_lines, message=NOT_TAKEN))
                found = await asyncio.to_thread(self.shared.waiting_sessions, SWEEP_SECONDS)
                for agent_id, key in found:
                    slot = self.hub._slot(agent_id, key)
                    if slot.chat is not None:  # held here: a notice of its turn was lost
                        self.hub._wake(slot)
                    elif not await self._take(slot) and slot.busy:
                        # held by what does not run the queue: given up as one process would
                        await asyncio.to_thread(
                            self.shared.refuse_unserved, agent_id, key, lock.WAIT_SECONDS,
                            partial(failed_lines, message=http_message(slot.busy)))
                await self._follow_taken()
                failing = False
            except StoreUnavailable as exc:  # said once an outage
                if not failing:
                    log.warning("the database does not answer: %s", exc)
                failing = True
            except Exception as exc:  # noqa: BLE001 - look again at the next sweep
                log.warning("looking for waiting turns: %s: %s", type(exc).__name__, exc)

    async def _follow_taken(self) -> None:
        """This worker's queued turns that another worker took (it held their session
        when this one let go) or ended: their clients follow them from the database."""
        mine = [turn.id for turn in self.hub.turns.values() if turn.state == "queued"]
        if not mine:
            return
        for turn_id in await asyncio.to_thread(self.shared.taken_elsewhere, mine):
            turn = self.hub.turns.get(turn_id)
            if turn is not None and turn.state == "queued":
                self._relay(turn)

    def _relay(self, turn: QueuedTurn) -> None:
        turn.state = "running"
        relay = asyncio.get_running_loop().create_task(
            turn.feed.relay(StoredFeed(self.shared, turn.id, self.wakers)))
        relay.add_done_callback(lambda _: setattr(turn, "state", "done"))
        self._relays.add(relay)
        relay.add_done_callback(self._relays.discard)

    # --- running ----------------------------------------------------------------------------

    async def next_turn(self, slot: Slot) -> QueuedTurn | None:
        """The session's oldest queued turn on any worker, while this worker holds it."""
        hub = self.hub
        if slot.chat is None or hub.stopping:
            return None
        claimed = await asyncio.to_thread(self.shared.claim, slot.agent_id, slot.key)
        if claimed is None:
            return None
        turn_id, text, ephemeral, asks, waited, job = claimed
        turn = hub.turns.get(turn_id)
        if turn is None or turn.state != "queued":  # another worker's: run here
            turn = QueuedTurn(turn_id, slot.agent_id, slot.key, text, ephemeral=ephemeral,
                              asks=asks, feed=self.feed(turn_id), job=job,
                              queued_at=time.monotonic() - waited)  # it arrived elsewhere
            hub._remember(turn, None)
        return turn

    def ran(self, slot: Slot) -> None:
        """A session another worker took while this one had lost its hold unseen (its
        writes were refused) is let go of, to be taken again when free."""
        chat = slot.chat
        if chat is not None and chat.session.lease.lost:
            slot.chat = None
            chat.close()

    def drained(self, slot: Slot) -> None:
        if slot.chat is None:  # set aside after an ephemeral turn: others may wait
            self.hub._let_go(slot)
        else:
            self.hub._let_go_later(slot)

    def let_go(self, slot: Slot) -> None:
        if slot.running is None:
            asyncio.get_running_loop().create_task(self._give_back(slot))

    async def _give_back(self, slot: Slot) -> None:
        """Let go of an idle session off the event loop; a turn queued for it meanwhile is
        taken again (its worker tried the session while this one still held it)."""
        hub = self.hub
        slot.users += 1
        try:
            async with slot.taking:
                if slot.running is not None or slot.idle_timer is not None or (
                        slot.worker is not None and not slot.worker.done()):
                    return  # a turn came meanwhile
                chat, slot.chat = slot.chat, None
                if chat is not None:
                    await asyncio.get_running_loop().run_in_executor(hub.pool, chat.close)
        finally:
            slot.users -= 1
        if not hub.stopping and await asyncio.to_thread(self.shared.queued, slot.agent_id,
                                                        slot.key):
            await self._take(slot)
        elif slot.chat is None and slot.users == 0 and hub.slots.get(
                (slot.agent_id, slot.key)) is slot:
            del hub.slots[(slot.agent_id, slot.key)]

    # --- stopping ---------------------------------------------------------------------------

    def begin_stop(self) -> None:
        """This worker's clients of turns still queued are told "not sent" (the turns other
        workers received are run by whoever takes their session next)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        queued = [turn for turn in self.hub.turns.values() if turn.state == "queued"]
        asyncio.get_running_loop().create_task(self._unsend(queued, list(self.followed)))

    async def _unsend(self, turns: list[QueuedTurn], followed: list[str]) -> None:
        """Tell this worker's clients that their turns still queued will not run: their
        streams end, so this worker can stop."""
        for turn in turns:
            if await asyncio.to_thread(self.shared.withdraw, turn.id):
                self.hub._not_run(turn, NOT_SENT)
            elif turn.state == "queued":  # taken by another worker: followed to its end
                self._relay(turn)
        await asyncio.to_thread(self.shared.unsend, followed,
                                partial(failed_lines, message=NOT_SENT))

    def close(self) -> None:
        self.shared.close()

    # --- failed sign-ins --------------------------------------------------------------------

    async def retry_after(self, client: str) -> int | None:
        return await asyncio.to_thread(self.sign_ins.retry_after, client)

    async def failed(self, client: str) -> int | None:
        return await asyncio.to_thread(self.sign_ins.failed, client)

    # --- each person's turns ----------------------------------------------------------------

    def turn_quota(self) -> Any:
        from clawd.storage.postgres.quotas import PgTurnQuota

        return PgTurnQuota(self.shared.db)
