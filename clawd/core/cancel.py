"""Stopping a turn under way: a token anyone may set, and the one exception its checks raise.

A turn is stopped by its user in three ways: Ctrl-C in a terminal, a stop over HTTP (the
gateway's abort, the page's stop button) and the gateway's drain on SIGTERM. The last two
come from another thread or task. Each sets the turn's ``CancelToken``; the parts of a turn
that wait check it (the reply's stream between deltas, the steps between model calls, a
command run by ``exec``, an MCP call) and raise ``Cancelled`` there, in the turn's own
thread. Ctrl-C arrives as Python's ``KeyboardInterrupt`` wherever the main thread is; the
loop takes it as the same stop (``Cancelled``) at the points it can land.

``Cancelled`` is a ``BaseException``, as ``KeyboardInterrupt`` is: a tool's ``except
Exception`` must not swallow a stop. ``partial`` is the reply streamed before it.
"""

from __future__ import annotations

import threading


class Cancelled(BaseException):
    """The turn was stopped by its user; ``partial``: the reply's text streamed so far."""

    def __init__(self, partial: str = ""):
        super().__init__("stopped")
        self.partial = partial


class CancelToken:
    """Set once, from any thread, to stop the turn that holds it."""

    def __init__(self) -> None:
        self._set = threading.Event()

    def cancel(self) -> None:
        self._set.set()

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    def check(self) -> None:
        """Raise ``Cancelled`` when the turn was stopped."""
        if self._set.is_set():
            raise Cancelled()
