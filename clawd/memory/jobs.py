"""Batch jobs an embedder waits for (``remote.batch.wait``, the default).

``run_batch_jobs`` submits a backfill as jobs (``split_batch_jobs`` keeps each within the
provider's limits: ``batch_job_texts`` texts, about ``batch_job_bytes`` bytes) and polls them
until they finish, handing over each job's vectors as it completes. ``embed_waiting`` is how
an embedder with a batch endpoint embeds documents: through jobs for a large backfill, else
through its synchronous endpoint. Jobs not waited for (``wait: false``) are submitted,
recorded and collected by the index (``batches.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from clawd.memory.base import BatchEmbedder, BatchStatus, EmbeddingError

BATCH_TEXT_OVERHEAD = 200  # JSON bytes around each text in a job's upload, generously


def supports_batches(embedder: Any) -> bool:
    """Whether ``embedder`` has an asynchronous batch endpoint."""
    return all(callable(getattr(embedder, name, None)) for name in
               ("submit_batch_job", "poll_batch_job", "cancel_batch_job"))


def split_batch_jobs(embedder: Any, texts: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of each job ``texts`` go out in: at most ``batch_job_texts`` texts and,
    when the embedder sets ``batch_job_bytes``, about that many bytes of request."""
    size = max(1, int(getattr(embedder, "batch_job_texts", 0) or len(texts) or 1))
    budget = getattr(embedder, "batch_job_bytes", None)
    parts: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, text in enumerate(texts):
        cost = len(json.dumps(text)) + BATCH_TEXT_OVERHEAD if budget else 0
        if i > start and (i - start >= size or (budget and used + cost > budget)):
            parts.append((start, i))
            start, used = i, 0
        used += cost
    if start < len(texts):
        parts.append((start, len(texts)))
    return parts


def waits_for_batches(embedder: Any, count: int) -> bool:
    """Whether ``count`` texts go through batch jobs that are waited for: an embedder with a
    batch endpoint, ``remote.batch`` enabled with ``wait``, and a backfill large enough."""
    if not supports_batches(embedder):
        return False
    batch = embedder.settings.remote.batch
    return batch.enabled and batch.wait and count >= embedder.batch_min_texts


def embed_waiting(embedder: BatchEmbedder, texts: Sequence[str],
                  progress: Callable[[int], None] | None,
                  embed_part: Callable[[list[str]], list[Any]], part_size: int) -> list[Any]:
    """Vectors of ``texts``, waited for: through batch jobs for a large backfill when
    ``remote.batch`` is enabled with ``wait``, else ``part_size`` texts per synchronous
    ``embed_part`` call. ``progress`` counts texts."""
    if waits_for_batches(embedder, len(texts)):
        return run_batch_jobs(embedder, list(texts), progress)
    out: list[Any] = []
    for start in range(0, len(texts), part_size):
        part = list(texts[start:start + part_size])
        out.extend(embed_part(part))
        if progress:
            progress(len(part))
    return out


def run_batch_jobs(embedder: BatchEmbedder, texts: list[str],
                   progress: Callable[[int], None] | None = None,
                   on_done: Callable[[int, list[Any]], None] | None = None) -> list[Any]:
    """Embed ``texts`` through batch jobs and wait for them (``remote.batch.wait``).

    Jobs (see ``split_batch_jobs``) run ``remote.batch.concurrency`` at a time; each is
    polled every ``pollIntervalMs`` and given up (cancelled) after ``timeoutMinutes``. As
    each job completes, ``on_done(start, vectors)`` receives its vectors (``start`` is the
    offset of its first text) and ``progress`` its count, in the calling thread. When a
    job fails, the jobs not started yet are not submitted, those running are still waited
    for (and handed to ``on_done``), then the first error is raised.
    """
    parts = split_batch_jobs(embedder, texts)
    workers = max(1, min(len(parts), embedder.settings.remote.batch.concurrency))

    def run(start: int, end: int) -> list[Any]:
        job_id, status = embedder.submit_batch_job(texts[start:end])
        return wait_for_batch_job(embedder, job_id, status, end - start)

    done: dict[int, list[Any]] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run, start, end): start for start, end in parts}
        for future in as_completed(futures):
            if future.cancelled():
                continue
            try:
                got = future.result()
            except Exception as exc:  # noqa: BLE001 - raised once the running jobs are in
                if error is None:
                    error = exc
                    for other in futures:
                        other.cancel()
                continue
            done[futures[future]] = got
            if on_done:
                on_done(futures[future], got)
            if progress:
                progress(len(got))
    if error is not None:
        raise error
    vectors = [v for start, _ in parts for v in done[start]]
    if vectors:
        embedder.dims = len(vectors[0])
    return vectors


def wait_for_batch_job(embedder: BatchEmbedder, job_id: str, status: BatchStatus,
                       count: int) -> list[Any]:
    """Poll one job until it finishes; its vectors, or ``EmbeddingError``."""
    cfg = embedder.settings.remote.batch
    deadline = time.monotonic() + cfg.timeout_minutes * 60
    while status.state == "pending":
        if time.monotonic() > deadline:
            embedder.cancel_batch_job(job_id)
            raise EmbeddingError(f"{embedder.provider} batch {job_id} timed out after "
                                 f"{cfg.timeout_minutes:g} minutes")
        time.sleep(cfg.poll_interval_ms / 1000)
        status = embedder.poll_batch_job(job_id, count)
    if status.state != "completed" or status.vectors is None:
        raise EmbeddingError(f"{embedder.provider} batch {job_id} ended {status.detail}")
    missing = sum(1 for v in status.vectors if v is None)
    if missing:
        raise EmbeddingError(f"{embedder.provider} batch {job_id}: no vectors for {missing} "
                             f"of {count} texts ({status.detail})")
    return status.vectors

