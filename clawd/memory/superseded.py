"""Note lines that consolidation replaced, shown with what replaced them wherever search
returns them.

When consolidation replaces a fact in MEMORY.md, the old bullet moves to its ``## Replaced``
record as ``- <old> (memory/2026-03-03.md#L3) — replaced on 2026-03-16 by: <new>``. The daily
log the old fact came from still says it, and search still finds that line: the older note
often ranks above MEMORY.md's one line, and a model answers from what comes first. So a
replaced line is struck through where clawd hands it out, its replacement on the same line::

    - ~~The build server is osprey.~~ [replaced on 2026-03-16 by: It was renamed to condor.]

(a replacement on a line of its own below was skipped by a 1.5B model, which answered with
the old value it had read first). The note is never changed (it is the user's, and its
history stays searchable); only the text handed out is: search snippets (so the recall block
and ``memory_search``), ``memory_get`` / ``read`` of a note and the daily logs the context
sends (``marked``). ``unmark`` takes the marks out again, for a group session, which may not
see MEMORY.md. A line is marked only while it still says the old fact: the cited line
holding at least half the old fact's meaning words, else (lines added above it moved it) a
line of the result holding four in five of them; a line edited since is left alone. Another
note that repeats the old fact closely (four in five of its meaning words: a saved session
whose reply quoted it, a later log that copied it) is marked the same way where it repeats
it. A fact replaced twice shows the newest replacement. The record is parsed again whenever
MEMORY.md's text changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from clawd.core import listmark
from clawd.workspace.files import (
    MEMORY_FILE,
    REPLACED_SECTION,
    ReplacedLine,
    replaced_lines,
)
from clawd.workspace.interface import WorkspaceFiles

_WORD = re.compile(r"[^\W_]+")
_PREFIX = rf"^\s*(?:{listmark.MARK}\s+)?"  # indent and list mark, kept outside the ~~
_BULLET = re.compile(_PREFIX)
# a marked line; the rest of the line from the first mark on, a snippet's cut one too
_MARKED = re.compile(rf"({_PREFIX})~~(.*?)~~ \[replaced on \d{{4}}-\d{{2}}-\d{{2}} by: .*$",
                     re.M)
_SHORT = 3  # shorter words carry no meaning here ("the", "is", "on")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= _SHORT}


def latest(entries: list[ReplacedLine]) -> dict[str, list[ReplacedLine]]:
    """path -> its replaced lines, each with the newest replacement of a chain (a fact
    replaced, and its replacement replaced in turn, points at the last one)."""
    by_old = {entry.old: entry for entry in entries}
    out: dict[str, list[ReplacedLine]] = {}
    for entry in entries:
        final, seen = entry, {entry.old}
        while final.new in by_old and final.new not in seen:
            seen.add(final.new)
            final = by_old[final.new]
        out.setdefault(entry.path, []).append(
            ReplacedLine(entry.old, entry.path, entry.start, entry.end, final.day, final.new))
    return out


def _says(line: str, old: set[str], share: float) -> bool:
    return bool(old) and len(old & _words(line)) >= share * len(old)


def annotate(text: str, start_line: int, entries: Sequence[ReplacedLine],
             elsewhere: Sequence[ReplacedLine] = ()) -> str:
    """``text`` (lines of a note, the first being line ``start_line`` of its file) with each
    line that still says a replaced fact struck through and followed by its replacement.
    ``entries``: the facts replaced in this note (found at their cited lines); ``elsewhere``:
    those of other notes, found in this one only where a line repeats one closely (a saved
    session's reply that quoted the old fact, a later note that copied it)."""
    if not entries and not elsewhere:
        return text
    lines = text.split("\n")
    notes: dict[int, list[str]] = {}
    for entry, here in [*((e, True) for e in entries), *((e, False) for e in elsewhere)]:
        old = _words(entry.old)
        cited = [i for i in range(entry.start - start_line, entry.end - start_line + 1)
                 if here and 0 <= i < len(lines)]
        found = next((i for i in cited if _says(lines[i], old, 0.5)), None)
        if found is None:  # moved, or another note's: only a close match counts
            found = next((i for i, line in enumerate(lines) if _says(line, old, 0.8)
                          and i not in notes), None)
        if found is not None:
            notes.setdefault(found, []).append(f" [replaced on {entry.day} by: {entry.new}]")
    for i, marks in notes.items():
        prefix = _BULLET.match(lines[i]).group(0)  # type: ignore[union-attr]  # always matches
        lines[i] = f"{prefix}~~{lines[i][len(prefix):].rstrip()}~~{''.join(marks)}"
    return "\n".join(lines)


@lru_cache(maxsize=16)
def record(memory: str) -> dict[str, list[ReplacedLine]]:
    """path -> the replaced lines of that note, as the MEMORY.md whose text is ``memory``
    records them (parsed once for each text; not to be changed)."""
    return latest(replaced_lines(memory)) if REPLACED_SECTION in memory else {}


def marker_of(by_path: dict[str, list[ReplacedLine]]) -> Callable[[str, int, str], str]:
    """``annotate`` as a function of (path, first line, text) by the record ``by_path``."""
    every = [entry for entries in by_path.values() for entry in entries]
    return lambda path, start_line, text: annotate(
        text, start_line, by_path.get(path, []), [e for e in every if e.path != path])


def marked(path: str, text: str, memory: str) -> str:
    """The note ``path`` (its whole ``text``) as it is handed out, by the record of the
    MEMORY.md whose text is ``memory`` (the context's daily logs)."""
    return marker_of(record(memory))(path, 1, text)


def unmark(text: str) -> str:
    """``text`` with the marks ``annotate`` added taken out again."""
    return _MARKED.sub(r"\1\2", text)


class Superseded:
    """MEMORY.md's record of replaced lines, read through the workspace's files (so a
    hosted store serves it as the folder does) and parsed again only when its text
    changed."""

    def __init__(self, files: WorkspaceFiles):
        self.files = files

    def current(self) -> dict[str, list[ReplacedLine]]:
        """path -> the replaced lines of that note, as MEMORY.md says now."""
        try:
            return record(self.files.read(MEMORY_FILE) or "")
        except OSError:
            return {}

    def marker(self) -> Callable[[str, int, str], str]:
        """``annotate`` as a function of (path, first line, text), MEMORY.md read once for
        every result of one search."""
        return marker_of(self.current())
