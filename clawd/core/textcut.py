"""Shortening text, in one place: head and tail around a marker, or a head and an ellipsis.

Every part of clawd that bounds a text (workspace files in the context, tool results before
they enter the transcript, pruned tool results, tool output inside a compaction request, one-line
previews) cuts it here; each caller chooses its own split and says what was cut in its marker.
``sentences`` splits a text where a sentence or a line ends (claims of notes, the user's
words a summary must keep). ``empty_sections_out`` takes out the Markdown headings left with
nothing under them (a MEMORY.md without its placeholders, a summary without its unfounded
lines). ``two_columns`` lays out a name and its description per row within a width,
wrapping descriptions between words.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

# not inside "memory/2026-11-24.md", nor after a title before a name ("My vet is Dr. Almeida")
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b(?:Mr|Ms|Dr|St|Sr|Jr|Mt)\.)(?<!\bMrs\.)"
                           r"(?<!\bProf\.)\s+|\n")


def keep_ends(text: str, head: int, tail: int, marker: Callable[[int], str]) -> str:
    """``text`` with its middle replaced: the first ``head`` and last ``tail`` characters
    kept around ``marker(omitted)``, where ``omitted`` counts the characters cut out."""
    head, tail = max(head, 0), max(tail, 0)
    if head + tail >= len(text):
        return text
    return text[:head] + marker(len(text) - head - tail) + text[len(text) - tail:]


def shorten(text: str, width: int, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``width`` characters, ending with ``ellipsis`` when cut."""
    return text if len(text) <= width else text[:max(width - len(ellipsis), 0)] + ellipsis


def sentences(text: str) -> list[str]:
    """The sentences and lines of ``text``, stripped, without empty ones."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def empty_sections_out(lines: list[str], droppable: Callable[[str], bool]) -> list[str]:
    """``lines`` without the headings (those ``droppable`` says may go) that have nothing
    but blank lines under them before the next heading or the end."""
    out: list[str] = []
    body = False  # read from the end: whether text follows before the heading below
    for line in reversed(lines):
        if line.lstrip().startswith("#"):
            if body or not droppable(line):
                out.append(line)
            body = False
        else:
            out.append(line)
            body = body or bool(line.strip())
    return out[::-1]


MIN_DESCRIPTION = 30  # narrower than this beside the names: descriptions go below them
MAX_NAME_COLUMN = 24  # a longer name has its description start on the line below it


def two_columns(rows: list[tuple[str, str]], width: int | None = None, gap: int = 2) -> str:
    """Rows of a name and its description, the descriptions aligned in a column after the
    names (at most ``MAX_NAME_COLUMN`` wide: a longer name has its description start on
    the next line) and wrapped between words within ``width`` (None: not wrapped). When
    that leaves fewer than ``MIN_DESCRIPTION`` columns, every description goes below its
    name, indented by four."""
    longest = max((len(name) for name, _ in rows), default=0)
    if width is None:
        return "\n".join(f"{name.ljust(longest + gap)}{text}".rstrip() for name, text in rows)
    column = min(longest, MAX_NAME_COLUMN) + gap
    if width - column < MIN_DESCRIPTION:
        column = 4
    lines: list[str] = []
    for name, text in rows:
        wrapped = textwrap.wrap(text, width - column, break_long_words=False,
                                break_on_hyphens=False)
        if wrapped and len(name) + gap <= column:
            lines.append(name.ljust(column) + wrapped.pop(0))
        else:
            lines.append(name)
        lines += [" " * column + line for line in wrapped]
    return "\n".join(lines)
