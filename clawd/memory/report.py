"""What ``MemoryIndex.status`` reports: counts, the embedder, the vector and keyword
halves, whether the index is behind the files, the last sync and the files it skips."""

from __future__ import annotations

import json
from typing import Any

from clawd.memory.plan import skipped_files, unchanged

LAST_SYNC_META = "lastSync"


def json_meta(value: str | None) -> dict[str, Any] | None:
    try:
        data = json.loads(value) if value else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def status(index: Any) -> dict[str, Any]:
    """``index``'s status (a ``MemoryIndex``)."""
    with index._lock:
        counts = index.store.counts()
        stored = index.store.get_meta("embedding")
        jobs, awaited = index.store.batch_counts()
        last_sync = index.last_sync or json_meta(index.store.get_meta(LAST_SYNC_META))
        skipped = skipped_files(index.store)
    embedding = json.loads(stored) if stored else {}
    active = index.embedders.active
    vector_mode = "off" if not index.settings.store.vector.enabled else \
        index.store.vector_mode
    return {
        "agentId": index.agent_id, "path": index.store.location, "workspace": str(index.workspace),
        "files": counts["files"], "chunks": counts["chunks"],
        "embeddedChunks": counts["embedded"], "cacheEntries": counts["cache"],
        "pendingBatches": jobs, "pendingEmbeddings": awaited,
        "fullyEmbedded": counts["embedded"] == counts["chunks"],
        "provider": active.provider if active else embedding.get("provider")
        or index.embedders.primary_name,
        "model": active.model if active else embedding.get("model"),
        "fallback": index.embedders.fallback_info, "embeddingError": index.embedders.error,
        "vector": {"enabled": index.settings.store.vector.enabled,
                   "available": index.store.vec_available, "mode": vector_mode,
                   "extension": index.store.vec_version, "dims": index.store.dims or None},
        "fts": {"available": index.store.fts_available},
        # before this process has synced, "dirty" is whether a file changed since the
        # last sync (by size and time), not merely that nobody has looked yet
        "dirty": index.dirty if index.synced else not unchanged(index._target()),
        "syncOnSearch": index.settings.sync.on_search,
        "watching": index._watcher is not None,
        "sources": list(index.settings.sources), "lastSync": last_sync,
        "skippedFiles": [{"path": key, "reason": reason}
                         for key, (reason, _) in sorted(skipped.items())],
    }
