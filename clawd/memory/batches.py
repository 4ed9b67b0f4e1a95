"""Embedding batch jobs the memory index does not wait for (``remote.batch.wait: false``).

With ``remote.batch.enabled`` and ``wait: false``, a sync hands the texts that the embedding
cache does not hold to ``submit``: at least ``BATCH_MIN_TEXTS`` of them go out as batch jobs
(``remote.batch.concurrency`` uploads at a time), each recorded in the index's
``embedding_batches`` table as soon as the provider accepts it, and the sync returns without
waiting (fewer texts are embedded at once through the synchronous endpoint). The chunks are
stored without vectors, so keyword search finds them at once and vector search once their
vectors arrive.

Every later sync starts with ``collect``: each pending job of the current embedder is polled
once, without waiting. A completed job's vectors go into the embedding cache and fill the
chunks still missing them. A failed, expired or cancelled job, or one older than
``timeoutMinutes`` (cancelled then), is dropped with a warning; whatever part of its results
arrived is kept, and its other texts still needed are submitted again as a new job once. If
that job fails too (a batch endpoint that keeps failing would otherwise be retried forever),
they go through the synchronous endpoint. A job the provider cannot be asked about (network
down) stays pending until its timeout. When the index is rebuilt for another provider, model
or endpoint, the jobs of the old one are dropped.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawd.config import MemorySearch
from clawd.memory.embeddings import (
    BatchEmbedder,
    BatchStatus,
    Embedder,
    EmbeddingError,
    supports_batches,
)
from clawd.memory.store import BatchJobRow

if TYPE_CHECKING:
    from clawd.memory.index import MemoryIndex

log = logging.getLogger(__name__)

BATCH_ATTEMPTS = 2  # batch submissions of the same texts before the synchronous endpoint


@dataclass
class Collected:
    """What one round of polling found."""

    vectors: dict[str, Any] = field(default_factory=dict)  # text hash -> vector
    pending: set[str] = field(default_factory=set)  # text hashes still awaited
    retry: dict[str, int] = field(default_factory=dict)  # hash -> submissions that failed
    finished: list[BatchJobRow] = field(default_factory=list)  # forgotten when sync commits


def deferred(embedder: Embedder, settings: MemorySearch) -> bool:
    """Whether a sync submits batch jobs without waiting for them."""
    batch = settings.remote.batch
    return batch.enabled and not batch.wait and supports_batches(embedder)


def _key(embedder: Embedder) -> tuple[str, str, str]:
    return embedder.provider, embedder.model, embedder.fingerprint


def collect(index: MemoryIndex, embedder: Embedder) -> Collected:
    """Poll each pending job of ``embedder`` once; completed vectors go to the cache."""
    out = Collected()
    if not supports_batches(embedder):
        return out
    batcher: BatchEmbedder = embedder  # type: ignore[assignment]
    store, settings = index.store, index.settings
    timeout = settings.remote.batch.timeout_minutes * 60
    now = time.time()
    for job in store.batch_jobs(*_key(embedder)):
        age = now - job.submitted_at
        try:
            status = batcher.poll_batch_job(job.job, len(job.hashes))
        except EmbeddingError as exc:
            if age <= timeout:
                log.warning("memory index: batch %s could not be polled (%s); asking again "
                            "on the next sync", job.job, exc)
                out.pending.update(job.hashes)
                continue
            status = BatchStatus("failed", f"unreachable ({exc})")
        if status.state == "pending" and age > timeout:
            batcher.cancel_batch_job(job.job)
            status = BatchStatus("failed", f"timed out after "
                                           f"{settings.remote.batch.timeout_minutes:g} minutes")
        if status.state == "pending":
            out.pending.update(job.hashes)
            continue
        got = status.vectors or []
        missing = [h for i, h in enumerate(job.hashes) if i >= len(got) or got[i] is None]
        for h, vector in zip(job.hashes, got):
            if vector is not None:
                out.vectors[h] = vector
        if status.state != "completed" or missing:
            log.warning("memory index: %s batch %s ended %s; dropped, %d of its %d texts "
                        "will be embedded again%s", embedder.provider, job.job, status.detail,
                        len(missing), len(job.hashes), " synchronously"
                        if job.attempt >= BATCH_ATTEMPTS else "")
            for h in missing:
                out.retry[h] = max(out.retry.get(h, 0), job.attempt)
        else:
            log.info("memory index: %s batch %s completed (%d texts)", embedder.provider,
                     job.job, len(job.hashes))
        out.finished.append(job)
    # A text may be in a finished job and in a pending one (a retry racing a late result).
    out.pending.difference_update(out.vectors)
    if out.vectors:
        first = next(iter(out.vectors.values()))
        if not embedder.dims:
            embedder.dims = len(first)
        cache = settings.cache
        if cache.enabled and cache.max_entries > 0:
            import numpy as np

            rows = [(h, len(v), np.asarray(v, dtype=np.float32).tobytes())
                    for h, v in out.vectors.items()]
            store.cache_put(*_key(embedder), rows, cache.max_entries)
    return out


def submit(index: MemoryIndex, embedder: Embedder, items: list[tuple[str, str]],
           retry: dict[str, int]) -> tuple[list[tuple[str, str]], set[str]]:
    """Send (hash, text) items as batch jobs without waiting.

    Returns the items to embed synchronously now (too few for a batch, submitted too often,
    or refused at submission) and the hashes now awaited from jobs.
    """
    batcher: BatchEmbedder = embedder  # type: ignore[assignment]
    groups: dict[int, list[tuple[str, str]]] = {}
    for item in items:
        groups.setdefault(retry.get(item[0], 0) + 1, []).append(item)
    now: list[tuple[str, str]] = []
    awaited: set[str] = set()
    for attempt, group in sorted(groups.items()):
        if attempt > BATCH_ATTEMPTS or len(group) < batcher.batch_min_texts:
            now.extend(group)
            continue
        refused = _submit_jobs(index, batcher, group, attempt)
        now.extend(refused)
        awaited.update(h for h, _ in group)
        awaited.difference_update(h for h, _ in refused)
    return now, awaited


def _submit_jobs(index: MemoryIndex, embedder: BatchEmbedder, items: list[tuple[str, str]],
                 attempt: int) -> list[tuple[str, str]]:
    """Submit ``items`` as jobs, recording each as it is accepted; the items of jobs that
    failed at once. A submission error is raised after the others are recorded."""
    size = max(1, embedder.batch_job_texts)
    parts = [items[start:start + size] for start in range(0, len(items), size)]
    workers = max(1, min(len(parts), index.settings.remote.batch.concurrency))
    refused: list[tuple[str, str]] = []
    error: EmbeddingError | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(embedder.submit_batch_job, [t for _, t in part]): part
                   for part in parts}
        for future in as_completed(futures):
            part = futures[future]
            try:
                job_id, status = future.result()
            except EmbeddingError as exc:
                error = error or exc
                continue
            if status.state == "failed":
                log.warning("memory index: %s batch %s ended %s at once; embedding its %d "
                            "texts synchronously", embedder.provider, job_id, status.detail,
                            len(part))
                refused.extend(part)
                continue
            index.store.add_batch_job(*_key(embedder), job_id, [h for h, _ in part], attempt,
                                      time.time())
            log.info("memory index: %s batch %s submitted (%d texts)", embedder.provider,
                     job_id, len(part))
    if error is not None:
        raise error
    return refused
