"""Indexing and vector scoring for ``MemoryIndex``: sync files into the store, score chunks.

Sync compares every source file with its ``files`` row (size and mtime first, then the
content hash), chunks what changed, embeds only text the cache has not seen (keyed by
provider, model, endpoint fingerprint and text hash), and writes all changes in one
transaction. A change of embedding signature or chunking rebuilds everything in that same
single transaction, so a reader sees the old index or the new one, never half of each.
If the primary embedder fails, the fallback takes over (which changes the signature, so
that sync rebuilds with it); with no working embedder chunks are stored without vectors,
keyword search keeps working, and a later sync fills the vectors in.

Files that cannot be indexed (not UTF-8 text, unreadable, links out of the workspace) are
skipped with one warning each. The ``skippedFiles`` meta row remembers them with their size
and mtime, so the warning comes again only when such a file changes (or on ``force``), not on
every sync of every process; ``MemoryIndex.status`` lists them.

With ``remote.batch.wait: false`` new text goes out as batch jobs that the sync does not wait
for (``batches.py``): its chunks are stored without vectors, and every later sync first polls
the pending jobs once and fills in the vectors of those that completed. With ``wait: true``
the sync waits for the jobs, and caches the vectors of each one as it completes: a backfill
stopped by a failed job resumes from the cache.

Small local models read only 256 tokens and blur a chunk that mixes topics, so their
chunks are embedded as segments of ``segment_tokens``; the chunk vector (what ``vec0``
searches) is the normalised mean of its segments, and a candidate's cosine combines the
chunk with its best segment.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clawd.memory import batches
from clawd.memory import search as policy
from clawd.memory.base import Embedder, EmbeddingError
from clawd.memory.chunker import Chunk, chunk_text, segment_chunks
from clawd.memory.embeddings import signature
from clawd.memory.jobs import run_batch_jobs, waits_for_batches
from clawd.memory.sources import NotText, all_sources, read_source

if TYPE_CHECKING:
    from clawd.memory.index import MemoryIndex

log = logging.getLogger(__name__)

SKIPPED_META = "skippedFiles"


class SyncCancelled(Exception):
    """The index was closed while this sync ran; nothing of it was committed."""


def _check(index: MemoryIndex) -> None:
    if index.cancelled:
        raise SyncCancelled("memory sync cancelled: the index was closed")
EMBED_STEP = 256  # texts per embed_documents call (cached after each)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunking_signature(index: MemoryIndex) -> str:
    cfg = index.settings.chunking
    return json.dumps({"tokens": cfg.tokens, "overlap": cfg.overlap, "version": 2})


# --- sync -----------------------------------------------------------------------------------

def sync(index: MemoryIndex, *, force: bool = False,
         progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    store = index.store
    embedder = index.embedders.get()
    chunking = chunking_signature(index)
    embedding = signature(embedder) if embedder else None
    stored_embedding = store.get_meta("embedding")
    rebuild = force or store.get_meta("chunking") != chunking or (
        embedding is not None and stored_embedding is not None and embedding != stored_embedding)

    _check(index)
    links: dict[str, str] = {}
    sources = all_sources(index.workspace, index.settings, index.sessions_dir, links)
    known = store.files()
    warned = skipped_files(store)
    # key -> (reason, stamp): the stamp tells whether a skipped file changed since.
    skipped: dict[str, tuple[str, str]] = {key: (reason, "") for key, reason in links.items()}
    changed: list[tuple[Any, str, os.stat_result, list[Chunk]]] = []
    touched: list[tuple[Any, str, os.stat_result]] = []
    for source in sources:
        stamp = ""
        try:
            stat = source.path.stat()
            stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            before = warned.get(source.key)
            if not force and before and before[1] == stamp:
                skipped[source.key] = before  # still the same file: no second warning
                continue
            previous = known.get(source.key)
            if not rebuild and previous and previous[2] == stat.st_mtime \
                    and previous[3] == stat.st_size:
                continue
            text = read_source(source)
        except NotText as exc:
            skipped[source.key] = (str(exc), stamp)
            continue
        except OSError as exc:
            skipped[source.key] = (f"cannot read: {exc.strerror or exc}", stamp)
            continue
        digest = text_hash(text)
        if not rebuild and previous and previous[1] == digest:
            touched.append((source, digest, stat))
            continue
        chunks = chunk_text(text, index.settings.chunking.tokens, index.settings.chunking.overlap)
        changed.append((source, digest, stat, chunks))
    keys = {s.key for s in sources} - set(skipped)
    removed = [key for key in known if key not in keys]
    for key, (reason, stamp) in sorted(skipped.items()):
        if force or warned.get(key) != (reason, stamp):
            log.warning("memory index: skipping %s (%s)", key, reason)

    # Batch jobs submitted by earlier syncs without waiting: polled once, never waited for.
    collected = batches.collect(index, embedder) if embedder is not None \
        else batches.Collected()

    # Chunks of unchanged files that still lack vectors (an earlier sync had no embedder,
    # or their batch job had not finished).
    replaced = {source.key for source, _, _, _ in changed} | set(removed)
    missing = [] if rebuild or embedder is None else [
        row for row in store.chunks_without_embedding() if row[1] not in replaced]
    new_chunks = [c for _, _, _, chunks in changed for c in chunks]
    todo = new_chunks + [Chunk(0, 0, text, heading) for _, _, heading, text in missing]
    total = len(todo)
    vectors: list[tuple[bytes, bytes | None] | None] | None = None
    embed_stats = {"embedded": 0, "cached": 0, "submitted": 0,
                   "collected": len(collected.vectors)}
    orphans: list[Any] = []
    if embedder is not None and todo and embedder.provider != "local" \
            and embedding != stored_embedding:
        _announce_upload(embedder, stored_embedding, total)
    if embedder is not None and todo:
        try:
            vectors = _vectorise(index, embedder, todo, progress, total, embed_stats,
                                 collected)
        except EmbeddingError as exc:
            batches.remember(index, embedder, collected)
            if index.embedders.fail(exc) is not None:
                return sync(index, force=force, progress=progress)
            embedder, embedding = None, None
    if embedder is not None:
        # Cached only now: making room for them must not evict entries this sync reads.
        batches.remember(index, embedder, collected)
        orphans = batches.orphans(index, embedder, collected)
    if vectors is None and progress:
        progress(total, total)
    dims = embedder.dims or 0 if embedder else 0

    _check(index)
    with store.lock, store.transaction():
        store.bump_generation()
        if rebuild:
            store.reset(dims)
        elif dims and store.dims != dims:
            store.set_dims(dims)  # the first vectors of an index built keyword-only
        for key in removed:
            store.delete_file(key)
        cursor = 0
        for source, digest, stat, chunks in changed:
            store.delete_file(source.key)
            for chunk in chunks:
                blob, segments = (vectors[cursor] or (None, None)) if vectors else (None, None)
                cursor += 1
                store.insert_chunk(source.key, source.source, chunk.start_line, chunk.end_line,
                                   chunk.heading, chunk.text, text_hash(chunk.text), blob,
                                   segments)
            store.upsert_file(source.key, source.source, digest, stat.st_mtime, stat.st_size)
        for source, digest, stat in touched:
            store.upsert_file(source.key, source.source, digest, stat.st_mtime, stat.st_size)
        if vectors:
            for (chunk_id, _, _, _), item in zip(missing, vectors[cursor:]):
                if item is not None:
                    store.set_embedding(chunk_id, *item)
        for job in collected.finished + orphans:
            store.delete_batch_job(job.provider, job.job)
        if embedder is not None:
            dropped = store.drop_batch_jobs_except(embedder.provider, embedder.model,
                                                   embedder.fingerprint)
            if dropped:
                log.info("memory index: %d batch jobs of the previous embedder dropped", dropped)
        store.set_meta("chunking", chunking)
        if embedding is not None:
            store.set_meta("embedding", embedding)
        store.set_meta(SKIPPED_META, json.dumps(
            {key: {"reason": reason, "stamp": stamp}
             for key, (reason, stamp) in sorted(skipped.items())}))
    jobs, awaited = store.batch_counts()
    counts = store.counts()
    return {"files": len(keys), "indexed": len(changed), "removed": len(removed),
            "skipped": len(skipped), "chunks": len(new_chunks), "rebuilt": rebuild,
            "provider": embedder.provider if embedder else None, **embed_stats,
            "pendingBatches": jobs, "pendingEmbeddings": awaited,
            "unembeddedChunks": counts["chunks"] - counts["embedded"]}


def _announce_upload(embedder: Embedder, stored: str | None, count: int) -> None:
    """Said before the first note goes to a remote embedding service (a new index, or a
    provider change): which service, where, and how much is sent."""
    where = getattr(embedder, "base_url", None) or embedder.provider
    before = json.loads(stored) if stored else None
    change = (f" (the index was built with {before.get('provider')} "
              f"{before.get('model')}; it is rebuilt)") if isinstance(before, dict) else ""
    log.warning("memory embeddings: sending %d chunks of your notes to %s %s at %s%s",
                count, embedder.provider, embedder.model, where, change)


def skipped_files(store: Any) -> dict[str, tuple[str, str]]:
    """The files the last sync skipped: key -> (reason, stamp)."""
    try:
        stored = json.loads(store.get_meta(SKIPPED_META) or "{}")
    except ValueError:
        return {}
    return {key: (str(item.get("reason", "")), str(item.get("stamp", "")))
            for key, item in stored.items() if isinstance(item, dict)}


def _vectorise(index: MemoryIndex, embedder: Embedder, chunks: list[Chunk],
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
    found = _embed_cached(index, embedder, flat, progress, per_chunk, total, stats, collected,
                          token_ids)
    out: list[tuple[bytes, bytes | None] | None] = []
    cursor = 0
    for texts in per_chunk:
        parts = found[cursor:cursor + len(texts)]
        cursor += len(texts)
        if any(p is None for p in parts):
            out.append(None)
            continue
        matrix = np.stack(parts).astype(np.float32)
        mean = matrix.mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        out.append((mean.astype(np.float32).tobytes(),
                    matrix.tobytes() if len(texts) > 1 else None))
    return out


def _embed_cached(index: MemoryIndex, embedder: Embedder, texts: list[str],
                  progress: Callable[[int, int], None] | None, per_chunk: list[list[str]],
                  total: int, stats: dict[str, int], collected: batches.Collected,
                  token_ids: dict[str, list[int]] | None = None) -> list[Any | None]:
    """A vector per text (None while a batch job owes it): from the cache, from batch jobs
    that just completed, or embedded now (or submitted as jobs, ``wait: false``). Texts in
    ``token_ids`` are embedded from those ids. What is embedded now is cached batch by
    batch on a writer thread while the model embeds the next batch."""
    import numpy as np

    store, cache = index.store, index.settings.cache
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
        _check(index)  # between embedding batches: leaving never waits for a long backfill
        done_texts += count
        if progress:
            progress(sum(1 for b in bounds if b <= done_texts) if done_texts < len(texts)
                     else total, total)

    advance(0)
    items = list(todo.items())
    if batches.deferred(embedder, index.settings):
        now, awaited = batches.submit(index, embedder, items, collected.retry)
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


# --- vector scoring -------------------------------------------------------------------------

def _query_vector(index: MemoryIndex, query: str) -> Any | None:
    """The query's vector, or None when the index has no usable vectors for it."""
    embedder = index.embedders.get()
    if embedder is None or index.store.get_meta("embedding") != signature(embedder):
        return None
    try:
        import numpy as np

        return np.asarray(embedder.embed_query(query), dtype=np.float32)
    except EmbeddingError as exc:
        log.warning("memory search is keyword-only: %s", exc)
        index.embedders.error = str(exc)
        return None


def vector_candidates(index: MemoryIndex, query: str,
                      pool: int) -> tuple[dict[int, float], Any | None]:
    """The ``pool`` nearest chunks with 0..1 vector scores, and the query vector (None when
    vector search is unavailable)."""
    qvec = _query_vector(index, query)
    if qvec is None or not index.store.dims:
        return {}, None
    # The in-process matrix when it is in step with the store, else vec0 (the matrix loads
    # meanwhile); without sqlite-vec the matrix is the only way and is loaded in line.
    nearest = index.vectors.nearest(index.store, qvec, pool,
                                    wait=not index.store.vec_available)
    if nearest is None:
        nearest = [cid for cid, _ in index.store.vec_knn(qvec.tobytes(), pool)]
    return vector_scores(index, qvec, nearest), qvec


def vector_scores(index: MemoryIndex, qvec: Any, chunk_ids: list[int]) -> dict[int, float]:
    """Calibrated 0..1 vector scores of the given chunks for the query vector."""
    import numpy as np

    embedder = index.embedders.active
    if qvec is None or embedder is None or not chunk_ids:
        return {}
    scores: dict[int, float] = {}
    for chunk_id, (blob, segments) in index.store.get_vectors(chunk_ids).items():
        if blob is None:
            continue
        cosine = float(np.frombuffer(blob, dtype=np.float32) @ qvec)
        if segments:
            matrix = np.frombuffer(segments, dtype=np.float32).reshape(-1, len(qvec))
            cosine = policy.combine_cosines(cosine, float((matrix @ qvec).max()))
        scores[chunk_id] = policy.calibrate(cosine, embedder.calibration)
    return scores
