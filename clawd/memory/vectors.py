"""The second step of a sync: vectors for the chunks to embed.

Only text the embedding cache has not seen is embedded (the cache is keyed by provider,
model, endpoint fingerprint and text hash); vectors that batch jobs delivered since the last
sync are taken as they are. With ``remote.batch.wait: false`` new text goes out as batch jobs
that the sync does not wait for (``batches.py``): its chunks are stored without vectors.
With ``wait: true`` the sync waits for the jobs and caches the vectors of each one as it
completes, so a backfill stopped by a failed job resumes from the cache. What is embedded
now is cached batch by batch on a writer thread while the model embeds the next batch.

Small local models read only 256 tokens and blur a chunk that mixes topics, so their
chunks are embedded as segments of ``segment_tokens``; the chunk vector (what ``vec0``
searches) is the normalised mean of its segments.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from clawd.memory import batches
from clawd.memory.base import Embedder
from clawd.memory.chunk_parts import segment_chunks
from clawd.memory.chunker import Chunk
from clawd.memory.jobs import run_batch_jobs, waits_for_batches
from clawd.memory.plan import text_hash
from clawd.memory.target import Target

log = logging.getLogger(__name__)

EMBED_STEP = 256  # texts per embed_documents call (cached after each)


def announce_upload(embedder: Embedder, stored: str | None, count: int) -> None:
    """Said before the first note goes to a remote embedding service (a new index, or a
    provider change): which service, where, and how much is sent."""
    where = getattr(embedder, "base_url", None) or embedder.provider
    before = json.loads(stored) if stored else None
    change = (f" (the index was built with {before.get('provider')} "
              f"{before.get('model')}; it is rebuilt)") if isinstance(before, dict) else ""
    log.warning("memory embeddings: sending %d chunks of your notes to %s %s at %s%s",
                count, embedder.provider, embedder.model, where, change)


def vectorise(target: Target, embedder: Embedder, chunks: list[Chunk],
               progress: Callable[[int, int], None] | None, total: int,
               stats: dict[str, int], collected: batches.Collected
               ) -> list[tuple[bytes, bytes | None] | None]:
    """(chunk vector, segment vectors or None) per chunk, as float32 blobs; None for a chunk
    whose vectors a batch job has yet to deliver."""
    import numpy as np

    token_ids: dict[str, list[int]] | None = None
    if embedder.segment_tokens:
        segmented = segment_chunks(chunks, embedder.segment_tokens,
                                   embedder.tokenize)  # type: ignore[attr-defined]
        per_chunk = [[segment.text for segment in segments] for segments in segmented]
        token_ids = {segment.text: segment.ids for segments in segmented for segment in segments}
    else:
        per_chunk = [[chunk.context_text()] for chunk in chunks]
    flat = [text for texts in per_chunk for text in texts]
    found = _embed_cached(target, embedder, flat, progress, per_chunk, total, stats, collected,
                          token_ids)
    out: list[tuple[bytes, bytes | None] | None] = []
    cursor = 0
    for texts in per_chunk:
        parts = found[cursor:cursor + len(texts)]
        cursor += len(texts)
        present = [p for p in parts if p is not None]
        if len(present) < len(parts):
            out.append(None)
            continue
        matrix = np.stack(present).astype(np.float32)
        mean = matrix.mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        out.append((mean.astype(np.float32).tobytes(),
                    matrix.tobytes() if len(texts) > 1 else None))
    return out


def _embed_cached(target: Target, embedder: Embedder, texts: list[str],
                  progress: Callable[[int, int], None] | None, per_chunk: list[list[str]],
                  total: int, stats: dict[str, int], collected: batches.Collected,
                  token_ids: dict[str, list[int]] | None = None) -> list[Any | None]:
    """A vector per text (None while a batch job owes it): from the cache, from batch jobs
    that just completed, or embedded now (or submitted as jobs, ``wait: false``). Texts in
    ``token_ids`` are embedded from those ids. What is embedded now is cached batch by
    batch on a writer thread while the model embeds the next batch."""
    import numpy as np

    store, cache = target.store, target.settings.cache
    hashes = [text_hash(t) for t in texts]
    key = (embedder.provider, embedder.model, embedder.fingerprint)
    cached: dict[str, bytes] = store.cache_get(*key, hashes) if cache.enabled else {}
    vectors: dict[str, Any] = {h: np.frombuffer(b, dtype=np.float32) for h, b in cached.items()}
    for h in hashes:
        if h not in vectors and h in collected.vectors:
            vectors[h] = np.asarray(collected.vectors[h], dtype=np.float32)
    todo: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h in vectors:
            continue
        if h in collected.pending:
            collected.wanted.add(h)  # still awaited from a job: it is not submitted again
        else:
            todo.setdefault(h, t)
    stats["cached"] += sum(1 for h in hashes if h in vectors)
    if vectors and not embedder.dims:
        embedder.dims = len(next(iter(vectors.values())))

    # Progress is reported in chunks: texts done are mapped back to the chunks they finish.
    bounds, acc = [], 0
    for group in per_chunk:
        acc += len(group)
        bounds.append(acc)
    done_texts = len(texts) - len(todo)

    def advance(count: int) -> None:
        nonlocal done_texts
        target.check()  # between embedding batches: leaving never waits for a long backfill
        done_texts += count
        if progress:
            progress(sum(1 for b in bounds if b <= done_texts) if done_texts < len(texts)
                     else total, total)

    advance(0)
    items = list(todo.items())
    if batches.deferred(embedder, target.settings):
        now, awaited = batches.submit(target, embedder, items, collected.retry)
        stats["submitted"] += len(awaited)
        advance(len(items) - len(now))  # submitted, or left to the next sync
        items = now
    stats["embedded"] += len(items)
    writer = CacheWriter(store, key, cache.max_entries) \
        if items and cache.enabled and cache.max_entries > 0 else None

    def keep(part: list[tuple[str, Any]]) -> None:
        fresh = [(h, np.asarray(v, dtype=np.float32)) for h, v in part]
        vectors.update(fresh)
        if writer is not None:
            writer.put([(h, len(v), v.tobytes()) for h, v in fresh])

    try:
        _embed_now(embedder, items, keep, advance, token_ids)
    finally:
        if writer is not None:
            writer.close(quiet=sys.exc_info()[0] is not None)
    return [vectors.get(h) for h in hashes]


def _embed_now(embedder: Embedder, items: list[tuple[str, str]],
               keep: Callable[[list[tuple[str, Any]]], None], advance: Callable[[int], None],
               token_ids: dict[str, list[int]] | None) -> None:
    """Embed (hash, text) items, handing each finished batch's vectors to ``keep``."""
    if waits_for_batches(embedder, len(items)):
        # Batch jobs waited for: each job's vectors are cached (and counted) as soon as it
        # completes, so a backfill stopped by a failed job resumes from the cache.
        def on_job(start: int, got: list[Any]) -> None:
            keep([(h, v) for (h, _), v in zip(items[start:start + len(got)], got)])
            advance(len(got))

        run_batch_jobs(embedder, [t for _, t in items], on_done=on_job)  # type: ignore[arg-type]
        return
    for start in range(0, len(items), EMBED_STEP):
        part = items[start:start + EMBED_STEP]
        reported = 0

        def on_batch(count: int) -> None:
            nonlocal reported
            reported += count
            advance(count)

        if token_ids is not None:
            result = embedder.embed_tokens(  # type: ignore[attr-defined]
                [token_ids[t] for _, t in part], on_batch)
        else:
            result = embedder.embed_documents([t for _, t in part], on_batch)
        keep([(h, v) for (h, _), v in zip(part, result)])
        if reported < len(part):
            advance(len(part) - reported)


class CacheWriter:
    """Commits freshly embedded vectors to the embedding cache on a thread of its own, so
    the model goes on with the next batch meanwhile. ``close`` waits for the last commit
    and raises what a commit raised (unless ``quiet``: another error is on its way)."""

    def __init__(self, store: Any, key: tuple[str, str, str], max_entries: int):
        self._queue: queue.SimpleQueue[list[tuple[str, int, bytes]] | None] = \
            queue.SimpleQueue()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(store, key, max_entries),
                                        daemon=True, name="clawd-memory-cache")
        self._thread.start()

    def put(self, items: list[tuple[str, int, bytes]]) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(items)

    def close(self, quiet: bool = False) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None and not quiet:
            raise self._error

    def _run(self, store: Any, key: tuple[str, str, str], max_entries: int) -> None:
        while (items := self._queue.get()) is not None:
            if self._error is None:
                try:
                    store.cache_put(*key, items, max_entries)
                except Exception as exc:  # noqa: BLE001 - handed to the sync by put/close
                    self._error = exc
