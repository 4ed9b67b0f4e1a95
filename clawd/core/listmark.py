"""A Markdown list item's mark, written once for every part of clawd that reads list lines.

``MARK`` is the mark alone: a bullet (``-``, ``*``, ``+``) or a number of up to nine digits
followed by ``.`` or ``)``, as CommonMark has it. Callers compose their own line patterns
from it (an indent before it, the space after it), so that the notes the flush writes, the
guards that check them, the search that splits them and the consolidation that merges them
agree on what a list item is.
``ITEM`` matches the start of a list line (its indent, mark and the space after it, or the
mark alone at the end of a line); ``strip`` takes it off. ``PLACEHOLDER`` is a note
template's bullet that only says what goes there ("- (people — who they are)").
"""

from __future__ import annotations

import re

MARK = r"(?:[-*+]|\d{1,9}[.)])"
ITEM = re.compile(rf"^\s*{MARK}(?:\s+|$)")
PLACEHOLDER = re.compile(r"^\s*[-*+]\s*\([^()]*\)\s*$")


def strip(line: str) -> str:
    """``line`` without its indent and list mark (unchanged if it is no list item)."""
    return ITEM.sub("", line, count=1)
