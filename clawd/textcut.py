"""Shortening text, in one place: head and tail around a marker, or a head and an ellipsis.

Every part of clawd that bounds a text (workspace files in the context, tool results before
they enter the transcript, pruned tool results, tool output inside a compaction request, one-line
previews) cuts it here; each caller chooses its own split and says what was cut in its marker.
"""

from __future__ import annotations

from collections.abc import Callable


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
