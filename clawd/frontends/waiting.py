"""The REPL's waiting line: what clawd is waiting for, and for how long, while nothing shows.

A model can take a minute before its first token (a small local model reading a long
history), and a memory flush or a compaction is a silent model call of its own. After a
``Waiting`` event, and until the next event, ``WaitingLine`` keeps one line at the bottom of
the terminal up to date from a background thread: a spinner, what is under way, the seconds
so far, and the status line's model and context share (``waiting for the model… 12 s ·
local/qwen · context 41%``). Any other event erases it before it is rendered, so the line
never mixes with a reply. It is drawn only on a terminal, only at the start of a line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from clawd.core.events import Waiting

STAGES = {
    "recall": "searching memory",
    "flush": "memory flush: the model is saving notes",
    "compaction": "compacting: the model is summarising older messages",
    "consolidation": "consolidating: the model is merging the notes into MEMORY.md",
    "model": "waiting for the model",
}
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
DELAY = 0.3  # seconds before the line appears: a quick answer never flickers
TICK = 0.1
ERASE = "\r\x1b[2K"
DIM, RESET = "\x1b[2m", "\x1b[0m"


def waiting_text(stage: str, seconds: float, status: str = "", frame: int = 0) -> str:
    """The line's text: spinner, stage, seconds, and the status after them."""
    what = STAGES.get(stage, stage)
    text = f"{SPINNER[frame % len(SPINNER)]} {what}… {int(seconds)} s"
    return f"{text} · {status}" if status else text


class WaitingLine:
    """The waiting line of one terminal stream (see the module docstring).

    ``status`` gives the short status shown after the seconds; ``at_line_start`` tells
    whether the cursor is at the start of a line (a reply cut mid-line is never drawn
    over); ``width`` is the terminal's width, which the line never exceeds.
    """

    def __init__(self, stream: TextIO, *, status: Callable[[], str],
                 at_line_start: Callable[[], bool], width: Callable[[], int],
                 color: bool = True, clock: Callable[[], float] = time.monotonic):
        self.stream, self.status, self.at_line_start = stream, status, at_line_start
        self.width, self.color, self.clock = width, color, clock
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._since = 0.0
        self._shown = False
        self._frame = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def before(self, event: Any) -> None:
        """Called before each event is rendered: erase the line; a ``Waiting`` event
        starts a new wait (shown after ``DELAY``), any other ends the wait."""
        with self._lock:
            self._erase()
            if isinstance(event, Waiting) and self.at_line_start():
                self._stage, self._since = event.stage, self.clock()
                self._start_thread()
            else:
                self._stage = None

    def stop(self) -> None:
        """Erase the line and end the thread (the turn is over)."""
        with self._lock:
            self._erase()
            self._stage = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def draw(self) -> None:
        """Redraw the line now, if a wait is under way and ``DELAY`` has passed."""
        with self._lock:
            if self._stage is None:
                return
            seconds = self.clock() - self._since
            if seconds < DELAY:
                return
            try:
                status = self.status()
            except Exception:  # noqa: BLE001 - the line goes on without the status
                status = ""
            self._frame += 1
            text = waiting_text(self._stage, seconds, status, self._frame)
            text = text[:max(self.width() - 1, 10)]
            styled = f"{DIM}{text}{RESET}" if self.color else text
            self.stream.write(ERASE + styled)
            self.stream.flush()
            self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self.stream.write(ERASE)
            self.stream.flush()
            self._shown = False

    def _start_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="clawd-waiting",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.draw()
            except (OSError, ValueError):  # the terminal went away: nothing more to draw
                return
