"""Time in search: which notes are dated, how old they are, and how much that costs them.

A dated note is a daily log or a session file, by the date in its name
(``memory/2026-11-20.md``, ``memory/2026-11-20-slug.md``); ``dated`` is the one rule for it
(consolidation reads the same notes). MEMORY.md, notes without a date in their name, extra
paths and session transcripts are undated and never decay.

With ``query.temporalDecay`` on, a dated note's merged score is multiplied by
``0.5 ** (age / halfLifeDays)``, its age counted in whole days from today (a note dated in
the future counts as today's). ``minScore`` is applied before decay, to the relevance
alone: decay reorders what is relevant, it never drops a fact only because it was written
long ago (a fact stated once, 90 days back, with nothing newer about it is still found).
Pure functions; ``index.py`` hands them the paths and today's date.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import date

from clawd.memory.search import Scored
from clawd.workspace.files import MEMORY_DIR

# dated notes: daily logs and session files (memory/2026-11-20.md, memory/2026-11-20-slug.md)
DATED = re.compile(rf"^{MEMORY_DIR}/(\d{{4}}-\d{{2}}-\d{{2}})(?:-[\w.-]+)?\.md$")


def dated(path: str) -> date | None:
    """The date in a dated note's name (None: not a dated note, or not a real date)."""
    found = DATED.match(path)
    if not found:
        return None
    try:
        return date.fromisoformat(found.group(1))
    except ValueError:  # memory/2026-13-40.md is a name, not a date
        return None


def factor(age_days: float, half_life_days: float) -> float:
    """The share of its score a note keeps at ``age_days``: 1 today, 0.5 at one half-life."""
    return 0.5 ** (max(age_days, 0.0) / half_life_days)


def decay(ranked: Iterable[Scored], path_of: Callable[[int], str | None], today: date,
          half_life_days: float) -> list[Scored]:
    """``ranked`` with each dated note's score decayed by its age, best first again.

    ``path_of(chunk_id)`` is the chunk's workspace-relative path (None: vanished, kept as
    is). Ties keep the order they came in (the sort is stable)."""
    out = []
    for s in ranked:
        path = path_of(s.chunk_id)
        day = dated(path) if path is not None else None
        if day is None:
            out.append(s)
            continue
        keep = factor((today - day).days, half_life_days)
        out.append(Scored(s.chunk_id, s.score * keep, s.vector, s.text))
    out.sort(key=lambda s: -s.score)
    return out
