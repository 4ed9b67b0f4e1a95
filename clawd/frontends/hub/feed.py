"""A turn's events as the ``--json --stream`` lines, kept for whoever follows them.

The worker thread running a turn hands each line to the event loop (``push``, through
``call_soon_threadsafe``); any number of readers ``follow`` the feed from any position, so
a client that disconnects and comes back (``Last-Event-ID``) or retries the send with the
same idempotency key gets the same events, numbered the same. When the turn ends the feed
drops its text deltas (the ``reply`` line holds the whole text) to stay small; the other
lines keep their numbers. ``sse`` writes one line as a server-sent event; ``follow`` with
``keepalive`` marks the quiet moments of a stream, for a keep-alive comment every 15 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

HEARTBEAT_SECONDS = 15.0  # a comment line in a stream quiet this long
KEEP_ALIVE = b": keep-alive\n\n"  # an SSE comment: every client skips it


class Feed:
    """The numbered event lines of one turn; touched only on the event loop's thread."""

    def __init__(self, sink: Callable[[int, dict[str, Any] | None], None] | None = None,
                 wait_written: Callable[[], None] | None = None) -> None:
        self.lines: list[tuple[int, dict[str, Any]]] = []
        self.count = 0
        self.closed = False
        self._changed = asyncio.Event()
        self._sink = sink  # each line (and None at the end) also goes there: other workers
        # waits until what the sink was handed is kept: a follower's stream ends only once
        # every worker can see the turn ended (its session no longer busy)
        self._wait_written = wait_written

    def push(self, line: dict[str, Any]) -> None:
        self.lines.append((self.count, line))
        if self._sink is not None:
            self._sink(self.count, line)
        self.count += 1
        self._wake()

    def close(self) -> None:
        """The turn has ended: no more lines; deltas are dropped for whoever follows from
        now on (the list a follower is reading is left as it is)."""
        self.closed = True
        self.lines = [(n, line) for n, line in self.lines if line.get("type") != "delta"]
        if self._sink is not None:
            self._sink(self.count, None)
        self._wake()

    async def relay(self, source: Any) -> None:
        """Take the lines of ``source`` (a ``StoredFeed``: the turn ran on another worker)
        as this feed's own, numbered as they are there, until the turn ends; none goes
        back to the sink."""
        self._sink = None
        async for number, line in source.lines_of(self.count - 1):
            self.lines.append((number, line))
            self.count = number + 1
            self._wake()
        self.close()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int = -1, *, keepalive: float | None = None
                     ) -> AsyncIterator[tuple[int, dict[str, Any]] | None]:
        """Every line numbered above ``after``, then each new one, until the turn ends; with
        ``keepalive``, a None after each that many seconds without one (the moments for a
        stream to send a comment, so a proxy keeps a connection a slow model leaves quiet)."""
        # the list as it grows, read to its end: ``close`` puts a copy without the deltas in
        # its place, so a follower that came before the end still gets every line
        lines, seen = self.lines, 0
        while True:
            changed = self._changed
            while seen < len(lines):
                number, line = lines[seen]
                seen += 1
                if number > after:
                    after = number
                    yield number, line
            if self.closed:
                if self._wait_written is not None:
                    await asyncio.to_thread(self._wait_written)
                return
            if keepalive is None:
                await changed.wait()
                continue
            try:
                await asyncio.wait_for(changed.wait(), keepalive)
            except TimeoutError:
                yield None

    async def lines_of(self, after: int = -1) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """``follow`` without keep-alives: the lines alone."""
        async for found in self.follow(after):
            if found is not None:
                yield found


def sse(number: int, line: dict[str, Any]) -> bytes:
    """One event as SSE: its number as the ``id`` (for ``Last-Event-ID``), its JSON as data."""
    return f"id: {number}\ndata: {json.dumps(line, ensure_ascii=False)}\n\n".encode()


def ended_how(feed: Feed) -> tuple[bool, bool]:
    """How the turn that wrote ``feed`` ended: (failed, stopped by an abort or a shutdown),
    read from its ``done`` line; a turn without one (a command) failed if it told of an
    error."""
    for _, line in reversed(feed.lines):
        if line.get("type") == "done":
            return bool(line.get("failed")), bool(line.get("aborted") or
                                                  line.get("interrupted"))
    return any(line.get("type") == "error" for _, line in feed.lines), False
