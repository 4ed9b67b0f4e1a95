"""The gateway's side of what several workers share (``storage.postgres.shared``): a turn
another worker runs, followed through its stored lines (``StoredFeed``), and the sink that
stores this worker's lines (``sink``). Without ``storage.url`` none of this is used: one
process holds everything in memory, as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from clawd.core import events as ev
from clawd.core.errors import StoreUnavailable
from clawd.frontends.render import event_json

POLL_SECONDS = 0.1  # how often a follower on another worker looks for new lines
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


class StoredFeed:
    """The lines of a turn another worker runs, as ``Feed`` offers them: ``follow`` polls
    the database until the turn has ended."""

    def __init__(self, shared: Any, turn_id: str):
        self.shared, self.turn_id = shared, turn_id

    async def follow(self, after: int = -1, *, keepalive: float | None = None
                     ) -> AsyncIterator[tuple[int, dict[str, Any]] | None]:
        quiet = failing = time.monotonic()
        while True:
            try:
                rows, ended = await run_in_threadpool(self.shared.events_after, self.turn_id,
                                                      after)
                failing = time.monotonic()
            except StoreUnavailable:  # an outage: the stream waits for the database a while
                if time.monotonic() - failing > OUTAGE_SECONDS:
                    raise
                rows, ended = [], False
            for number, line in rows:
                after = number
                quiet = time.monotonic()
                yield number, line
            if ended and not rows:
                return
            if keepalive is not None and time.monotonic() - quiet >= keepalive:
                quiet = time.monotonic()
                yield None
            await asyncio.sleep(POLL_SECONDS)

    async def lines_of(self, after: int = -1) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        async for found in self.follow(after):
            if found is not None:
                yield found
