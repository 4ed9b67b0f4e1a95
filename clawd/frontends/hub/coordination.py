"""What differs between one ``clawd serve`` process and several workers on one database: the
hub's ``Coordination``.

The ``Hub`` runs turns one at a time per session on worker threads, wherever it runs; what
it asks of its coordination is what other workers must agree on: where a session's queue is
and in which order its turns run (``place``, ``next_turn``), where a turn's event lines are
kept so any worker can follow them (``feed``, ``find``), which session is busy (``busy``),
how an abort reaches the worker running the turn (``request_abort``) and so does a person's
answer to a question its tools asked (``answer``), how a worker hears aborts, answers, turns
queued for a session it holds and release requests (a chat elsewhere waiting for a session
this worker holds idle: ``listen``), when a session is let go (``ran``,
``drained``, ``let_go``), what a shutdown does with queued turns (``begin_stop``), the
failed sign-ins per client address (``retry_after``, ``failed``) and each person's turns
(``turn_quota``).

Two implementations: ``local.LocalCoordination`` (one process: the queues are the slots' own,
in memory; nothing to hear) and ``postgres.PgCoordination`` (``storage.url``: the queues,
lines, aborts and failed sign-ins in the database, ``storage.postgres.shared``). Every
method that may wait is a coroutine that waits off the event loop, so the hub calls them
from it; the others are called on the loop and never wait on the database.
``clawd.frontends.hub.open_coordination`` picks one from the config. A coordination works
the hub's queues through ``HubSide``, what it may touch of the hub it serves.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from clawd.frontends.hub.agents import Agents
from clawd.frontends.hub.feed import Feed
from clawd.frontends.hub.turns import QueuedTurn, RemoteTurn, Slot


class HubSide(Protocol):
    """What a coordination may touch of the hub it serves: its slots and remembered turns,
    its worker threads, and the steps of running a session's queue."""

    agents: Agents
    slots: dict[tuple[str, str], Slot]
    turns: OrderedDict[str, QueuedTurn]
    sent: OrderedDict[tuple[str, str, str], QueuedTurn]
    pool: ThreadPoolExecutor
    max_queued: int
    stopping: bool
    new_id: Callable[[], str]

    def _slot(self, agent_id: str, key: str) -> Slot: ...
    def _wake(self, slot: Slot) -> None: ...
    def _remember(self, turn: QueuedTurn, idempotency: str | None) -> None: ...
    def _not_run(self, turn: QueuedTurn, why: str) -> None: ...
    def _let_go(self, slot: Slot) -> None: ...
    def _let_go_later(self, slot: Slot) -> None: ...
    def _aborted(self, turn_id: str) -> None: ...
    def _answered(self, turn_id: str, number: int, answer: dict[str, Any]) -> None: ...
    def _idle_now(self, agent_id: str, key: str) -> None: ...
    async def turn(self, turn_id: str) -> QueuedTurn | RemoteTurn | None: ...


class Coordination(Protocol):
    """The seam between the hub and the other workers (see the module docstring)."""

    def bind(self, hub: HubSide) -> None:
        """The hub this coordination serves (called once, by the hub)."""

    # --- the turn queue and its order -------------------------------------------------------

    def feed(self, turn_id: str) -> Feed:
        """The feed a new turn's event lines go to (kept where other workers follow them)."""

    async def place(self, turn: QueuedTurn, idempotency: str | None
                    ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """Queue a new turn behind its session's others: the turn (run here, or a
        ``RemoteTurn`` the worker holding the session runs) and whether it is new (False: a
        send retried with its idempotency key on another worker). Raises ``QueueFull`` past
        ``maxQueuedPerSession`` waiting turns, ``IdempotencyConflict`` for a key used with
        another text."""

    async def next_turn(self, slot: Slot) -> QueuedTurn | None:
        """The session's next turn for this process to run, in arrival order (None: none
        waits, or this process may not run the session's turns now)."""

    async def find(self, turn_id: str) -> RemoteTurn | None:
        """A turn this process does not hold (another worker's), followed through its
        stored lines; None when there is no such turn."""

    # --- busy state and aborts --------------------------------------------------------------

    async def busy(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Each session's running turn (its id, or None) and how many turns wait behind
        it, on every worker."""

    async def request_abort(self, agent_id: str, key: str) -> RemoteTurn | None:
        """Ask the worker running the session's turn (not this process) to stop it; the
        turn, or None when no other worker runs one."""

    async def answer(self, turn_id: str, number: int, approve: bool,
                     values: dict[str, Any] | None) -> bool:
        """Hand a person's answer to question ``number`` of turn ``turn_id`` to the other
        worker running it (``Approvals.check``ed here first); whether the question waited
        there."""

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start hearing the other workers: aborts (``Hub._aborted``), answers
        (``Hub._answered``), release requests (``Hub._idle_now``), turns queued for
        sessions held here; on ``loop``."""

    # --- holding a session and letting it go ------------------------------------------------

    def ran(self, slot: Slot) -> None:
        """A turn of the session has run (on its worker thread)."""

    def drained(self, slot: Slot) -> None:
        """The session has no turn left for this process to run."""

    def let_go(self, slot: Slot) -> None:
        """Let go of an idle session (close its ``Chat``: its lock is free); forget it."""

    def begin_stop(self) -> None:
        """Shutting down: the turns still queued here are answered "not sent" (or left to
        the worker that runs them)."""

    def close(self) -> None:
        """Stop hearing the other workers; what was handed in is written first."""

    # --- failed sign-ins --------------------------------------------------------------------

    async def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` (``policy.rate_key``) may present a token again, or
        None when it may now."""

    async def failed(self, client: str) -> int | None:
        """Count a wrong token of ``client``; the seconds of the lockout it starts, if any."""

    # --- each person's turns ----------------------------------------------------------------

    def turn_quota(self) -> Any:
        """A counter of each person's turns for ``gateway.quotas`` (``reserve``, ``attach``,
        ``cancel``; ``remote``: its calls wait on the database, made off the event loop)."""
