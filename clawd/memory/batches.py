"""Embedding batch jobs the memory index does not wait for (``remote.batch.wait: false``).

With ``remote.batch.enabled`` and ``wait: false``, a sync hands the texts that the embedding
cache does not hold to ``submit``: at least ``BATCH_MIN_TEXTS`` of them go out as batch jobs
(``remote.batch.concurrency`` uploads at a time), each recorded in the index's
``embedding_batches`` table as soon as the provider accepts it, and the sync returns without
waiting (fewer texts are embedded at once through the synchronous endpoint). The chunks are
stored without vectors, so keyword search finds them at once and vector search once their
vectors arrive. A job whose upload fails does not stop the others: its texts stay without
vectors and the next sync submits them again.

Every later sync starts with ``collect``: each pending job of the current embedder is polled
once, without waiting. A completed job's vectors fill the chunks still missing them and go
into the embedding cache (``remember``, after the sync has read the entries it needs). A
failed, expired or cancelled job is dropped with a warning; whatever part of its results
arrived is kept, and its other texts still needed are submitted again as a new job. A job is
given ``timeoutMinutes`` but at least 24 hours (OpenAI's completion window); past that it is
cancelled, and kept until the provider reports it ended so that its finished part is read
(dropped all the same if it still runs an hour later). Texts whose batch submission failed
twice (job failed, or upload refused) go through the synchronous endpoint instead, since a
batch endpoint that keeps failing would otherwise be retried forever. A job the provider
cannot be asked about (network down) stays pending until its timeout. A job none of whose
texts a chunk still needs (the note changed or went away) is cancelled and forgotten
(``orphans``). When the index is rebuilt for another provider, model or endpoint, the jobs
of the old one are dropped.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from clawd.config import MemorySearch
from clawd.memory.base import BatchEmbedder, BatchStatus, Embedder
from clawd.memory.embedding_tables import BatchJobRow
from clawd.memory.jobs import split_batch_jobs, supports_batches
from clawd.memory.target import Seen, Target

log = logging.getLogger(__name__)

BATCH_ATTEMPTS = 2  # batch submissions of the same texts before the synchronous endpoint
DEFERRED_TIMEOUT = 24 * 3600  # OpenAI's completion window: the least a job is given
CANCEL_GRACE = 3600  # how long a job cancelled for its age may take to report its end


@dataclass
class Collected:
    """What one round of polling found."""

    vectors: dict[str, Any] = field(default_factory=dict)  # text hash -> vector
    pending: set[str] = field(default_factory=set)  # text hashes still awaited
    retry: dict[str, int] = field(default_factory=dict)  # hash -> submissions that failed
    finished: list[BatchJobRow] = field(default_factory=list)  # forgotten when sync commits
    waiting: list[BatchJobRow] = field(default_factory=list)  # jobs still pending
    wanted: set[str] = field(default_factory=set)  # pending hashes some chunk still needs


def deferred(embedder: Embedder, settings: MemorySearch) -> bool:
    """Whether a sync submits batch jobs without waiting for them."""
    batch = settings.remote.batch
    return batch.enabled and not batch.wait and supports_batches(embedder)


def job_timeout(settings: MemorySearch) -> float:
    """Seconds a job not waited for may run: ``timeoutMinutes``, but at least 24 hours."""
    return max(settings.remote.batch.timeout_minutes * 60, DEFERRED_TIMEOUT)


def _key(embedder: Embedder) -> tuple[str, str, str]:
    return embedder.provider, embedder.model, embedder.fingerprint


def collect(target: Target, embedder: Embedder) -> Collected:
    """Poll each pending job of ``embedder`` once; what completed, failed or still runs.

    The vectors found go to the embedding cache with ``remember``, once the sync has read
    the cache entries it needs (so that they are not evicted to make room)."""
    out = Collected()
    if not supports_batches(embedder):
        return out
    batcher: BatchEmbedder = embedder  # type: ignore[assignment]
    timeout = job_timeout(target.settings)
    seen = target.seen
    now = time.time()
    for job in target.store.batch_jobs(*_key(embedder)):
        try:
            status = _look(batcher, job, now - job.submitted_at, timeout, seen)
            if status.state == "pending":
                out.pending.update(job.hashes)
                out.waiting.append(job)
                continue
            _finish(embedder, job, status, out)
        except Exception as exc:  # noqa: BLE001 - one bad job must not stop every sync
            log.warning("memory index: batch %s could not be collected (%s); asking again on "
                        "the next sync", job.job, exc)
            out.pending.update(job.hashes)
            out.waiting.append(job)
    # A text may be in a finished job and in a pending one (a retry racing a late result).
    out.pending.difference_update(out.vectors)
    if out.vectors and not embedder.dims:
        embedder.dims = len(next(iter(out.vectors.values())))
    return out


def _look(batcher: BatchEmbedder, job: BatchJobRow, age: float, timeout: float,
          seen: Seen) -> BatchStatus:
    """The job's status, once it is asked; a job past ``timeout`` is cancelled once and
    stays pending until the provider reports it ended (then its finished part is read),
    for ``CANCEL_GRACE`` at most."""
    try:
        status = batcher.poll_batch_job(job.job, len(job.hashes))
    except Exception as exc:  # noqa: BLE001 - network down, or a reply that cannot be read
        if age > timeout:
            return BatchStatus("failed", f"unreachable ({exc})")
        if job.job not in seen.unreachable:
            seen.unreachable.add(job.job)
            log.warning("memory index: batch %s could not be polled (%s); asking again on "
                        "later syncs", job.job, exc)
        return BatchStatus("pending", "unreachable")
    seen.unreachable.discard(job.job)
    if status.state != "pending" or age <= timeout:
        return status
    hours = timeout / 3600
    if job.job not in seen.cancelled:
        seen.cancelled.add(job.job)
        log.warning("memory index: batch %s still %s after %g hours; cancelled, its finished "
                    "part is read once the provider reports it ended", job.job, status.detail,
                    hours)
        batcher.cancel_batch_job(job.job)
    if age > timeout + CANCEL_GRACE:
        return BatchStatus("failed", f"still {status.detail} {hours:g} hours after submission "
                                     f"and {CANCEL_GRACE // 60} minutes after it was cancelled")
    return status


def _finish(embedder: Embedder, job: BatchJobRow, status: BatchStatus, out: Collected) -> None:
    """Take what an ended job delivered; the rest of its texts are to be submitted again."""
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


def remember(target: Target, embedder: Embedder, collected: Collected) -> None:
    """Put the collected vectors into the embedding cache."""
    cache = target.settings.cache
    if not collected.vectors or not cache.enabled or cache.max_entries <= 0:
        return
    import numpy as np

    rows = [(h, len(v), np.asarray(v, dtype=np.float32).tobytes())
            for h, v in collected.vectors.items()]
    target.store.cache_put(*_key(embedder), rows, cache.max_entries)


def orphans(embedder: Embedder, collected: Collected) -> list[BatchJobRow]:
    """Pending jobs none of whose texts a chunk still needs (their notes changed or went
    away): cancelled here, to be forgotten when the sync commits."""
    lost = [job for job in collected.waiting if collected.wanted.isdisjoint(job.hashes)]
    for job in lost:
        log.info("memory index: %s batch %s is no longer needed (its texts left the index); "
                 "cancelled", embedder.provider, job.job)
        try:
            embedder.cancel_batch_job(job.job)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - forgotten all the same
            log.info("memory index: batch %s could not be cancelled: %s", job.job, exc)
    return lost


def submit(target: Target, embedder: Embedder, items: list[tuple[str, str]],
           retry: dict[str, int]) -> tuple[list[tuple[str, str]], set[str]]:
    """Send (hash, text) items as batch jobs without waiting.

    Returns the items to embed synchronously now (too few for a batch, submitted too often,
    or refused by the provider at once) and the hashes now awaited from jobs. The items of
    a job whose submission raised (an upload error) are in neither: they stay without
    vectors and the next sync submits them again; after ``BATCH_ATTEMPTS`` submissions
    that failed one way or the other, they go through the synchronous endpoint.
    """
    batcher: BatchEmbedder = embedder  # type: ignore[assignment]
    refusals = target.seen.refused
    groups: dict[int, list[tuple[str, str]]] = {}
    for item in items:
        attempt = retry.get(item[0], 0) + refusals.get(item[0], 0) + 1
        groups.setdefault(attempt, []).append(item)
    now: list[tuple[str, str]] = []
    awaited: set[str] = set()
    for attempt, group in sorted(groups.items()):
        if attempt > BATCH_ATTEMPTS or len(group) < batcher.batch_min_texts:
            now.extend(group)
            continue
        accepted, refused = _submit_jobs(target, batcher, group, attempt)
        now.extend(refused)
        awaited.update(accepted)
    return now, awaited


def _submit_jobs(target: Target, embedder: BatchEmbedder, items: list[tuple[str, str]],
                 attempt: int) -> tuple[set[str], list[tuple[str, str]]]:
    """Submit ``items`` as jobs, recording each as soon as it is accepted. Returns the
    hashes now awaited and the items of jobs the provider refused at once; a job whose
    submission raised is counted in ``Seen.refused`` and warned about once per sync."""
    spans = split_batch_jobs(embedder, [t for _, t in items])
    parts = [items[start:end] for start, end in spans]
    workers = max(1, min(len(parts), target.settings.remote.batch.concurrency))
    refusals = target.seen.refused
    accepted: set[str] = set()
    refused: list[tuple[str, str]] = []
    errors: list[tuple[list[tuple[str, str]], Exception]] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(embedder.submit_batch_job, [t for _, t in part]): part
                   for part in parts}
        for future in as_completed(futures):
            part = futures[future]
            try:
                job_id, status = future.result()
            except Exception as exc:  # noqa: BLE001 - the other jobs stand; these wait
                errors.append((part, exc))
                continue
            if status.state == "failed":
                log.warning("memory index: %s batch %s ended %s at once; embedding its %d "
                            "texts synchronously", embedder.provider, job_id, status.detail,
                            len(part))
                refused.extend(part)
                continue
            target.store.add_batch_job(*_key(embedder), job_id, [h for h, _ in part], attempt,
                                      time.time())
            accepted.update(h for h, _ in part)
            log.info("memory index: %s batch %s submitted (%d texts)", embedder.provider,
                     job_id, len(part))
    for h in accepted:
        refusals.pop(h, None)
    if errors:
        texts = [item for part, _ in errors for item in part]
        for h, _ in texts:
            refusals[h] = refusals.get(h, 0) + 1
        log.warning("memory index: %d of %d %s batch jobs could not be submitted (%s); their "
                    "%d texts stay without vectors and are submitted again by the next sync%s",
                    len(errors), len(parts), embedder.provider, errors[0][1], len(texts),
                    ", through the synchronous endpoint" if attempt >= BATCH_ATTEMPTS else "")
    return accepted, refused
