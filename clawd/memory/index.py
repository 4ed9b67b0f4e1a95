"""The memory index of one agent: keeping it in step with the files, and searching it.

``open_index(agent_id, workspace, settings, state_dir, sources=, files=)`` returns a
``MemoryIndex`` over what the agent's store keeps (``sources``: its memory files and
transcripts, ``memory.sources.MemorySources``; ``files``: its workspace files, for MEMORY.md's
replaced lines); nothing heavy happens until the first ``sync`` or ``search``:

- ``sync(force=False, progress=None) -> dict`` re-reads changed files (by size, mtime,
  then content hash), chunks them, embeds new text (through the embedding cache, so
  unchanged text is never embedded twice) and writes everything in one transaction.
  ``progress(done, total)`` counts chunks. When the embedding provider, model, endpoint
  or chunking differs from what built the index, the whole index is rebuilt; the old one
  stays searchable until the rebuild commits. With ``remote.batch.wait: false`` large
  backfills are submitted as batch jobs and the sync returns at once; later syncs collect
  the jobs (``batches.py``), and while chunks await vectors from pending jobs a search
  syncs again whenever ``pollIntervalMs`` has passed since the last poll; such a chunk is
  ranked with an estimated vector score (the mean of the keyword hits that have one).
- ``search(query, max_results=None, min_score=None) -> dict`` returns (docs/memory.md)
  ``{"results": [{"path", "startLine", "endLine", "score", "snippet", "source",
  "citation"}], "provider", "model", "fallback", "mode"}`` (``citation``: ``path#L3-L9``)
  and never fails hard: without embeddings it is keyword-only, without FTS5 vector-only,
  without sqlite-vec an in-process cosine scan. One place (path and line range) is returned
  once, with its best score; when repeats crowd the candidate pool, the pool is widened so
  other places can fill the results. ``query.temporalDecay`` lowers dated notes' scores by
  age (``recency.py``) after ``minScore`` has judged relevance; ``query.mmr`` picks the
  results for diversity too (``diversity.py``). A line that consolidation replaced shows
  its replacement in the snippet (``superseded.py``). An empty query or ``max_results < 1`` raise
  ``ValueError`` (front ends check their input first).
- ``status() -> dict`` (with ``pendingBatches`` / ``pendingEmbeddings`` and whether every
  chunk has its vector, ``fullyEmbedded``; ``lastSync``, the summary and ISO time ``at`` of
  the last sync, kept in the ``meta`` table so a new process knows it too; ``skippedFiles``),
  ``mark_dirty()``, ``catch_up(timeout)``, ``start_watcher()``, ``close()``. ``dirty`` is
  true until this process has compared the index with the files (or after a change marks
  it so).
- ``forget(places, edit) -> dict`` runs ``edit`` (removing note lines) and purges what the
  index kept of those lines, embedding cache included (``purge.py``).

The index file is ``<state>/memory/<agentId>.sqlite`` unless ``store.path`` says otherwise
(``{agentId}`` is replaced), or the rows are kept where ``open_store`` says (a database's
``IndexStore``, ``index_store.py``). ``MemoryIndex`` decides when a sync runs and runs one
at a time; the sync itself is the pipeline of ``sync.py`` (plan -> vectors -> commit), which
works on a ``Target`` and never sees the index. The candidates of a search come from
``candidates.py``; the index owns the in-process vector matrix they are read through.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import date, datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from clawd.config import MemorySearch
from clawd.memory import candidates, diversity, purge, recency, search, sync
from clawd.memory.base import Embedder
from clawd.memory.embeddings import Embedders
from clawd.memory.index_store import IndexStore
from clawd.memory.interface import SearchResults
from clawd.memory.matrix import VectorMatrix
from clawd.memory.plan import skipped_files, unchanged
from clawd.memory.sources import MemorySources, Watching
from clawd.memory.store import Store
from clawd.memory.superseded import Superseded
from clawd.memory.target import Seen, SyncCancelled, Target
from clawd.workspace.interface import WorkspaceFiles

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

# How often a pool crowded by repeats of one place is widened (4x each time).
WIDEN_STEPS = 3
LAST_SYNC_META = "lastSync"  # the meta key of the last sync's summary


def store_path(agent_id: str, settings: MemorySearch, state_dir: Path) -> Path:
    if settings.store.path:
        return Path(settings.store.path.replace("{agentId}", agent_id)).expanduser()
    return state_dir / "memory" / f"{agent_id}.sqlite"


class MemoryIndex:
    """Search over one agent's memory files; safe to share with the watcher thread."""

    def __init__(self, agent_id: str, workspace: Path, settings: MemorySearch,
                 state_dir: Path, *, sources: MemorySources, files: WorkspaceFiles,
                 embedder: Embedder | None = None, fallback: Embedder | None = None,
                 env: Mapping[str, str] | None = None, openai_base_url: str | None = None,
                 today: Callable[[], date] = date.today,
                 open_store: Callable[[], IndexStore] | None = None):
        self.agent_id = agent_id
        self.sources = sources  # the notes and transcripts, read only through the store
        self._fingerprint: str | None = None  # the store's, at the last sync
        self.today = today  # the day dated notes' age is counted from (temporalDecay)
        self.workspace = workspace  # the agent's workspace, as ``status`` names it
        self.settings = settings
        self.path = store_path(agent_id, settings, state_dir)
        self._open_store = open_store or self._open_file
        self._store: IndexStore | None = None  # opened on first use, off the start-up path
        self.embedders = Embedders(settings, env, embedder, fallback, openai_base_url)
        self.dirty = True
        self.last_sync: dict[str, Any] | None = None
        self._polled_at = 0.0  # time.monotonic() of the last sync
        self.batch_seen = Seen()  # what this process saw of the batch jobs
        self._lock = threading.RLock()
        self._sync_lock = threading.Lock()  # one sync at a time
        self._cancel = threading.Event()  # set by close(): a running sync gives up
        self._changes = 0  # mark_dirty() calls, to tell a change made during a sync
        self._background: threading.Thread | None = None
        self.synced = False  # this process has synced the index at least once
        self.vectors = VectorMatrix()  # the vector stage's in-process fast path
        self._watcher: Watching | None = None
        self._pool: Any = None
        self.superseded = Superseded(files)  # MEMORY.md's replaced lines, marked

    @property
    def store(self) -> IndexStore:
        with self._lock:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    def _open_file(self) -> Store:
        vector = self.settings.store.vector
        return Store(self.path, vector_enabled=vector.enabled,
                     extension_path=vector.extension_path)

    # --- freshness --------------------------------------------------------------------------

    def mark_dirty(self) -> None:
        with self._lock:
            self.dirty = True
            self._changes += 1

    def sync(self, force: bool = False, progress: Progress | None = None) -> dict[str, Any]:
        """Bring the index in line with the files; a summary of what was done.

        One sync runs at a time (a second waits for the first), in every process that
        shares the store (``IndexStore.syncing``). Reading, chunking and
        embedding happen outside every lock searches take; only the final commit is
        serialised with other writers, and searches keep reading the last committed state.
        ``SyncCancelled`` when ``close()`` was called meanwhile (nothing of it is committed
        except embeddings already cached, so the next sync resumes from there).
        """
        with self._sync_lock, self.store.syncing(self._cancel):
            with self._lock:
                changes = self._changes
            fingerprint = self.sources.fingerprint()
            result = sync.run(self._target(), self.embedders, force=force,
                                  progress=progress)
            with self._lock:
                self.dirty = self._changes != changes  # a change seen during the sync
                self._fingerprint = fingerprint
                self.synced = True
                self.last_sync = {**result, "at": datetime.now(timezone.utc).isoformat(
                    timespec="seconds")}
                self.store.set_meta(LAST_SYNC_META, json.dumps(self.last_sync))
                self._polled_at = time.monotonic()
            return result

    def _target(self) -> Target:
        return Target(self.store, self.settings, self.sources, self.batch_seen, self._cancel)

    def _refresh(self) -> None:
        """Before a search (``sync.onSearch``): bring the index up to date without waiting.

        When this process has not compared the index with the files yet and no sync is
        running (a one-shot search), the search syncs first, so it sees the files as they
        are; otherwise a sync is started in the background and the search reads the last
        committed state.
        """
        self._poll()
        if not ((self.dirty or self._batches_due()) and self.settings.sync.on_search):
            return
        if not self.synced and self._sync_lock.acquire(blocking=False):
            self._sync_lock.release()
            try:
                self.sync()
            except Exception as exc:  # noqa: BLE001 - a stale index beats no answer
                log.warning("memory sync before search failed: %s", exc)
            return
        self.sync_in_background()

    def _poll(self) -> None:
        """Files kept in a store that is not watched (a database): a change (by this process
        or another) shows in its fingerprint, asked before a search."""
        if self.synced and not self.dirty \
                and self.sources.fingerprint() != self._fingerprint:
            self.mark_dirty()

    def sync_in_background(self) -> None:
        """Start a sync on a daemon thread unless one is already running (or closing)."""
        with self._lock:
            if self._cancel.is_set() or (self._background is not None
                                         and self._background.is_alive()):
                return
            self._background = threading.Thread(target=self._sync_quietly, daemon=True,
                                                name="clawd-memory-sync")
            self._background.start()

    def _sync_quietly(self) -> None:
        try:
            self.sync()
        except SyncCancelled:
            pass
        except Exception as exc:  # noqa: BLE001 - a background sync must not kill anything
            log.warning("memory sync failed: %s", exc)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait for a background sync to end; whether none is left running."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def catch_up(self, timeout: float) -> None:
        """For a search that may wait a moment but not long (automatic recall before a
        turn): start the sync a change asked for (``sync.onSearch``) in the background and
        wait up to ``timeout`` seconds for it, so notes written just before are found; a
        longer sync (a first index) goes on while the search reads what is committed."""
        self._poll()
        if self.dirty and self.settings.sync.on_search:
            self.sync_in_background()
        self.wait_synced(timeout)

    def _batches_due(self) -> bool:
        """Batch jobs are pending, some chunk still lacks its vector, and the jobs were last
        polled ``pollIntervalMs`` ago or more."""
        interval = self.settings.remote.batch.poll_interval_ms / 1000
        last = self.last_sync or {}
        return bool(last.get("pendingBatches")) and bool(last.get("unembeddedChunks", 1)) \
            and time.monotonic() - self._polled_at >= interval

    def start_watcher(self) -> None:
        """Watch the memory files (``sync.watch``) and sync after each burst of changes, where
        the store can be watched (``MemorySources.watch``; a database is polled instead)."""
        if self._watcher is None and self.settings.sync.watch:
            self._watcher = self.sources.watch(self.settings, self._sync_after_change)

    def _sync_after_change(self) -> None:
        self.mark_dirty()
        self.sync()

    def _executor(self) -> Any:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clawd-fts")
        return self._pool

    def close(self) -> None:
        """Stop watching and release the index at once: a sync still running is cancelled
        at its next step and never waited for (it resumes next time from the cache)."""
        self._cancel.set()
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.vectors.wait_loaded(2)  # a load in progress reads through the store
        if not self._sync_lock.acquire(timeout=0.5):
            return  # the sync's thread dies with the process; SQLite's WAL keeps the file whole
        try:
            with self._lock:
                if self._store is not None:
                    self._store.close()
        finally:
            self._sync_lock.release()

    def forget(self, places: Mapping[str, Collection[int]],
               edit: Callable[[], None]) -> dict[str, Any]:
        """``edit`` the notes, then purge what the index kept of the lines ``places`` names
        (``Memory.forget``; the steps are in ``purge.py``)."""
        return purge.forget(self, places, edit)

    # --- search -----------------------------------------------------------------------------

    def search(self, query: str, max_results: int | None = None,
               min_score: float | None = None, mode: str = "hybrid") -> SearchResults:
        """Hybrid search; ``mode`` ``"vector"`` or ``"text"`` uses one half only."""
        cfg = self.settings.query
        if not isinstance(query, str) or not query.strip():
            raise ValueError("the search query is empty")
        limit = cfg.max_results if max_results is None else int(max_results)
        if limit < 1:
            raise ValueError(f"max_results must be 1 or more, not {max_results}")
        threshold = cfg.min_score if min_score is None else float(min_score)
        if not cfg.hybrid.enabled and mode == "hybrid":
            mode = "vector"
        self._refresh()
        pool = limit * cfg.hybrid.candidate_multiplier
        for _ in range(WIDEN_STEPS + 1):
            merged, used_vector, used_text, full = candidates.gather(
                self.store, self.embedders, self.vectors, cfg, self._executor, query, pool,
                mode)
            # minScore judges relevance; decay then reorders what is relevant by age
            ranked = search.select(merged, threshold, len(merged))
            rows = self.store.get_chunks(s.chunk_id for s in ranked)
            if cfg.temporal_decay.enabled:
                ranked = recency.decay(ranked, partial(_path, rows), self.today(),
                                       cfg.temporal_decay.half_life_days)
            chosen, repeats = search.distinct(ranked, partial(_place, rows),
                                              len(ranked) if cfg.mmr.enabled else limit)
            if cfg.mmr.enabled and used_vector:
                vectors = candidates.chunk_vectors(self.store, [s.chunk_id for s in chosen])
                chosen = diversity.mmr(chosen, vectors, cfg.mmr.lambda_, limit)
            chosen = chosen[:limit]
            # Repeats of one place (pieces of one long line) crowded the pool out.
            if len(chosen) >= limit or not repeats or not full:
                break
            pool *= 4
        results = search.hits(chosen, rows, query, self.superseded.marker())
        embedder = self.embedders.active
        kind = "hybrid" if used_vector and used_text else "vector" if used_vector else \
            "keyword" if used_text else "none"
        return {"results": results, "provider": embedder.provider if embedder else None,
                "model": embedder.model if embedder else None,
                "fallback": self.embedders.fallback_info, "mode": kind}

    # --- status -----------------------------------------------------------------------------

    def check(self) -> Iterator[tuple[bool, str, str]]:
        """``clawd doctor``'s lines: (ok, what, detail) for the embedder (it loads and
        embeds) and the index (SQLite's integrity check)."""
        try:
            embedder = self.embedders.get()
            if embedder is None:
                yield False, "embedder", self.embedders.error or "no embedder"
            else:
                dims = len(embedder.embed_query("clawd doctor"))
                yield True, "embedder", (f"{embedder.provider}/{embedder.model} loads "
                                         f"({dims} dimensions)")
            verdict = self.store.integrity()
            status = self.status()
            yield verdict == "ok", "memory index", (
                f"{status['path']}: {status['files']} files, {status['chunks']} chunks, "
                f"integrity {verdict}")
        except Exception as exc:  # noqa: BLE001 - a broken index is a failed check
            where = self._store.location if self._store is not None else self.path
            yield False, "memory index", f"{where}: {exc}"

    def status(self) -> dict[str, Any]:
        """Counts, the embedder, the vector and keyword halves, whether the index is behind
        the files, the last sync and the files it skips."""
        with self._lock:
            counts = self.store.counts()
            stored = self.store.get_meta("embedding")
            jobs, awaited = self.store.batch_counts()
            last_sync = self.last_sync or _json_meta(self.store.get_meta(LAST_SYNC_META))
            skipped = skipped_files(self.store)
        embedding = json.loads(stored) if stored else {}
        active = self.embedders.active
        vector = self.settings.store.vector
        return {
            "agentId": self.agent_id, "path": self.store.location,
            "workspace": str(self.workspace),
            "files": counts["files"], "chunks": counts["chunks"],
            "embeddedChunks": counts["embedded"], "cacheEntries": counts["cache"],
            "pendingBatches": jobs, "pendingEmbeddings": awaited,
            "fullyEmbedded": counts["embedded"] == counts["chunks"],
            "provider": active.provider if active else embedding.get("provider")
            or self.embedders.primary_name,
            "model": active.model if active else embedding.get("model"),
            "fallback": self.embedders.fallback_info, "embeddingError": self.embedders.error,
            "vector": {"enabled": vector.enabled, "available": self.store.vec_available,
                       "mode": self.store.vector_mode if vector.enabled else "off",
                       "extension": self.store.vec_version, "dims": self.store.dims or None},
            "fts": {"available": self.store.fts_available},
            # before this process has synced, "dirty" is whether a file changed since the
            # last sync (by size and time), not merely that nobody has looked yet
            "dirty": self.dirty if self.synced else not unchanged(self._target()),
            "syncOnSearch": self.settings.sync.on_search,
            "watching": self._watcher is not None,
            "sources": list(self.settings.sources), "lastSync": last_sync,
            "skippedFiles": [{"path": key, "reason": reason}
                             for key, (reason, _) in sorted(skipped.items())],
        }


def _json_meta(value: str | None) -> dict[str, Any] | None:
    """A meta value holding a JSON object; None if it holds none."""
    try:
        data = json.loads(value) if value else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _place(rows: Mapping[int, Any], chunk_id: int) -> tuple[str, int, int] | None:
    """Where a chunk is: (path, first line, last line); None if it vanished."""
    row = rows.get(chunk_id)
    return (row.path, row.start_line, row.end_line) if row is not None else None


def _path(rows: Mapping[int, Any], chunk_id: int) -> str | None:
    row = rows.get(chunk_id)
    return row.path if row is not None else None


def open_index(agent_id: str, workspace: Path, settings: MemorySearch, state_dir: Path, *,
               sources: MemorySources, files: WorkspaceFiles,
               embedder: Embedder | None = None, fallback: Embedder | None = None,
               env: Mapping[str, str] | None = None,
               openai_base_url: str | None = None,
               today: Callable[[], date] = date.today,
               open_store: Callable[[], IndexStore] | None = None) -> MemoryIndex:
    """The agent's memory index (created on first use). ``embedder``/``fallback`` replace
    the configured providers (tests, benchmarks); ``env`` replaces ``os.environ`` for keys;
    ``openai_base_url`` (``models.providers.openai.baseUrl``) serves remote embeddings when
    ``remote.baseUrl`` is not set; ``today`` is the clock temporal decay counts ages by;
    ``sources`` and ``files``: the notes (and transcripts) and the workspace files as the
    agent's store keeps them (``AgentStorage.memory_sources`` and ``files``); ``open_store``:
    the ``IndexStore`` the rows are kept in (a database's) instead of the SQLite file
    ``store_path`` names."""
    return MemoryIndex(agent_id, workspace, settings, state_dir, sources=sources, files=files,
                       embedder=embedder, fallback=fallback, env=env,
                       openai_base_url=openai_base_url, today=today, open_store=open_store)
