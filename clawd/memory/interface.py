"""What the rest of clawd may ask of a memory index, and the shape of a search's answer.

``Memory`` is the narrow interface the loop, the tools and the front ends use; the SQLite
index (``MemoryIndex``: FTS5, sqlite-vec, local embeddings) is its embedded implementation,
and a hosted one (PostgreSQL with pgvector, say) would be a second. ``SearchResults`` and
``SearchHit`` are what ``search`` returns: JSON-ready, since the model reads it as the
``memory_search`` result and ``clawd memory search --json`` prints it; each hit's
``citation`` (``citation()``) is how a reply names the lines it used. ``forget`` is the
index's half of ``clawd memory forget`` (``memory/forget.py`` edits the notes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Protocol, TypedDict

from clawd.config import MemorySearch


class SearchHit(TypedDict):
    path: str  # workspace-relative, e.g. memory/2026-11-20.md
    startLine: int
    endLine: int
    score: float  # 0..1, the merged score
    snippet: str  # at most 700 characters of the chunk
    source: str  # "memory" (notes) or "sessions" (transcripts)
    citation: str  # path#Lstart-Lend (path#Lstart for one line), as replies cite it


def citation(path: str, start: int, end: int) -> str:
    """How a reply names the lines it used: ``memory/2026-11-20.md#L12-L14``, or ``#L12``
    for one line."""
    return f"{path}#L{start}" + (f"-L{end}" if end != start else "")


_CITATION = re.compile(r"^(?P<path>.+?)#L(?P<start>\d{1,9})(?:-L?(?P<end>\d{1,9}))?$")


def cited(text: str) -> tuple[str, int, int] | None:
    """``(path, start, end)`` of a citation as ``citation`` writes it (``#L12-L14`` or
    ``#L12``; ``#L12-14`` too), or None: a model given a citation passes it as a path."""
    found = _CITATION.match(text.strip())
    if not found:
        return None
    start = max(1, int(found["start"]))
    return found["path"], start, max(start, int(found["end"] or start))


class SearchResults(TypedDict):
    results: list[SearchHit]
    provider: str | None  # the embedder that answered (None: keyword search only)
    model: str | None
    fallback: Any  # why the fallback embedder answered, if it did
    mode: str  # hybrid, vector, keyword or none


class Memory(Protocol):
    """A memory index, as the rest of clawd uses it."""

    settings: MemorySearch

    def search(self, query: str, max_results: int | None = None,
               min_score: float | None = None, mode: str = "hybrid") -> SearchResults: ...

    def status(self) -> dict[str, Any]: ...

    def sync(self, force: bool = False,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]: ...

    def mark_dirty(self) -> None: ...

    def sync_in_background(self) -> None: ...

    def start_watcher(self) -> None: ...

    def catch_up(self, timeout: float) -> None: ...

    def close(self) -> None: ...

    def forget(self, places: Mapping[str, Collection[int]],
               edit: Callable[[], None]) -> dict[str, Any]:
        """Run ``edit`` (which removes the lines ``places`` names: note path -> line
        numbers) and purge everything the index kept of them: keyword rows, vectors, and
        the embedding-cache entries of every text embedded for the chunks covering them.
        Afterwards the index is in step with the files. A summary: ``chunks`` (how many
        held those lines), ``cacheEntries`` (purged), ``sync`` (the sync's summary)."""
        ...

    def check(self) -> Iterator[tuple[bool, str, str]]:
        """Health checks for ``clawd doctor``: (ok, what, detail) each."""
        ...
