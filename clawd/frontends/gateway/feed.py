"""A turn's events as the ``--json --stream`` lines, kept for whoever follows them.

The worker thread running a turn hands each line to the event loop (``push``, through
``call_soon_threadsafe``); any number of readers ``follow`` the feed from any position, so
a client that disconnects and comes back (``Last-Event-ID``) or retries the send with the
same idempotency key gets the same events, numbered the same. When the turn ends the feed
drops its text deltas (the ``reply`` line holds the whole text) to stay small; the other
lines keep their numbers. ``sse`` writes one line as a server-sent event; ``heartbeat``
marks the quiet moments of a stream, for a keep-alive comment every 15 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, TypeVar

T = TypeVar("T")
HEARTBEAT_SECONDS = 15.0  # a comment line in a stream quiet this long
KEEP_ALIVE = b": keep-alive\n\n"  # an SSE comment: every client skips it


class Feed:
    """The numbered event lines of one turn; touched only on the event loop's thread."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, dict[str, Any]]] = []
        self.count = 0
        self.closed = False
        self._changed = asyncio.Event()

    def push(self, line: dict[str, Any]) -> None:
        self.lines.append((self.count, line))
        self.count += 1
        self._wake()

    def close(self) -> None:
        """The turn has ended: no more lines; deltas are dropped."""
        self.closed = True
        self.lines = [(n, line) for n, line in self.lines if line.get("type") != "delta"]
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int = -1) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """Every line numbered above ``after``, then each new one, until the turn ends."""
        seen = 0  # lines read of the list as it grows (it is only appended to until closed)
        while True:
            changed, lines = self._changed, self.lines
            if self.closed:
                for number, line in lines:
                    if number > after:
                        yield number, line
                return
            while seen < len(lines):
                number, line = lines[seen]
                seen += 1
                if number > after:
                    after = number
                    yield number, line
            await changed.wait()


async def heartbeat(lines: AsyncIterator[T], every: float | None = None
                    ) -> AsyncIterator[T | None]:
    """``lines`` as they come, with a None after each ``every`` seconds (default
    ``HEARTBEAT_SECONDS``) without one: the moments to send a keep-alive, so a proxy that
    drops quiet connections keeps a stream whose turn is waiting on a slow model."""
    wait = HEARTBEAT_SECONDS if every is None else every
    source = aiter(lines)
    pending: asyncio.Task[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=wait)
            if not done:
                yield None
                continue
            try:
                found = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield found
    finally:
        if pending is not None:
            pending.cancel()


def sse(number: int, line: dict[str, Any]) -> bytes:
    """One event as SSE: its number as the ``id`` (for ``Last-Event-ID``), its JSON as data."""
    return f"id: {number}\ndata: {json.dumps(line, ensure_ascii=False)}\n\n".encode()
