"""Spotting a reply caught in a loop while it streams (``LoopGuard``).

A small model sometimes repeats the same words until its output limit: "Sunglasses" on
line after line, or four bullets over and over at the end of a flush. Besides the wait (a
minute of generation on a laptop), the repeated text would go back into the history and
teach the model to loop again. ``LoopGuard`` watches the streamed text; once its end is one
stretch of at most ``MAX_UNIT`` characters repeated at least ``MIN_REPEATS`` times over at
least ``MIN_SPAN`` characters, the reply is stopped and kept with the stretch once
(``cut``). Only exact repetition counts: a list whose items differ, even by a number, is
never cut.
"""

from __future__ import annotations

MIN_REPEATS = 10
MIN_SPAN = 300
MAX_UNIT = 400
CHECK_EVERY = 40  # characters streamed between two looks
WINDOW = max(MIN_REPEATS * MAX_UNIT, MIN_SPAN)  # the end of the text a look needs


def loop_period(text: str) -> int | None:
    """The shortest period of a loop at the end of ``text`` (see the module docstring)."""
    n = len(text)
    for p in range(1, MAX_UNIT + 1):
        need = max(MIN_REPEATS * p, MIN_SPAN)
        if need > n:
            return None
        # periodic with period p over the last ``need`` characters: equal to itself shifted
        if text[n - p:] == text[n - 2 * p:n - p] and text[n - need:n - p] == text[n - need + p:]:
            return p
    return None


def cut_loop(text: str, period: int) -> str:
    """``text`` with the loop at its end kept once."""
    start = len(text) - max(MIN_REPEATS * period, MIN_SPAN)
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return text[:start + period].rstrip()


class LoopGuard:
    """Looks at the deltas of one reply as they arrive; says when the reply is looping."""

    def __init__(self) -> None:
        self._size = self._checked = 0
        self.period: int | None = None

    def looping(self, parts: list[str]) -> bool:
        """Whether the reply streamed so far (``parts``, the newest last) ends in a loop."""
        self._size += len(parts[-1]) if parts else 0
        if self._size - self._checked < CHECK_EVERY:
            return False
        self._checked = self._size
        self.period = loop_period("".join(parts)[-WINDOW:])
        return self.period is not None

    def cut(self, parts: list[str]) -> str:
        """The reply with its loop kept once (all of it when there is no loop)."""
        text = "".join(parts)
        return text if self.period is None else cut_loop(text, self.period)
