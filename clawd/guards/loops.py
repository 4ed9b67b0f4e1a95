"""Spotting a reply caught in a loop while it streams (``LoopGuard``).

A small model sometimes repeats the same words until its output limit: "Sunglasses" on
line after line, or four bullets over and over at the end of a flush. Besides the wait (a
minute of generation on a laptop), the repeated text would go back into the history and
teach the model to loop again. ``LoopGuard`` watches the streamed text; once its end is one
stretch of at most ``loop_unit`` characters repeated at least ``loop_repeats`` times over at
least ``loop_span`` characters (the profile's ``Thresholds``), the reply is stopped and kept
with the stretch once (``cut``). Only exact repetition counts: a list whose items differ,
even by a number, is never cut.
"""

from __future__ import annotations

from clawd.core.thresholds import DEFAULT, Thresholds


def window(tuning: Thresholds) -> int:
    """The end of the text a look needs."""
    return max(tuning.loop_repeats * tuning.loop_unit, tuning.loop_span)


def loop_period(text: str, tuning: Thresholds = DEFAULT) -> int | None:
    """The shortest period of a loop at the end of ``text`` (see the module docstring)."""
    n = len(text)
    for p in range(1, tuning.loop_unit + 1):
        need = max(tuning.loop_repeats * p, tuning.loop_span)
        if need > n:
            return None
        # periodic with period p over the last ``need`` characters: equal to itself shifted
        if text[n - p:] == text[n - 2 * p:n - p] and text[n - need:n - p] == text[n - need + p:]:
            return p
    return None


def cut_loop(text: str, period: int, tuning: Thresholds = DEFAULT) -> str:
    """``text`` with the loop at its end kept once."""
    start = len(text) - max(tuning.loop_repeats * period, tuning.loop_span)
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return text[:start + period].rstrip()


class LoopGuard:
    """Looks at the deltas of one reply as they arrive; says when the reply is looping."""

    def __init__(self, tuning: Thresholds = DEFAULT) -> None:
        self.tuning = tuning
        self._window = window(tuning)
        self._size = self._checked = 0
        self.period: int | None = None

    def looping(self, parts: list[str]) -> bool:
        """Whether the reply streamed so far (``parts``, the newest last) ends in a loop."""
        self._size += len(parts[-1]) if parts else 0
        if self._size - self._checked < self.tuning.loop_check_every:
            return False
        self._checked = self._size
        self.period = loop_period("".join(parts)[-self._window:], self.tuning)
        return self.period is not None

    def cut(self, parts: list[str]) -> str:
        """The reply with its loop kept once (all of it when there is no loop)."""
        text = "".join(parts)
        return text if self.period is None else cut_loop(text, self.period, self.tuning)
