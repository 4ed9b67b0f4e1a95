"""The last step of a sync: everything it found, written in one transaction.

The plan's removals, its re-chunked files with their vectors, the vectors found for kept
chunks, the batch jobs done with, and the signatures the index is now built with are
written together, so a reader sees the old index or the new one, never half of each (a
rebuild too). The vector log records the vectors removed and added under the new
generation (``Store.bump_generation``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from clawd.memory.base import Embedder
from clawd.memory.embedding_tables import BatchJobRow
from clawd.memory.index_store import IndexStore
from clawd.memory.plan import SKIPPED_META, SyncPlan, text_hash

log = logging.getLogger(__name__)

Vectors = list[tuple[bytes, bytes | None] | None]  # (chunk vector, segment vectors) per chunk


def commit(store: IndexStore, plan: SyncPlan, vectors: Vectors | None, embedder: Embedder | None,
           embedding: str | None, done_jobs: list[BatchJobRow],
           stats: dict[str, int]) -> dict[str, Any]:
    """Write the sync; its summary. ``vectors`` are those of ``plan.to_embed()`` (None
    without an embedder); ``done_jobs`` are the batch jobs to forget."""
    dims = embedder.dims or 0 if embedder else 0
    with store.lock, store.transaction():
        store.bump_generation()
        if plan.rebuild:
            store.reset(dims)
        elif dims and store.dims != dims:
            store.set_dims(dims)  # the first vectors of an index built keyword-only
        for key in plan.removed:
            store.delete_file(key)
        cursor = 0
        for source, digest, stat, chunks in plan.changed:
            store.delete_file(source.key)
            for chunk in chunks:
                blob, segments = (vectors[cursor] or (None, None)) if vectors else (None, None)
                cursor += 1
                store.insert_chunk(source.key, source.source, chunk.start_line, chunk.end_line,
                                   chunk.heading, chunk.text, text_hash(chunk.text), blob,
                                   segments)
            store.upsert_file(source.key, source.source, digest, stat.st_mtime, stat.st_size)
        for source, digest, stat in plan.touched:
            store.upsert_file(source.key, source.source, digest, stat.st_mtime, stat.st_size)
        if vectors:
            for (chunk_id, _, _, _), item in zip(plan.missing, vectors[cursor:]):
                if item is not None:
                    store.set_embedding(chunk_id, *item)
        store.fill_line_tokens()  # chunks written before their line tokens were stored
        for job in done_jobs:
            store.delete_batch_job(job.provider, job.job)
        if embedder is not None:
            dropped = store.drop_batch_jobs_except(embedder.provider, embedder.model,
                                                   embedder.fingerprint)
            if dropped:
                log.info("memory index: %d batch jobs of the previous embedder dropped", dropped)
        store.set_meta("chunking", plan.chunking)
        if embedding is not None:
            store.set_meta("embedding", embedding)
        store.set_meta(SKIPPED_META, json.dumps(
            {key: {"reason": reason, "stamp": stamp}
             for key, (reason, stamp) in sorted(plan.skipped.items())}))
    jobs, awaited = store.batch_counts()
    counts = store.counts()
    return {"files": plan.files, "indexed": len(plan.changed), "removed": len(plan.removed),
            "skipped": len(plan.skipped), "chunks": len(plan.new_chunks), "rebuilt": plan.rebuild,
            "provider": embedder.provider if embedder else None, **stats,
            "pendingBatches": jobs, "pendingEmbeddings": awaited,
            "unembeddedChunks": counts["chunks"] - counts["embedded"]}
