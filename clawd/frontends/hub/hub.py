"""One writer per session across every client: a queue per session, turns on worker threads.

Every message or command for a session becomes a ``QueuedTurn`` in that session's queue
(``Slot``); the slot runs its turns one at a time, each on a worker thread driving the
session's ``Chat.handle`` (the REPL's entry point: the same commands, flush, hooks and
rules), and its events go to the turn's ``Feed`` on the event loop. A job's run in the
session is queued the same way and run with the job's tools and model
(``scheduler.in_session``). Different sessions run
at the same time. A queue holds at most ``gateway.maxQueuedPerSession`` waiting turns;
past that ``submit`` raises ``QueueFull`` with a time to retry after. A send with an
idempotency key already seen returns the turn it started (never a second run).

A turn belongs to no connection: a client that goes away leaves it running, and its reply is
in the history (and in the feed) when the client comes back. Each turn carries its
``CancelToken`` from the moment it is queued; ``abort`` cancels the running turn's, and the
turn ends as Ctrl-C ends one (wherever it is: streaming, running a tool, flushing, or not
yet started): the partial reply is kept, marked interrupted. A slot holds its ``Chat`` (and
so the session's lock, which the CLI honours) while turns come, and lets it go after
``gateway.idleSessionSeconds``. What differs between one process and several workers on one
database (where a session's queue is, the order its turns run in, who hears an abort, who is
busy) is the hub's ``Coordination`` (``coordination``): ``local.LocalCoordination`` in one
process, ``postgres.PgCoordination`` with ``storage.url``. ``stop`` (SIGTERM) refuses new
turns, lets running ones go on for ``gateway.shutdownGraceSeconds``, then stops them as
Ctrl-C does; queued turns are not run. Turns are counted (``METRICS``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clawd.core import events as ev
from clawd.core.errors import ClawdError, http_message
from clawd.core.metrics import METRICS
from clawd.frontends.commands import Chat
from clawd.frontends.hub.agents import Agents
from clawd.frontends.hub.coordination import Coordination
from clawd.frontends.hub.feed import ended_how
from clawd.frontends.hub.turns import (
    IDEMPOTENCY_KEYS,
    STOPPING,
    IdempotencyConflict,
    QueuedTurn,
    RemoteTurn,
    Slot,
    Stopping,
)
from clawd.frontends.render import drive, event_json
from clawd.scheduler.in_session import run_in_chat

log = logging.getLogger(__name__)
MAX_THREADS = 64  # turns running at once, over all sessions
class Hub:
    """Every session the gateway has touched (see the module docstring)."""

    def __init__(self, agents: Agents, coordination: Coordination, *, max_queued: int = 8,
                 idle_seconds: float = 60, grace_seconds: float = 10,
                 new_id: Callable[[], str] | None = None):
        from clawd.core.messages import new_id as make_id

        self.agents = agents
        self.max_queued, self.idle_seconds, self.grace = max_queued, idle_seconds, grace_seconds
        self.new_id = new_id or make_id
        self.slots: dict[tuple[str, str], Slot] = {}
        self.turns: OrderedDict[str, QueuedTurn] = OrderedDict()  # by id, recent ones
        self.sent: OrderedDict[tuple[str, str, str], QueuedTurn] = OrderedDict()  # idempotency
        self.pool = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="clawd-turn")
        self.stopping = False
        self.coordination = coordination
        coordination.bind(self)
        self._quota: Any = None

    @property
    def quota(self) -> Any:
        """Each person's turns (``gateway.quotas``; ``hub.quotas``), one counter for every
        front end, where the coordination counts them; made on first use."""
        if self._quota is None:
            self._quota = self.coordination.turn_quota()
        return self._quota

    # --- sending ----------------------------------------------------------------------------

    async def submit(self, agent_id: str, key: str, text: str, idempotency: str | None = None,
                     *, ephemeral: bool = False, asks: bool = False,
                     images: tuple[Any, ...] = (), job: dict[str, Any] | None = None
                     ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """Queue ``text`` (a message or a /command) for the session; the turn and whether
        it is new (False: a retried send, the turn it started the first time).
        ``ephemeral``: the session is set aside (deleted, its transcript kept) when the turn
        ends; ``asks``: the sender answers the turn's tools' questions (``answer``);
        ``job``: the turn is a job's run (``scheduler.in_session.spec``; ``text`` its
        message), run with the job's tools and model."""
        if idempotency:
            seen = self.sent.get((agent_id, key, idempotency))
            if seen is not None:
                if seen.text != text:
                    raise IdempotencyConflict.of(idempotency, key)
                return seen, False
        if self.stopping:
            raise Stopping("the gateway is shutting down; the message was not sent")
        turn_id = self.new_id()
        turn = QueuedTurn(turn_id, agent_id, key, text, ephemeral=ephemeral, asks=asks,
                          images=images, feed=self.coordination.feed(turn_id), job=job)
        return await self.coordination.place(turn, idempotency)

    def _slot(self, agent_id: str, key: str) -> Slot:
        slot = self.slots.get((agent_id, key))
        if slot is None:
            slot = self.slots[(agent_id, key)] = Slot(agent_id, key)
        return slot

    def _wake(self, slot: Slot) -> None:
        """Run the slot's waiting turns, unless they already run."""
        if slot.idle_timer is not None:
            slot.idle_timer.cancel()
            slot.idle_timer = None
        if slot.worker is None or slot.worker.done():
            slot.worker = asyncio.get_running_loop().create_task(self._drain(slot))
        else:
            slot.again = True  # a drain under way looks once more before it ends

    def _remember(self, turn: QueuedTurn, idempotency: str | None) -> None:
        self.turns[turn.id] = turn
        if idempotency:
            self.sent[(turn.agent_id, turn.key, idempotency)] = turn
        for table in (self.turns, self.sent):
            while len(table) > IDEMPOTENCY_KEYS:
                oldest = next(iter(table.values()))
                if oldest.state != "done":
                    break
                table.popitem(last=False)

    async def turn(self, turn_id: str) -> QueuedTurn | RemoteTurn | None:
        """A turn of this process, else one another worker runs (``Coordination.find``)."""
        return self.turns.get(turn_id) or await self.coordination.find(turn_id)

    async def busy(self, agent_id: str, key: str) -> dict[str, Any]:
        """The session's running turn and how many wait behind it (on any worker)."""
        return (await self.busy_of(agent_id, [key]))[key]

    async def busy_of(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """``busy`` of several sessions."""
        return await self.coordination.busy(agent_id, keys)

    async def abort(self, agent_id: str, key: str) -> QueuedTurn | RemoteTurn | None:
        """Stop the session's running turn as Ctrl-C does, here or on the worker running
        it; the turn, or None if none ran."""
        slot = self.slots.get((agent_id, key))
        if slot is not None and slot.running is not None:
            self._interrupt(slot, slot.running)
            return slot.running
        return await self.coordination.request_abort(agent_id, key)

    async def answer(self, turn: QueuedTurn | RemoteTurn, number: int, approve: bool,
                     values: dict[str, Any] | None = None) -> bool:
        """A person's answer to question ``number`` a tool of ``turn`` asked (``asks``),
        here or on the worker running it; whether the question was waiting."""
        if isinstance(turn, QueuedTurn):
            slot = self.slots.get((turn.agent_id, turn.key))
            if slot is not None and slot.running is turn:
                return self.agents.approvals.answer(turn.id, number, approve, values)
        # another worker runs it (a turn sent here may be too: ``Coordination.place``)
        return await self.coordination.answer(turn.id, number, approve, values)

    def _answered(self, turn_id: str, number: int, answer: dict[str, Any]) -> None:
        """An answer given on another worker to a question of a turn running here (checked
        there)."""
        try:
            self.agents.approvals.answer(turn_id, number, bool(answer.get("approve")),
                                         answer.get("values"))
        except ClawdError as exc:
            log.warning("an answer from another worker not taken: %s", exc)

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hear what other workers ask for (aborts, sessions a chat elsewhere waits for,
        turns queued for a session held here); one process hears nothing."""
        self.coordination.listen(loop)

    def _idle_now(self, agent_id: str, key: str) -> None:
        """Let go of the session now if it is idle here (another process waits for it, or
        it is about to be deleted)."""
        slot = self.slots.get((agent_id, key))
        if slot is not None and slot.running is None and not slot.queue and (
                slot.worker is None or slot.worker.done()):
            if slot.idle_timer is not None:
                slot.idle_timer.cancel()
            self._let_go(slot)

    def _aborted(self, turn_id: str) -> None:
        for slot in self.slots.values():
            if slot.running is not None and slot.running.id == turn_id:
                self._interrupt(slot, slot.running)

    @staticmethod
    def _interrupt(slot: Slot, turn: QueuedTurn) -> None:
        turn.token.cancel()

    # --- running ----------------------------------------------------------------------------

    async def _drain(self, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        while True:
            slot.again = False
            if (turn := await self._next(slot)) is None:
                if slot.again:  # woken while it looked: a turn may have come meanwhile
                    continue
                break
            if self.stopping:
                self._not_run(turn, STOPPING)
                continue
            slot.running, turn.state = turn, "running"
            started = METRICS.turn_started(time.monotonic() - turn.queued_at)
            try:
                await loop.run_in_executor(self.pool, self._run, slot, turn, loop)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the session's queue
                log.warning("turn %s failed: %s: %s", turn.id, type(exc).__name__, exc)
                METRICS.error("turn")
                turn.feed.push({"type": "error", "message": f"{type(exc).__name__}: {exc}"})
            finally:
                slot.running, turn.state = None, "done"
                turn.feed.close()
            took = METRICS.turn_ended(started, *ended_how(turn.feed))
            slot.seconds_per_turn = 0.7 * slot.seconds_per_turn + 0.3 * took
        self._drained(slot)

    def _drained(self, slot: Slot) -> None:
        """The slot's queue is empty: let the session go once idle long enough."""
        self.coordination.drained(slot)

    def _let_go_later(self, slot: Slot) -> None:
        """Let the session go once idle for ``idle_seconds``."""
        if not self.stopping and self.idle_seconds >= 0:
            slot.idle_timer = asyncio.get_running_loop().call_later(self.idle_seconds,
                                                                    self._let_go, slot)

    async def _next(self, slot: Slot) -> QueuedTurn | None:
        """The session's next turn, in the order the turns came."""
        return await self.coordination.next_turn(slot)

    def _not_run(self, turn: QueuedTurn, why: str) -> None:
        turn.feed.push({"type": "error", "message": why})
        turn.feed.push(event_json(ev.TurnDone("", failed=True, session_key=turn.key))[0])
        turn.state = "done"
        turn.feed.close()

    def _run(self, slot: Slot, turn: QueuedTurn, loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: open the session if needed and run the turn through
        ``Chat.handle`` (a job's run: ``in_session.run_in_chat``), handing each event line
        to the feed on the loop."""
        def push(line: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(turn.feed.push, line)

        if slot.chat is None:
            try:
                runtime = self.agents.runtime(slot.agent_id)
                slot.chat = Chat.open(runtime, slot.key)
            except ClawdError as exc:
                push({"type": "error", "message": http_message(exc)})
                push(event_json(ev.TurnDone("", failed=True, session_key=slot.key))[0])
                return
        slot.chat.session.lease.describe(None)  # a turn runs: no time to let go yet
        self.agents.approvals.bind(turn, push)  # its tools that ask ask the page that sent it
        try:
            drive(run_in_chat(slot.chat, turn.job, turn.token) if turn.job is not None
                  else slot.chat.handle(turn.text, turn.images, turn.token), self._render(push))
        finally:  # a waiting CLI is told when the idle session will be let go
            slot.chat.session.lease.describe(time.time() + max(self.idle_seconds, 0))
            if turn.ephemeral:
                self._set_aside(slot)
        self.coordination.ran(slot)

    @staticmethod
    def _set_aside(slot: Slot) -> None:
        """Close the session of an ephemeral turn and delete it, its transcript kept."""
        from clawd.storage.session_admin import set_aside

        chat, slot.chat = slot.chat, None
        if chat is not None:
            runtime = chat.session.rt
            chat.close()
            try:
                set_aside(runtime.storage, slot.key)
            except ClawdError as exc:
                log.warning("session %s was not set aside: %s", slot.key, exc)

    @staticmethod
    def _render(push: Callable[[dict[str, Any]], None]) -> Callable[[Any], bool]:
        def render(event: Any) -> bool:
            for line in event_json(event, deltas=True):
                push(line)
            return False

        return render

    def _let_go(self, slot: Slot) -> None:
        """Close an idle session (its lock goes back to the CLI); forget an empty slot."""
        slot.idle_timer = None
        self.coordination.let_go(slot)

    async def release(self, agent_id: str, key: str) -> None:
        """Let go of an idle session now (before it is deleted): its lock is freed."""
        self._idle_now(agent_id, key)

    # --- stopping ---------------------------------------------------------------------------

    def begin_stop(self) -> None:
        """SIGTERM: take no new turns; queued ones are answered "not sent"; running ones
        are stopped as Ctrl-C does once the grace period is over."""
        if self.stopping:
            return
        self.stopping = True
        self.coordination.begin_stop()
        asyncio.get_running_loop().call_later(self.grace, self._interrupt_all)

    def _interrupt_all(self) -> None:
        for slot in self.slots.values():
            if slot.running is not None:
                self._interrupt(slot, slot.running)

    async def idle(self) -> None:
        """Return once no turn runs or waits (after ``begin_stop``: once the running ones
        have finished or been stopped)."""
        while any(s.running is not None or s.queue or (s.worker and not s.worker.done())
                  for s in self.slots.values()):
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Stop: running turns get the grace period, then Ctrl-C; every session is closed
        (each transcript line is written before its event is sent, so nothing is lost)."""
        self.begin_stop()
        workers = [s.worker for s in self.slots.values() if s.worker and not s.worker.done()]
        if workers:
            await asyncio.wait(workers)  # the grace period's timer stops them in time
        for slot in list(self.slots.values()):
            if slot.idle_timer is not None:
                slot.idle_timer.cancel()
            if slot.chat is not None:
                slot.chat.close()
                slot.chat = None
        self.slots.clear()
        self.pool.shutdown(wait=True)
        self.agents.close()
