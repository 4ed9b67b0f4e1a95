"""The memory index of one agent as rows of the database: ``PgIndexStore``.

It is the hosted ``memory.index_store.IndexStore``: the same sync, chunker, embedder and
hybrid merge run on it as on the SQLite file, and every host and worker shares one index and
one embedding cache (``memory_cache.py``) instead of building its own. ``PgIndexStore``
writes and reads the chunks and files; it holds ``keywords`` (``memory_keywords.py``) and
``cache_rows`` (``memory_cache.py``) and hands their methods on.

- ``memory_chunks``: one row per chunk, with its FTS5 tokens (``memory.tokens``) as a
  ``tsvector`` (``terms``, GIN-indexed; the heading's tokens first, then the text's, one
  position apart so no phrase spans both, as FTS5's two columns), its token count
  (``length``), its line tokens, its vectors as float32 bytes (what the search scores
  with) and as a pgvector ``vec`` (what finds the nearest).
- ``memory_terms``: how many of the agent's chunks hold each token, kept up to date by
  every commit (what FTS5's vocabulary table answers; counting through the GIN index took
  50 ms a query at 100k chunks).
- Keyword search (``memory_keywords.py``): the chunks matching the query's phrases are
  found through ``terms`` and ranked by FTS5's BM25, with the agent's chunk count and mean
  length (kept per generation of the index), each token's chunk count from
  ``memory_terms`` and each phrase's counted through ``terms``.
- Vector search: an HNSW index per vector size (``vec::vector(N)``, cosine), made when an
  index first holds vectors of that size. A walk gathers ``EF_SEARCH`` candidates (or twice
  what is asked), every agent's; this agent's are kept. When that leaves fewer than asked of
  an agent that has more (an agent with a small share of a shared table), the agent's
  vectors are scanned exactly instead. Vectors of more than ``HNSW_MAX_DIMS`` (pgvector's
  limit) are always scanned exactly.
- One sync of an agent's index at a time over every host (``syncing``: an advisory lock
  held for the whole sync), so a host never embeds what another is embedding; and a
  sync's commit is one transaction holding a transaction-scoped advisory lock as well.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from clawd.memory import tokens
from clawd.memory.embedding_tables import BatchJobRow
from clawd.memory.index_store import ChunkRow, SearchFailed
from clawd.memory.tokens import ChunkTokens
from clawd.storage.postgres.memory_cache import CacheRows
from clawd.storage.postgres.memory_keywords import KeywordRows, terms_of

HNSW_MAX_DIMS = 2000  # pgvector indexes vectors of up to this many dimensions
EF_SEARCH = 200  # the least candidates an HNSW walk gathers (pgvector's default is 40)
EF_SEARCH_MAX = 1000  # pgvector's bound on hnsw.ef_search
SYNC_POLL_SECONDS = 0.2  # how often a sync waiting for another host's asks again
BULK = 1000  # chunks written by one transaction past which the table's statistics are renewed
_COLUMNS = "id, path, source, start_line, end_line, heading, text"


def _vector(blob: bytes) -> str:
    """A float32 vector as pgvector's text form (exact: each float32 is written in full)."""
    import numpy as np

    return "[" + ",".join(map(repr, np.frombuffer(blob, dtype=np.float32).tolist())) + "]"


class PgIndexStore:
    """One agent's memory index in the database (an ``IndexStore``)."""

    fts_available = True
    vec_available = True
    knn_in_process = False

    def __init__(self, db: Any, agent_id: str):
        self.db, self.agent_id = db, agent_id
        self.location = f"{db.location} (agent {agent_id})"
        self.vec_version: str | None = db.vector_version
        self.lock = threading.RLock()
        self._tx = threading.local()  # the connection of this thread's open transaction
        self._lock_key, self._sync_key = (int.from_bytes(hashlib.sha256(
            f"{what}:{agent_id}".encode()).digest()[:8], "big", signed=True)
            for what in ("memory", "memory-sync"))
        self.keywords = KeywordRows(self._conn, agent_id, self.generation)
        self.cache_rows = CacheRows(self._conn, agent_id)

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        held = getattr(self._tx, "conn", None)
        if held is not None:
            yield held
            return
        with self.db.connection() as conn:
            yield conn

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._conn() as conn:
            return list(conn.execute(sql, params).fetchall())

    @property
    def vector_mode(self) -> str:
        dims = self.dims
        return "hnsw" if not dims or dims <= HNSW_MAX_DIMS else "exact"

    # --- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM memory_meta WHERE agent_id = %s AND key = %s",
                          (self.agent_id, key))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._conn() as conn:
            conn.execute("INSERT INTO memory_meta (agent_id, key, value) VALUES (%s, %s, %s) "
                         "ON CONFLICT (agent_id, key) DO UPDATE SET value = EXCLUDED.value",
                         (self.agent_id, key, value))

    @property
    def dims(self) -> int:
        value = self.get_meta("dims")
        return int(value) if value else 0

    def generation(self) -> str:
        return self.get_meta("generation") or "0"

    def bump_generation(self) -> None:
        """First thing in a sync's transaction: what this process keeps per generation
        (term counts) is out of date in every process."""
        self.set_meta("generation", str(int(self.generation()) + 1))

    # --- writes -----------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if getattr(self._tx, "conn", None) is not None:
            yield
            return
        self._tx.inserted, self._tx.docs = 0, Counter()
        with self.db.connection() as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                self._tx.conn = conn
                try:
                    yield
                    self._count_terms(conn, self._tx.docs)
                finally:
                    self._tx.conn = None
            if self._tx.inserted >= BULK:
                # the planner's row counts and the GIN index's pending entries, brought up
                # to date now rather than at autovacuum's next visit
                conn.execute("ANALYZE memory_chunks")
                conn.execute("SELECT gin_clean_pending_list('memory_chunks_terms'::regclass)")

    def _count_terms(self, conn: Any, docs: Counter[str]) -> None:
        """Within the commit: add what the transaction changed to ``memory_terms``."""
        changed = {term: n for term, n in docs.items() if n}
        if not changed:
            return
        terms, counts = list(changed), list(changed.values())
        conn.execute("INSERT INTO memory_terms (agent_id, term, docs) SELECT %s, t, n FROM "
                     "unnest(%s::text[], %s::integer[]) AS c(t, n) ON CONFLICT (agent_id, term) "
                     "DO UPDATE SET docs = memory_terms.docs + EXCLUDED.docs",
                     (self.agent_id, terms, counts))
        conn.execute("DELETE FROM memory_terms WHERE agent_id = %s AND term = ANY(%s) AND "
                     "docs <= 0", (self.agent_id, terms))

    def reset(self, dims: int) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM memory_chunks WHERE agent_id = %s", (self.agent_id,))
            conn.execute("DELETE FROM memory_files WHERE agent_id = %s", (self.agent_id,))
            conn.execute("DELETE FROM memory_terms WHERE agent_id = %s", (self.agent_id,))
        self._tx.docs = Counter()
        self.set_dims(dims, force=True)

    def set_dims(self, dims: int, force: bool = False) -> None:
        if force or (dims and dims != self.dims):
            self.set_meta("dims", str(dims))
            if 0 < dims <= HNSW_MAX_DIMS:
                with self._conn() as conn:
                    conn.execute(
                        f"CREATE INDEX IF NOT EXISTS memory_chunks_hnsw_{int(dims)} ON "
                        f"memory_chunks USING hnsw ((vec::vector({int(dims)})) "
                        f"vector_cosine_ops) WHERE dims = {int(dims)}")

    def delete_file(self, path: str) -> None:
        with self._conn() as conn:
            gone = conn.execute("DELETE FROM memory_chunks WHERE agent_id = %s AND path = %s "
                                "RETURNING tsvector_to_array(terms)",
                                (self.agent_id, path)).fetchall()
            conn.execute("DELETE FROM memory_files WHERE agent_id = %s AND path = %s",
                         (self.agent_id, path))
        self._tx.docs.subtract(term for (held,) in gone for term in held)

    def insert_chunk(self, path: str, source: str, start_line: int, end_line: int,
                     heading: str, text: str, text_hash: str, embedding: bytes | None,
                     segments: bytes | None) -> int:
        terms, length, distinct = terms_of(heading, text)
        self._tx.inserted += 1
        self._tx.docs.update(distinct)
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO memory_chunks (agent_id, path, source, start_line, end_line, "
                "heading, text, hash, line_tokens, terms, length, embedding, segments, dims, "
                "vec) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s, %s, %s, "
                "%s, %s::vector) RETURNING id",
                (self.agent_id, path, source, start_line, end_line, heading, text, text_hash,
                 tokens.line_tokens(heading, text), terms, length, embedding, segments,
                 len(embedding) // 4 if embedding else None,
                 _vector(embedding) if embedding else None)).fetchone()
        return int(row[0])

    def set_embedding(self, chunk_id: int, embedding: bytes, segments: bytes | None) -> None:
        with self._conn() as conn:
            conn.execute("UPDATE memory_chunks SET embedding = %s, segments = %s, dims = %s, "
                         "vec = %s::vector WHERE id = %s AND agent_id = %s",
                         (embedding, segments, len(embedding) // 4, _vector(embedding),
                          chunk_id, self.agent_id))

    def upsert_file(self, path: str, source: str, file_hash: str, mtime: float,
                    size: int) -> None:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO memory_files (agent_id, path, source, hash, mtime, size, "
                "indexed_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id, path) "
                "DO UPDATE SET source = EXCLUDED.source, hash = EXCLUDED.hash, mtime = "
                "EXCLUDED.mtime, size = EXCLUDED.size, indexed_at = EXCLUDED.indexed_at",
                (self.agent_id, path, source, file_hash, mtime, size, time.time()))

    def fill_line_tokens(self, limit: int | None = None) -> int:
        return 0  # every chunk is written with its line tokens

    # --- reads ------------------------------------------------------------------------------

    def files(self) -> dict[str, tuple[str, str, float, int]]:
        return {path: (source, digest, mtime, size) for path, source, digest, mtime, size in
                self._rows("SELECT path, source, hash, mtime, size FROM memory_files "
                           "WHERE agent_id = %s", (self.agent_id,))}

    def counts(self) -> dict[str, int]:
        row = self._rows(
            "SELECT (SELECT count(*) FROM memory_files WHERE agent_id = %s), "
            "(SELECT count(*) FROM memory_chunks WHERE agent_id = %s), "
            "(SELECT count(*) FROM memory_chunks WHERE agent_id = %s AND embedding IS NOT "
            "NULL), (SELECT count(*) FROM memory_embedding_cache)", (self.agent_id,) * 3)[0]
        return dict(zip(("files", "chunks", "embedded", "cache"), map(int, row)))

    def chunks_without_embedding(self) -> list[tuple[int, str, str, str]]:
        return [tuple(row) for row in self._rows(
            "SELECT id, path, heading, text FROM memory_chunks WHERE agent_id = %s AND "
            "embedding IS NULL ORDER BY id", (self.agent_id,))]

    def get_chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return {row[0]: ChunkRow(*row) for row in self._rows(
            f"SELECT {_COLUMNS} FROM memory_chunks WHERE agent_id = %s AND id = ANY(%s)",
            (self.agent_id, list(ids)))}

    def chunks_at(self, path: str) -> list[ChunkRow]:
        return [ChunkRow(*row) for row in self._rows(
            f"SELECT {_COLUMNS} FROM memory_chunks WHERE agent_id = %s AND path = %s "
            "ORDER BY start_line, id", (self.agent_id, path))]

    def get_vectors(self, ids: Iterable[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
        return {chunk_id: (bytes(blob) if blob is not None else None,
                           bytes(parts) if parts is not None else None)
                for chunk_id, blob, parts in self._rows(
                    "SELECT id, embedding, segments FROM memory_chunks WHERE agent_id = %s "
                    "AND id = ANY(%s)", (self.agent_id, list(ids)))}

    def keyword_chunks(self, ids: Iterable[int]) -> dict[int, ChunkTokens]:
        return {int(chunk_id): tokens.keyword_chunk(heading, text, stored)
                for chunk_id, heading, text, stored in self._rows(
                    "SELECT id, heading, text, line_tokens FROM memory_chunks WHERE "
                    "agent_id = %s AND id = ANY(%s)", (self.agent_id, list(ids)))}

    # --- the vector stage -------------------------------------------------------------------

    def vec_knn(self, query: bytes, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the ``k`` nearest chunk vectors: the HNSW
        index's nearest of every agent, this agent's kept; when that leaves fewer than
        ``k`` of an agent that has more, an exact scan of the agent's vectors."""
        dims = len(query) // 4
        distance = f"vec::vector({dims}) <=> %s::vector({dims})"
        vector = _vector(query)
        try:
            with self._conn() as conn, conn.transaction():
                if dims <= HNSW_MAX_DIMS:
                    ef = min(EF_SEARCH_MAX, max(EF_SEARCH, 2 * k))
                    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
                    rows = conn.execute(
                        f"SELECT id, distance FROM (SELECT id, agent_id, {distance} AS distance "
                        f"FROM memory_chunks WHERE dims = {dims} ORDER BY distance LIMIT {ef}) "
                        "nearest WHERE agent_id = %s ORDER BY distance LIMIT %s",
                        (vector, self.agent_id, int(k))).fetchall()
                    if len(rows) < k and len(rows) < self._embedded(conn, dims):
                        rows = self._exact(conn, distance, dims, vector, k)
                else:
                    rows = self._exact(conn, distance, dims, vector, k)
        except Exception as exc:  # noqa: BLE001 - the search goes on keyword-only
            raise SearchFailed(f"vector search in the database failed: {exc}") from exc
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def _exact(self, conn: Any, distance: str, dims: int, vector: str, k: int) -> list[Any]:
        conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
        return list(conn.execute(
            f"SELECT id, {distance} AS distance FROM memory_chunks WHERE agent_id = %s AND "
            f"dims = {dims} ORDER BY distance LIMIT %s",
            (vector, self.agent_id, int(k))).fetchall())

    def _embedded(self, conn: Any, dims: int) -> int:
        return int(conn.execute("SELECT count(*) FROM memory_chunks WHERE agent_id = %s AND "
                                "dims = %s", (self.agent_id, dims)).fetchone()[0])

    # --- upkeep -----------------------------------------------------------------------------

    @contextmanager
    def syncing(self, cancel: threading.Event) -> Iterator[None]:
        """A session-level advisory lock on the agent's index, on a connection held for the
        sync (the server lets go if this process dies): a host that wants to sync while
        another does waits, then finds the other's work committed and embeds nothing
        twice."""
        from clawd.memory.target import SyncCancelled

        with self.db.connection() as conn:
            while not conn.execute("SELECT pg_try_advisory_lock(%s)",
                                   (self._sync_key,)).fetchone()[0]:
                if cancel.wait(SYNC_POLL_SECONDS):
                    raise SyncCancelled("memory sync cancelled: the index was closed")
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self._sync_key,))

    def integrity(self) -> str:
        rows = self._rows("SELECT count(*) FROM memory_chunks WHERE agent_id = %s AND "
                          "(embedding IS NULL) <> (vec IS NULL)", (self.agent_id,))
        torn = int(rows[0][0])
        return "ok" if not torn else f"{torn} chunks whose two vector columns disagree"

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """After forget: the index's tables are vacuumed, so the space of deleted rows is
        reused (PostgreSQL keeps a deleted row's bytes until then)."""
        yield
        with self.db.connection() as conn:
            conn.execute("VACUUM memory_chunks, memory_embedding_cache")

    def close(self) -> None:
        """Nothing to close: the connections are the database's pool."""

    # --- the parts' methods -----------------------------------------------------------------

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        return self.keywords.fts_search(match, k, newest)

    def fts_tokens(self, text: str) -> list[str]:
        return tokens.fts_tokens(text)

    def term_stats(self, wanted: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.keywords.term_stats(wanted)

    def cache_get(self, provider: str, model: str, fingerprint: str,
                  hashes: Sequence[str]) -> dict[str, bytes]:
        return self.cache_rows.cache_get(provider, model, fingerprint, hashes)

    def cache_put(self, provider: str, model: str, fingerprint: str,
                  items: Iterable[tuple[str, int, bytes]], max_entries: int) -> None:
        self.cache_rows.cache_put(provider, model, fingerprint, items, max_entries)

    def cache_import(self, rows: Sequence[tuple[str, str, str, str, int, bytes]]) -> int:
        return self.cache_rows.cache_import(rows)

    def cache_delete(self, hashes: Sequence[str]) -> int:
        return self.cache_rows.cache_delete(hashes)

    def add_batch_job(self, provider: str, model: str, fingerprint: str, job: str,
                      hashes: Sequence[str], attempt: int, submitted_at: float) -> None:
        self.cache_rows.add_batch_job(provider, model, fingerprint, job, hashes, attempt,
                                      submitted_at)

    def batch_jobs(self, provider: str, model: str, fingerprint: str) -> list[BatchJobRow]:
        return self.cache_rows.batch_jobs(provider, model, fingerprint)

    def delete_batch_job(self, provider: str, job: str) -> None:
        self.cache_rows.delete_batch_job(provider, job)

    def drop_batch_jobs_except(self, provider: str, model: str, fingerprint: str) -> int:
        return self.cache_rows.drop_batch_jobs_except(provider, model, fingerprint)

    def batch_counts(self) -> tuple[int, int]:
        return self.cache_rows.batch_counts()
