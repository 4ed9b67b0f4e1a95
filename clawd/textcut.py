"""Shortening text, in one place: head and tail around a marker, or a head and an ellipsis.

Every part of clawd that bounds a text (workspace files in the context, tool results before
they enter the transcript, pruned tool results, tool output inside a compaction request, one-line
previews) cuts it here; each caller chooses its own split and says what was cut in its marker.
``sentences`` splits a text where a sentence or a line ends (claims of notes, the user's
words a summary must keep).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")  # not inside "memory/2026-11-24.md"


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
