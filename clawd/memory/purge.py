"""Forgetting in the index: what it kept of removed note lines leaves every table.

``MemoryIndex.forget(places, edit)`` runs ``forget`` here. ``places`` maps a note's
workspace-relative path to the line numbers about to be removed; ``edit`` removes them from
the files. In order:

1. A sync, so the index's chunk rows are those of the files as they are now.
2. The texts that were embedded for the chunks covering those lines, computed from the chunk
   rows before anything changes: each chunk's text under its heading path and, for a model
   that embeds parts (``chunk_parts.segment_chunks``), every part. Their hashes are the embedding
   cache's keys (``plan.text_hash``).
3. ``edit()``, then a sync: the changed files' chunk rows, keyword (FTS5) rows and vectors
   are deleted and the files indexed again.
4. The cache entries of those hashes are deleted (whatever the provider and model).
Steps 3 and 4 run within the store's ``scrubbing()``: in the SQLite file ``secure_delete`` is
on meanwhile (deleted rows are overwritten on disk, not merely unlinked), then FTS5's
segments are merged, the file rewritten (``VACUUM``) and the write-ahead log truncated,
taking the old pages with it; in PostgreSQL the index's tables are vacuumed.

The summary says how many chunks held the lines and how many cache entries went.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from clawd.memory.base import Embedder
from clawd.memory.chunk_parts import segment_chunks
from clawd.memory.chunker import Chunk
from clawd.memory.index_store import ChunkRow, IndexStore
from clawd.memory.plan import own_chunks, text_hash
from clawd.memory.sources import NotText, decode_text


def forget(index: Any, places: Mapping[str, Collection[int]],
           edit: Callable[[], None]) -> dict[str, Any]:
    """Run ``edit`` and purge what ``index`` (a ``MemoryIndex``) kept of ``places``."""
    index.mark_dirty()
    index.sync()
    store: IndexStore = index.store
    rows = [row for path, numbers in places.items() for row in store.chunks_at(path)
            if any(row.start_line <= n <= row.end_line for n in numbers)]
    hashes = {text_hash(text) for text in embedded_texts(
        rows, _levels(index, rows), index.embedders.get())}
    with store.scrubbing():
        edit()
        index.mark_dirty()
        synced = index.sync()
        with store.lock, store.transaction():
            purged = store.cache_delete(sorted(hashes))
    return {"chunks": len(rows), "cacheEntries": purged, "sync": synced}


def embedded_texts(rows: list[ChunkRow], levels: Mapping[tuple[str, int, int], tuple[int, ...]],
                   embedder: Embedder | None) -> set[str]:
    """Every text the index embeds (or embedded) for these chunks: the chunk under its
    heading path and, with an embedder that embeds parts, each part."""
    chunks = [Chunk(r.start_line, r.end_line, r.text, r.heading,
                    levels.get((r.path, r.start_line, r.end_line), ())) for r in rows]
    texts = {chunk.context_text() for chunk in chunks}
    if chunks and embedder is not None and embedder.segment_tokens:
        parts = segment_chunks(chunks, embedder.segment_tokens,
                               embedder.tokenize)  # type: ignore[attr-defined]
        texts |= {part.text for found in parts for part in found}
    return texts


def _levels(index: Any, rows: list[ChunkRow]) -> dict[tuple[str, int, int], tuple[int, ...]]:
    """The heading levels of each chunk's heading path (chunk rows keep only the titles),
    from chunking its file again: the same chunks the index holds after the sync."""
    cfg = index.settings.chunking
    out: dict[tuple[str, int, int], tuple[int, ...]] = {}
    for path in {row.path for row in rows}:
        try:
            raw = index.sources.read(path)
            if raw is None:
                continue
            text = decode_text(raw)
        except (OSError, NotText):
            continue
        for chunk in own_chunks(path, text, cfg.tokens, cfg.overlap):
            out[(path, chunk.start_line, chunk.end_line)] = chunk.levels
    return out
