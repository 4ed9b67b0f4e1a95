"""Markdown-aware chunking of memory files into overlapping, line-addressed pieces.

A chunk holds about ``chunking.tokens`` tokens, starts and ends on line boundaries, and
remembers the 1-based first and last line of its file. Consecutive chunks share about
``chunking.overlap`` tokens of trailing lines, except where a chunk ends before a heading:
a new section is a natural boundary, so it starts clean once the chunk is at least half full.
Every chunk also carries the heading path in force at its first line, which search uses as
context (a chunk from the middle of a section still knows which section it is). A line longer
than a whole chunk is cut at whitespace into pieces that keep the line's number. For small
embedding models a chunk is further cut into parts embedded on their own (``chunk_parts.py``).
Pure functions over text; token counts come from a callable so tests can use simple ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed piece of a file: lines ``start_line..end_line`` (1-based, inclusive)."""

    start_line: int
    end_line: int
    text: str
    heading: str = ""  # "Title > Section" in force at start_line, "" if none
    levels: tuple[int, ...] = ()  # the level of each heading of that path (1 for "#")

    def context_text(self) -> str:
        """The text with its heading path in front, unless the chunk begins at that heading."""
        if not self.heading or self.text.lstrip().startswith("#"):
            return self.text
        return f"{self.heading}\n{self.text}"


@dataclass(slots=True)
class _Line:
    number: int
    text: str
    tokens: int
    heading: str  # heading path in force at this line (including the line if it is one)
    starts_section: bool
    levels: tuple[int, ...] = ()  # the level of each heading of that path


def default_counter(text: str) -> int:
    """Tokens as the rest of clawd estimates them (an offline BPE, else characters / 4)."""
    from clawd.core.tokens import estimate_text

    return estimate_text(text)


def split_long_line(text: str, max_tokens: int, count: TokenCounter) -> list[str]:
    """Cut one line into pieces of at most ``max_tokens``, at whitespace when there is some."""
    if count(text) <= max_tokens:
        return [text]
    pieces: list[str] = []
    rest = text
    while rest:
        if count(rest) <= max_tokens:
            pieces.append(rest)
            break
        # Binary search the longest prefix that fits, then back off to a space.
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(rest[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return pieces


def _lines(text: str, max_tokens: int, count: TokenCounter) -> Iterator[_Line]:
    path: list[tuple[int, str]] = []
    in_fence = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        starts_section = False
        if FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            match = HEADING_RE.match(line)
            if match:
                level = len(match.group(1))
                path = [(lvl, title) for lvl, title in path if lvl < level]
                path.append((level, match.group(2)))
                starts_section = True
        heading = " > ".join(title for _, title in path)
        levels = tuple(level for level, _ in path)
        pieces = split_long_line(line, max_tokens, count) if line else [line]
        for index, piece in enumerate(pieces):
            yield _Line(number, piece, max(count(piece), 1) if piece else 1, heading,
                        starts_section and index == 0, levels)


def chunk_text(text: str, tokens: int = 400, overlap: int = 80,
               count: TokenCounter | None = None) -> list[Chunk]:
    """Split a file's text into chunks of about ``tokens`` tokens sharing ``overlap`` tokens."""
    count = count or default_counter
    tokens = max(tokens, 1)
    overlap = max(0, min(overlap, tokens // 2))
    lines = list(_lines(text, tokens, count))
    while lines and not lines[-1].text.strip():
        lines.pop()
    chunks: list[Chunk] = []
    current: list[_Line] = []
    size = 0

    def emit() -> None:
        if any(line.text.strip() for line in current):
            chunks.append(_make_chunk(current))

    for line in lines:
        at_heading = line.starts_section and size >= tokens // 2
        if current and (size + line.tokens > tokens or at_heading):
            # A chunk never ends on a heading: hold trailing headings back for the next one.
            held: list[_Line] = []
            while current and (current[-1].starts_section or not current[-1].text.strip()):
                held.insert(0, current.pop())
            if current:
                emit()
                carried = [] if (at_heading or held) else _tail(current, overlap)
            else:
                carried = []
            carried += held
            # The carried lines must leave room for the new line, or the chunk never advances;
            # a held heading no chunk holds yet becomes a chunk of its own, never dropped.
            unsent: list[_Line] = []
            while carried and sum(c.tokens for c in carried) + line.tokens > tokens:
                dropped = carried.pop(0)
                if any(dropped is h for h in held):
                    unsent.append(dropped)
            if any(u.text.strip() for u in unsent):
                chunks.append(_make_chunk(unsent))
            current, size = carried, sum(c.tokens for c in carried)
        current.append(line)
        size += line.tokens
    if current:  # always holds at least one line no earlier chunk has
        emit()
    return chunks


def _tail(lines: list[_Line], overlap: int) -> list[_Line]:
    """The trailing lines of a chunk totalling at most ``overlap`` tokens."""
    kept: list[_Line] = []
    total = 0
    for line in reversed(lines):
        if total + line.tokens > overlap:
            break
        kept.insert(0, line)
        total += line.tokens
    if len(kept) == len(lines):  # never carry a whole chunk over
        kept = kept[1:]
    return kept


def _make_chunk(lines: list[_Line]) -> Chunk:
    # Blank lines at the edges are dropped so the line range is exactly what the text shows.
    first_kept = next(i for i, line in enumerate(lines) if line.text.strip())
    last_kept = max(i for i, line in enumerate(lines) if line.text.strip())
    lines = lines[first_kept:last_kept + 1]
    text_parts: list[str] = []
    previous = None
    for line in lines:
        # Pieces of one long line are joined back without a newline between them.
        if previous is not None and line.number == previous:
            text_parts[-1] += line.text
        else:
            text_parts.append(line.text)
        previous = line.number
    first = lines[0]
    return Chunk(first.number, lines[-1].number, "\n".join(text_parts), first.heading,
                 first.levels)


@dataclass(frozen=True, slots=True)
class TokenizedText:
    """A text as an embedding model's tokenizer reads it, without special tokens: the
    token ids and each token's (start, end) character offsets in the text."""

    ids: list[int]
    offsets: list[tuple[int, int]]


Tokenize = Callable[[list[str]], list[TokenizedText]]
