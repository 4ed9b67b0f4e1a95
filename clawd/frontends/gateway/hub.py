"""One writer per session across every client: a queue per session, turns on worker threads.

Every message or command for a session becomes a ``QueuedTurn`` in that session's queue
(``Slot``); the slot runs its turns one at a time, each on a worker thread driving the
session's ``Chat.handle`` (the REPL's entry point: the same commands, flush, hooks and
rules), and its events go to the turn's ``Feed`` on the event loop. Different sessions run
at the same time. A queue holds at most ``gateway.maxQueuedPerSession`` waiting turns;
past that ``submit`` raises ``QueueFull`` with a time to retry after. A send with an
idempotency key already seen returns the turn it started (never a second run).

A turn belongs to no connection: a client that goes away leaves it running, and its reply
is in the history (and in the feed) when the client comes back. ``abort`` stops a
session's running turn as Ctrl-C does (``Session.cancel`` for a reply streaming in, the
same interrupt thrown into the turn at its next event otherwise): the partial reply is
kept, marked interrupted. A slot holds its ``Chat`` (and so the session's lock, which the
CLI honours) while turns come, and lets it go after ``gateway.idleSessionSeconds``.
With ``shared`` (several workers on one database, ``storage.postgres.shared``) a session's
queue is in the database, one for every worker: a message is queued there in arrival order
wherever it arrives, and the worker that holds the session (its lease) claims and runs its
turns one after the other, whichever worker they reached; a worker that does not hold the
session takes it if nobody does, else hands back a ``RemoteTurn`` its client follows
through the stored lines. Nobody waits on a lease: a holder with nothing queued lets the
session go after ``gateway.idleSessionSeconds`` (at once when a chat elsewhere asks), and
every worker looks each second for turns queued for a session nobody runs (its holder let
go or died) and takes them; a turn nobody could take in ``SHARED_WAIT_SECONDS`` (a chat in a
terminal holds its session) ends with an error. A send retried on another worker, an
abort (of the running turn) and the bound on waiting turns reach across workers.
``stop`` (SIGTERM) refuses new turns, lets running ones go on for
``gateway.shutdownGraceSeconds``, then stops them as Ctrl-C does; queued turns are not run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from clawd.core import events as ev
from clawd.core.errors import ClawdError, http_message
from clawd.frontends.commands import Chat
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.feed import Feed
from clawd.frontends.gateway.shared import StoredFeed, sink
from clawd.frontends.render import drive, event_json
from clawd.sessions.lock import SessionBusyError

log = logging.getLogger(__name__)

MAX_THREADS = 64  # turns running at once, over all sessions
SHARED_WAIT_SECONDS = 600.0  # a turn waits this long for its session to be free
SWEEP_SECONDS = 1.0  # how often a worker looks for turns queued for a session nobody runs
NOT_TAKEN = ("the session stayed in use elsewhere (a chat in a terminal?) for 10 minutes; "
             "the message was not sent")
IDEMPOTENCY_KEYS = 1000  # sends remembered for their idempotency key
# events of a turn under way (its token made): an abort seen at one stops the turn
INTERRUPTIBLE = (ev.TextDelta, ev.ToolStarted, ev.ToolFinished, ev.Waiting, ev.Recalled,
                 ev.Flushed, ev.Compacted)


class QueueFull(ClawdError):
    def __init__(self, key: str, retry_after: int):
        super().__init__(f"session {key} already has the most turns waiting; try again in "
                         f"{retry_after} s")
        self.retry_after = retry_after


class Stopping(ClawdError):
    """The gateway is shutting down and takes no new turns."""


class IdempotencyConflict(ClawdError):
    """An idempotency key came back with a different message."""

    @classmethod
    def of(cls, idempotency: str, key: str) -> IdempotencyConflict:
        return cls(f"the idempotency key {idempotency!r} was used for another message to "
                   f"{key}; use a new key for a new message")


@dataclass(eq=False)
class QueuedTurn:
    """One message or command sent to a session, and what it produced."""

    id: str
    agent_id: str
    key: str
    text: str
    feed: Feed = field(default_factory=Feed)
    state: str = "queued"  # queued | running | done
    ephemeral: bool = False  # its session is set aside when it ends (nobody can return)
    abort: bool = False
    interrupted: bool = False  # the abort's interrupt has been delivered

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "agent": self.agent_id, "sessionKey": self.key,
                "state": self.state}


@dataclass(eq=False)
class RemoteTurn:
    """A turn another worker runs (with shared state): followed through its stored lines."""

    id: str
    agent_id: str
    key: str
    feed: StoredFeed
    state: str = "running"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "agent": self.agent_id, "sessionKey": self.key,
                "state": self.state}


@dataclass(eq=False)
class Slot:
    """One session's queue and, while it is in use, its open ``Chat``."""

    agent_id: str
    key: str
    queue: deque[QueuedTurn] = field(default_factory=deque)
    running: QueuedTurn | None = None
    chat: Chat | None = None
    worker: asyncio.Task[None] | None = None
    idle_timer: asyncio.TimerHandle | None = None
    seconds_per_turn: float = 5.0  # a moving average, for Retry-After
    # with shared state: held while the session is taken or let go; how many wait for it
    taking: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Hub:
    """Every session the gateway has touched (see the module docstring)."""

    def __init__(self, agents: ServedAgents, *, max_queued: int = 8, idle_seconds: float = 60,
                 grace_seconds: float = 10, new_id: Callable[[], str] | None = None,
                 shared: Any = None):
        from clawd.core.messages import new_id as make_id

        self.agents = agents
        # ``storage.postgres.shared.PgShared``: turns and their lines other workers see; an
        # idle session is let go at once when another worker waits for it
        self.shared = shared
        self.max_queued, self.idle_seconds, self.grace = max_queued, idle_seconds, grace_seconds
        self.new_id = new_id or make_id
        self.slots: dict[tuple[str, str], Slot] = {}
        self.turns: OrderedDict[str, QueuedTurn] = OrderedDict()  # by id, recent ones
        self.sent: OrderedDict[tuple[str, str, str], QueuedTurn] = OrderedDict()  # idempotency
        self.pool = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="clawd-turn")
        self.stopping = False
        self._sweeper: asyncio.Task[None] | None = None

    # --- sending ----------------------------------------------------------------------------

    async def submit(self, agent_id: str, key: str, text: str, idempotency: str | None = None,
                     *, ephemeral: bool = False) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """Queue ``text`` (a message or a /command) for the session; the turn and whether
        it is new (False: a retried send, the turn it started the first time).
        ``ephemeral``: the session is set aside (deleted, its transcript kept) when the turn
        ends. The shared state's queries (several workers) run off the event loop."""
        if idempotency:
            seen = self.sent.get((agent_id, key, idempotency))
            if seen is not None:
                if seen.text != text:
                    raise IdempotencyConflict.of(idempotency, key)
                return seen, False
        if self.stopping:
            raise Stopping("the gateway is shutting down; the message was not sent")
        turn_id = self.new_id()
        if self.shared is not None:
            return await self._submit_shared(turn_id, agent_id, key, text, idempotency,
                                             ephemeral)
        slot = self._slot(agent_id, key)
        waiting = len(slot.queue) + (1 if slot.running is not None else 0)
        if waiting > self.max_queued:
            raise QueueFull(key, max(1, min(60, round(slot.seconds_per_turn * waiting))))
        turn = QueuedTurn(turn_id, agent_id, key, text, ephemeral=ephemeral)
        self._remember(turn, idempotency)
        slot.queue.append(turn)
        self._wake(slot)
        return turn, True

    async def _submit_shared(self, turn_id: str, agent_id: str, key: str, text: str,
                             idempotency: str | None, ephemeral: bool
                             ) -> tuple[QueuedTurn | RemoteTurn, bool]:
        """``submit`` with several workers: queued in the database, run here if this worker
        holds the session or can take it, else followed as the holder runs it."""
        shared = self.shared
        other = await asyncio.to_thread(shared.begin, turn_id, agent_id, key, text,
                                        idempotency, ephemeral)
        if other is not None:  # a retry of a send another worker took
            if not other[1]:
                raise IdempotencyConflict.of(str(idempotency), key)
            return self.turn(other[0]) or self._remote(other[0], agent_id, key), False
        slot = self._slot(agent_id, key)
        # every worker's turns of the session, this one's too
        waiting = await asyncio.to_thread(shared.waiting, agent_id, key) - 1
        if waiting > self.max_queued and await asyncio.to_thread(shared.drop, turn_id):
            raise QueueFull(key, max(1, min(60, round(slot.seconds_per_turn * waiting))))
        turn = QueuedTurn(turn_id, agent_id, key, text, ephemeral=ephemeral,
                          feed=Feed(sink(shared, turn_id), shared.settle))
        self._remember(turn, idempotency)
        try:
            taken = await self._take(slot)
        except ClawdError as exc:  # the session cannot be opened at all
            if await asyncio.to_thread(shared.withdraw, turn_id):
                self._not_run(turn, str(exc))
            return turn, True
        if taken:
            return turn, True
        self.turns.pop(turn_id, None)  # the session's holder runs it: followed from here
        return self._remote(turn_id, agent_id, key, "queued"), True

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

    async def _take(self, slot: Slot) -> bool:
        """With shared state: hold the session (if nobody does) and run what is queued for
        it; whether this worker holds it. Raises ``ClawdError`` when it cannot be opened."""
        slot.users += 1
        try:
            async with slot.taking:
                if slot.chat is None and not self.stopping:
                    runtime = self.agents.runtime(slot.agent_id)
                    try:
                        slot.chat = await asyncio.get_running_loop().run_in_executor(
                            self.pool, partial(Chat, runtime, slot.key, wait=0))
                    except SessionBusyError:
                        return False
                if slot.chat is None:
                    return False
                self._wake(slot)
                return True
        finally:
            slot.users -= 1

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

    def turn(self, turn_id: str) -> QueuedTurn | RemoteTurn | None:
        """A turn of this worker, or with shared state, of any worker; no id with a NUL."""
        found = self.turns.get(turn_id)
        if found is not None or self.shared is None or not turn_id.isprintable():
            return found
        about = self.shared.turn(turn_id)
        return None if about is None else self._remote(turn_id, about["agent"], about["key"],
                                                       about["state"])

    def _remote(self, turn_id: str, agent_id: str, key: str, state: str = "running"
                ) -> RemoteTurn:
        return RemoteTurn(turn_id, agent_id, key, StoredFeed(self.shared, turn_id), state)

    async def busy(self, agent_id: str, key: str) -> dict[str, Any]:
        """The session's running turn and how many wait behind it (on any worker)."""
        return (await self.busy_of(agent_id, [key]))[key]

    async def busy_of(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """``busy`` of several sessions: from this worker's slots, or with shared state
        from every worker's turns (one query)."""
        if self.shared is not None:
            return await asyncio.to_thread(self.shared.busy, agent_id, keys)
        slots = {key: self.slots.get((agent_id, key)) for key in keys}
        return {key: {"running": slot.running.id if slot and slot.running else None,
                      "queued": len(slot.queue) if slot else 0} for key, slot in slots.items()}

    def abort(self, agent_id: str, key: str) -> QueuedTurn | RemoteTurn | None:
        """Stop the session's running turn as Ctrl-C does, on this worker or (with shared
        state) the one running it; the turn, or None if none ran."""
        slot = self.slots.get((agent_id, key))
        if slot is None or slot.running is None:
            found = self.shared.request_abort(agent_id, key) if self.shared else None
            return self._remote(found, agent_id, key) if found else None
        self._interrupt(slot, slot.running)
        return slot.running

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """With shared state: hear the aborts other workers are asked for, the sessions a
        chat elsewhere waits for and the turns queued for the sessions this worker holds;
        look each ``SWEEP_SECONDS`` for turns queued for a session nobody runs."""
        if self.shared is None:
            return
        self.shared.listen(
            lambda turn_id: loop.call_soon_threadsafe(self._aborted, turn_id),
            lambda agent_id, key: loop.call_soon_threadsafe(self._idle_now, agent_id, key),
            lambda agent_id, key: loop.call_soon_threadsafe(self._queued, agent_id, key))
        self._sweeper = loop.create_task(self._sweep())

    def _queued(self, agent_id: str, key: str) -> None:
        """A turn was queued for the session on some worker: run it if this worker holds
        the session."""
        slot = self.slots.get((agent_id, key))
        if slot is not None and slot.chat is not None and not self.stopping:
            self._wake(slot)

    async def _sweep(self) -> None:
        from clawd.frontends.gateway.shared import failed_lines

        while not self.stopping:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await asyncio.to_thread(self.shared.expire, SHARED_WAIT_SECONDS, partial(
                    failed_lines, message=NOT_TAKEN))
                found = await asyncio.to_thread(self.shared.waiting_sessions, SWEEP_SECONDS)
                for agent_id, key in found:
                    if (agent_id, key) not in self.slots or \
                            self.slots[(agent_id, key)].chat is None:
                        await self._take(self._slot(agent_id, key))
            except Exception as exc:  # noqa: BLE001 - look again at the next sweep
                log.warning("looking for waiting turns: %s: %s", type(exc).__name__, exc)

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
        turn.abort = True
        if slot.chat is not None:
            slot.chat.session.cancel()

    # --- running ----------------------------------------------------------------------------

    async def _drain(self, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        while (turn := await self._next(slot)) is not None:
            if self.stopping:
                self._not_run(turn, "the gateway is shutting down; the message was not sent")
                continue
            slot.running, turn.state = turn, "running"
            started = time.monotonic()
            try:
                await loop.run_in_executor(self.pool, self._run, slot, turn, loop)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the session's queue
                log.warning("turn %s failed: %s: %s", turn.id, type(exc).__name__, exc)
                turn.feed.push({"type": "error", "message": f"{type(exc).__name__}: {exc}"})
            finally:
                slot.running, turn.state = None, "done"
                turn.feed.close()
            took = time.monotonic() - started
            slot.seconds_per_turn = 0.7 * slot.seconds_per_turn + 0.3 * took
        if self.shared is not None and slot.chat is None:  # set aside: others may wait
            self._let_go(slot)
        elif not self.stopping and self.idle_seconds >= 0:
            slot.idle_timer = loop.call_later(self.idle_seconds, self._let_go, slot)

    async def _next(self, slot: Slot) -> QueuedTurn | None:
        """The slot's next turn: this worker's queue, or with shared state the session's
        oldest queued turn on any worker (while this worker holds the session)."""
        if self.shared is None:
            return slot.queue.popleft() if slot.queue else None
        if slot.chat is None or self.stopping:
            return None
        claimed = await asyncio.to_thread(self.shared.claim, slot.agent_id, slot.key)
        if claimed is None:
            return None
        turn_id, text, ephemeral = claimed
        turn = self.turns.get(turn_id)
        if turn is None or turn.state != "queued":  # another worker's: run here
            turn = QueuedTurn(turn_id, slot.agent_id, slot.key, text, ephemeral=ephemeral,
                              feed=Feed(sink(self.shared, turn_id), self.shared.settle))
            self._remember(turn, None)
        return turn

    def _not_run(self, turn: QueuedTurn, why: str) -> None:
        turn.feed.push({"type": "error", "message": why})
        turn.feed.push(event_json(ev.TurnDone("", failed=True, session_key=turn.key))[0])
        turn.state = "done"
        turn.feed.close()

    def _run(self, slot: Slot, turn: QueuedTurn, loop: asyncio.AbstractEventLoop) -> None:
        """On a worker thread: open the session if needed and run the turn through
        ``Chat.handle``, handing each event line to the feed on the loop."""
        def push(line: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(turn.feed.push, line)

        if slot.chat is None:
            try:
                runtime = self.agents.runtime(slot.agent_id)
                slot.chat = Chat(runtime, slot.key)
            except ClawdError as exc:
                push({"type": "error", "message": http_message(exc)})
                push(event_json(ev.TurnDone("", failed=True, session_key=slot.key))[0])
                return
        slot.chat.session.lease.describe(None)  # a turn runs: no time to let go yet
        try:
            drive(slot.chat.handle(turn.text), self._render(turn, push, slot.chat.session.cancel))
        finally:  # a waiting CLI is told when the idle session will be let go
            slot.chat.session.lease.describe(time.time() + max(self.idle_seconds, 0))
            if turn.ephemeral:
                self._set_aside(slot)

    @staticmethod
    def _set_aside(slot: Slot) -> None:
        """Close the session of an ephemeral turn and delete it, its transcript kept."""
        from clawd.frontends.cli.sessions import set_aside

        chat, slot.chat = slot.chat, None
        if chat is not None:
            runtime = chat.session.rt
            chat.session.close()
            try:
                set_aside(runtime.storage, slot.key)
            except ClawdError as exc:
                log.warning("session %s was not set aside: %s", slot.key, exc)

    @staticmethod
    def _render(turn: QueuedTurn, push: Callable[[dict[str, Any]], None],
                cancel: Callable[[], None]) -> Callable[[Any], bool]:
        def render(event: Any) -> bool:
            for line in event_json(event, deltas=True):
                push(line)
            if turn.abort and not turn.interrupted and isinstance(event, INTERRUPTIBLE):
                turn.interrupted = True  # an abort that came before the turn's token
                cancel()
            if isinstance(event, ev.TurnDone):
                turn.interrupted = True  # the turn has ended: nothing more to stop
            return False

        return render

    def _let_go(self, slot: Slot) -> None:
        """Close an idle session (its lock goes back to the CLI); forget an empty slot."""
        slot.idle_timer = None
        if slot.queue or slot.running is not None:
            return
        if self.shared is not None:
            asyncio.get_running_loop().create_task(self._give_back(slot))
            return
        chat, slot.chat = slot.chat, None
        if chat is not None:
            chat.session.close()
        self.slots.pop((slot.agent_id, slot.key), None)

    async def _give_back(self, slot: Slot) -> None:
        """With shared state: let go of an idle session off the event loop; a turn queued
        for it meanwhile is taken again (it was queued before its worker tried the
        session, or this worker still held it then)."""
        slot.users += 1
        try:
            async with slot.taking:
                if slot.running is not None or slot.idle_timer is not None or (
                        slot.worker is not None and not slot.worker.done()):
                    return  # a turn came meanwhile
                chat, slot.chat = slot.chat, None
                if chat is not None:
                    await asyncio.get_running_loop().run_in_executor(self.pool,
                                                                     chat.session.close)
        finally:
            slot.users -= 1
        if not self.stopping and await asyncio.to_thread(self.shared.queued, slot.agent_id,
                                                         slot.key):
            await self._take(slot)
        elif slot.chat is None and slot.users == 0 and self.slots.get(
                (slot.agent_id, slot.key)) is slot:
            del self.slots[(slot.agent_id, slot.key)]

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
        for slot in self.slots.values():
            while slot.queue:
                self._not_run(slot.queue.popleft(), "the gateway is shutting down; the "
                              "message was not sent")
        loop = asyncio.get_running_loop()
        if self.shared is not None:  # this worker's clients are told; the rest run elsewhere
            loop.create_task(self._unsend([t for t in self.turns.values()
                                           if t.state == "queued"]))
        loop.call_later(self.grace, self._interrupt_all)

    async def _unsend(self, turns: list[QueuedTurn]) -> None:
        for turn in turns:
            if await asyncio.to_thread(self.shared.withdraw, turn.id):
                self._not_run(turn, "the gateway is shutting down; the message was not sent")

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
        if self._sweeper is not None:
            self._sweeper.cancel()
        workers = [s.worker for s in self.slots.values() if s.worker and not s.worker.done()]
        if workers:
            await asyncio.wait(workers)  # the grace period's timer stops them in time
        for slot in list(self.slots.values()):
            if slot.idle_timer is not None:
                slot.idle_timer.cancel()
            if slot.chat is not None:
                slot.chat.session.close()
                slot.chat = None
        self.slots.clear()
        self.pool.shutdown(wait=True)
        self.agents.close()
