"""The hub's side of the event lines several workers share (``storage.postgres.shared``): a
turn another worker runs, followed through its stored lines (``StoredFeed``), and the sink
that stores this worker's lines (``sink``); ``postgres.PgCoordination`` uses them. Without
``storage.url`` none of this is used: one process holds everything in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from clawd.core import events as ev
from clawd.core.errors import StoreUnavailable
from clawd.frontends.render import event_json

POLL_SECONDS = 0.1  # how often a follower on another worker looks for new lines
HEARD_POLL_SECONDS = 1.0  # the same, when it is woken by the lines' NOTIFY
OUTAGE_SECONDS = 60.0  # a follower's stream waits this long for a database that stopped
STOPPED = ("the worker running this turn stopped before it ended; the message is kept in "
           "the session, the reply is cut short there")


def failed_lines(key: str, message: str) -> list[dict[str, Any]]:
    """How a turn that failed outside its worker's hands ends for its followers: an
    ``error`` line, then the ``done`` line of a failed turn, as every turn's."""
    return [{"type": "error", "message": message},
            *event_json(ev.TurnDone("", failed=True, session_key=key))]


def stopped_lines(key: str) -> list[dict[str, Any]]:
    """How a turn whose worker died ends for its followers."""
    return failed_lines(key, STOPPED)


def sink(shared: Any, turn_id: str) -> Callable[[int, dict[str, Any] | None], None]:
    """What a ``Feed`` hands its lines to: the shared store (None: the turn ended)."""
    def keep(seq: int, line: dict[str, Any] | None) -> None:
        if line is None:
            shared.finish(turn_id)
        else:
            shared.publish(turn_id, seq, line)
    return keep


class Wakers:
    """This worker's followers of turns other workers run, each woken when lines of its
    turn are written (heard through ``NOTIFY``) rather than polling every moment."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}

    def arm(self, turn_id: str) -> asyncio.Event:
        """An event set at the next lines of ``turn_id`` (armed before the lines are read:
        none written meanwhile is missed)."""
        event = asyncio.Event()
        self._waiting.setdefault(turn_id, set()).add(event)
        return event

    def disarm(self, turn_id: str, event: asyncio.Event) -> None:
        found = self._waiting.get(turn_id)
        if found is not None:
            found.discard(event)
            if not found:
                del self._waiting[turn_id]

    def followed(self, turn_id: str) -> bool:
        """Whether a follower here waits for lines of ``turn_id``: safe to ask from the
        listener's thread (a follower arms before it reads, so one that arms after this
        answer reads the lines the notice was about)."""
        return turn_id in self._waiting

    def wake(self, turn_id: str) -> None:
        for event in self._waiting.get(turn_id, ()):
            event.set()


class StoredFeed:
    """The lines of a turn another worker runs, as ``Feed`` offers them: ``follow`` reads
    the database until the turn has ended, again each time ``wakers`` says lines came (at
    least every ``HEARD_POLL_SECONDS``), or every ``POLL_SECONDS`` without them."""

    def __init__(self, shared: Any, turn_id: str, wakers: Wakers | None = None):
        self.shared, self.turn_id, self.wakers = shared, turn_id, wakers

    async def follow(self, after: int = -1, *, keepalive: float | None = None
                     ) -> AsyncIterator[tuple[int, dict[str, Any]] | None]:
        quiet = failing = time.monotonic()
        while True:
            woken = self.wakers.arm(self.turn_id) if self.wakers is not None else None
            try:
                rows, ended = await run_in_threadpool(self.shared.events_after, self.turn_id,
                                                      after)
                failing = time.monotonic()
            except StoreUnavailable:  # an outage: the stream waits for the database a while
                if time.monotonic() - failing > OUTAGE_SECONDS:
                    raise
                rows, ended = [], False
            try:
                for number, line in rows:
                    after = number
                    quiet = time.monotonic()
                    yield number, line
                if ended and not rows:
                    return
                if keepalive is not None and time.monotonic() - quiet >= keepalive:
                    quiet = time.monotonic()
                    yield None
                if woken is None:
                    await asyncio.sleep(POLL_SECONDS)
                elif not rows:  # lines came: read again at once, else wait to hear of more
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), HEARD_POLL_SECONDS)
            finally:
                if woken is not None and self.wakers is not None:
                    self.wakers.disarm(self.turn_id, woken)

    async def lines_of(self, after: int = -1) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        async for found in self.follow(after):
            if found is not None:
                yield found
