"""The sync pipeline: plan -> vectors -> commit.

``run`` brings one index in line with its files. ``plan.py`` finds what changed (nothing is
written); batch jobs submitted by earlier syncs without waiting are polled once
(``batches.collect``); ``vectors.py`` embeds the chunks to embed (through the cache, batch
jobs, or the model); ``commit.py`` writes it all in one transaction. Reading, chunking and
embedding happen outside every lock a search takes; ``MemoryIndex.sync`` decides when a sync
runs and serialises them.

If the primary embedder fails, the fallback takes over and the sync starts again (the
signature changes, so that sync rebuilds with it); with no working embedder chunks are
stored without vectors, keyword search keeps working, and a later sync fills the vectors in.
Between its steps a sync checks whether the index was closed (``SyncCancelled``); nothing
of it is committed then, except embeddings already cached, so the next sync resumes there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clawd.memory import batches
from clawd.memory.base import EmbeddingError
from clawd.memory.commit import Vectors, commit
from clawd.memory.embeddings import Embedders, signature
from clawd.memory.plan import make_plan
from clawd.memory.target import Target
from clawd.memory.vectors import announce_upload, vectorise


def run(target: Target, embedders: Embedders, *, force: bool = False,
        progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Sync ``target`` with its files; a summary of what was done. ``progress(done, total)``
    counts chunks."""
    embedder = embedders.get()
    embedding = signature(embedder) if embedder else None
    plan = make_plan(target, embedding, force)
    # Batch jobs submitted by earlier syncs without waiting: polled once, never waited for.
    collected = batches.collect(target, embedder) if embedder is not None \
        else batches.Collected()
    todo = plan.to_embed()
    total = len(todo)
    vectors: Vectors | None = None
    stats = {"embedded": 0, "cached": 0, "submitted": 0, "collected": len(collected.vectors)}
    orphans: list[Any] = []
    if embedder is not None and todo and embedder.provider != "local" \
            and embedding != plan.stored_embedding:
        announce_upload(embedder, plan.stored_embedding, total)
    if embedder is not None and todo:
        try:
            vectors = vectorise(target, embedder, todo, progress, total, stats, collected)
        except EmbeddingError as exc:
            batches.remember(target, embedder, collected)
            if embedders.fail(exc) is not None:
                return run(target, embedders, force=force, progress=progress)
            embedder, embedding = None, None
    if embedder is not None:
        # Cached only now: making room for them must not evict entries this sync reads.
        batches.remember(target, embedder, collected)
        orphans = batches.orphans(embedder, collected)
    if vectors is None and progress:
        progress(total, total)
    target.check()
    return commit(target.store, plan, vectors, embedder, embedding,
                  collected.finished + orphans, stats)
