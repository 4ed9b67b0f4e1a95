"""The memory index of one agent as rows of the database: ``PgIndexStore``.

It is the hosted ``memory.index_store.IndexStore``: the same sync, chunker, embedder and
hybrid merge run on it as on the SQLite file, and every host and worker shares one index and
one embedding cache (``memory_cache.py``) instead of building its own.

- ``memory_chunks``: one row per chunk, with its FTS5 tokens (``memory.tokens``) as a
  ``tsvector`` (``terms``, GIN-indexed; the heading's tokens first, then the text's, one
  position apart so no phrase spans both, as FTS5's two columns), its token count
  (``length``), its line tokens, its vectors as float32 bytes (what the search scores
  with) and as a pgvector ``vec`` (what finds the nearest).
- Keyword search: the chunks matching the query's phrases are found through ``terms``; their
  positions of the query's tokens come back and are ranked by FTS5's BM25 (``memory.bm25``),
  with the agent's chunk count, mean length and each phrase's chunk count, kept per
  generation of the index.
- Vector search: an HNSW index per vector size (``vec::vector(N)``, cosine), made when an
  index first holds vectors of that size; ``hnsw.ef_search`` is raised to twice what is
  asked. HNSW is approximate and filters by agent after it walks the graph, so when it finds
  fewer chunks than asked of an agent that has more, the agent's vectors are scanned exactly.
  Vectors of more than ``HNSW_MAX_DIMS`` (pgvector's limit) are always scanned exactly.
- A sync's commit is one transaction holding a transaction-scoped advisory lock on the
  agent's index, so two hosts syncing at once commit one after the other.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from clawd.memory import bm25, tokens
from clawd.memory.index_store import ChunkRow, SearchFailed
from clawd.memory.keywords import fts_text
from clawd.memory.tokens import ChunkTokens
from clawd.storage.postgres.memory_cache import CacheRows

HNSW_MAX_DIMS = 2000  # pgvector indexes vectors of up to this many dimensions
EF_SEARCH_MAX = 1000  # pgvector's bound on hnsw.ef_search
MAX_POSITION = 16383  # a tsvector position's bound
MAX_POSITIONS = 255  # positions a tsvector keeps per lexeme (PostgreSQL keeps 256)
_COLUMNS = "id, path, source, start_line, end_line, heading, text"


def _lexeme(token: str) -> str:
    """A token as a quoted ``tsvector``/``tsquery`` lexeme (taken as is: no parser)."""
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def terms_of(heading: str, text: str) -> tuple[str, int]:
    """(the ``tsvector`` literal of a chunk's FTS tokens with their positions, how many
    tokens it has), as FTS5 indexes its heading and text columns."""
    head = tokens.fts_tokens(fts_text(heading))
    body = tokens.fts_tokens(fts_text(text))
    positions: dict[str, list[int]] = {}
    for number, token in enumerate(head, start=1):
        positions.setdefault(token, []).append(number)
    for number, token in enumerate(body, start=len(head) + 2):  # one apart: no phrase spans
        positions.setdefault(token, []).append(min(number, MAX_POSITION))
    literal = " ".join(f"{_lexeme(token)}:{','.join(map(str, sorted(set(at))[:MAX_POSITIONS]))}"
                       for token, at in positions.items())
    return literal, len(head) + len(body)


def _vector(blob: bytes) -> str:
    """A float32 vector as pgvector's text form (exact: each float32 is written in full)."""
    import numpy as np

    return "[" + ",".join(map(repr, np.frombuffer(blob, dtype=np.float32).tolist())) + "]"


class PgIndexStore(CacheRows):
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
        self._lock_key = int.from_bytes(hashlib.sha256(
            f"memory:{agent_id}".encode()).digest()[:8], "big", signed=True)
        self._stats: tuple[str, int, float] | None = None  # (generation, chunks, mean length)
        self._docs: tuple[str, dict[str, int]] = ("", {})  # (generation, phrase -> chunks)

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
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            self._tx.conn = conn
            try:
                yield
            finally:
                self._tx.conn = None

    def reset(self, dims: int) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM memory_chunks WHERE agent_id = %s", (self.agent_id,))
            conn.execute("DELETE FROM memory_files WHERE agent_id = %s", (self.agent_id,))
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
            conn.execute("DELETE FROM memory_chunks WHERE agent_id = %s AND path = %s",
                         (self.agent_id, path))
            conn.execute("DELETE FROM memory_files WHERE agent_id = %s AND path = %s",
                         (self.agent_id, path))

    def insert_chunk(self, path: str, source: str, start_line: int, end_line: int,
                     heading: str, text: str, text_hash: str, embedding: bytes | None,
                     segments: bytes | None) -> int:
        terms, length = terms_of(heading, text)
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
        import time

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
        """(chunk id, cosine similarity) of the ``k`` nearest chunk vectors: by the HNSW
        index, or by an exact scan when the index found fewer than the agent has."""
        dims = len(query) // 4
        cast = f"vec::vector({dims}) <=> %s::vector({dims})"
        sql = (f"SELECT id, {cast} AS distance FROM memory_chunks WHERE agent_id = %s AND "
               f"dims = {dims} ORDER BY distance LIMIT %s")
        params = (_vector(query), self.agent_id, int(k))
        try:
            with self._conn() as conn, conn.transaction():
                if dims <= HNSW_MAX_DIMS:
                    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)",
                                 (str(min(EF_SEARCH_MAX, max(40, 2 * k))),))
                    rows = conn.execute(sql, params).fetchall()
                    if len(rows) >= k or len(rows) >= self._embedded(conn, dims):
                        return [(int(i), 1.0 - float(d)) for i, d in rows]
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                rows = conn.execute(sql, params).fetchall()
        except Exception as exc:  # noqa: BLE001 - the search goes on keyword-only
            raise SearchFailed(f"vector search in the database failed: {exc}") from exc
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def _embedded(self, conn: Any, dims: int) -> int:
        return int(conn.execute("SELECT count(*) FROM memory_chunks WHERE agent_id = %s AND "
                                "dims = %s", (self.agent_id, dims)).fetchone()[0])

    # --- the keyword stage ------------------------------------------------------------------

    def fts_tokens(self, text: str) -> list[str]:
        return tokens.fts_tokens(text)

    def term_stats(self, wanted: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, chunks holding each token), kept per generation."""
        total, _ = self._totals()
        counts = self._phrase_counts([(t,) for t in dict.fromkeys(wanted)])
        return total, {t: counts[(t,)] for t in dict.fromkeys(wanted) if counts[(t,)]}

    def _totals(self) -> tuple[int, float]:
        """(chunks, their mean length in tokens) of this generation."""
        generation = self.generation()
        if self._stats is None or self._stats[0] != generation:
            count, length = self._rows("SELECT count(*), coalesce(sum(length), 0) FROM "
                                       "memory_chunks WHERE agent_id = %s", (self.agent_id,))[0]
            self._stats = (generation, int(count), int(length) / count if count else 0.0)
        return self._stats[1], self._stats[2]

    def _phrase_counts(self, phrases: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
        """Chunks holding each phrase (a tuple of tokens), kept per generation."""
        generation = self.generation()
        if self._docs[0] != generation:
            self._docs = (generation, {})
        known = self._docs[1]
        todo = [p for p in dict.fromkeys(phrases) if " ".join(p) not in known]
        if todo:
            queries = [" <-> ".join(map(_lexeme, p)) for p in todo]
            for query, count in self._rows(
                    "SELECT q, (SELECT count(*) FROM memory_chunks WHERE agent_id = %s AND "
                    "terms @@ q::tsquery) FROM unnest(%s::text[]) q",
                    (self.agent_id, queries)):
                known[" ".join(todo[queries.index(query)])] = int(count)
        return {p: known[" ".join(p)] for p in phrases}

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the best ``k`` chunks matching ``match`` (an FTS5 query of
        ``keywords.plan``), ranked as FTS5 ranks them; with ``newest``, only the newest that
        many matches are ranked."""
        phrases = [p for p in (tuple(self.fts_tokens(text)) for text in bm25.phrases(match))
                   if p]
        if not phrases:
            return []
        phrases = list(dict.fromkeys(phrases))
        query = " | ".join(f"({' <-> '.join(map(_lexeme, p))})" for p in phrases)
        wanted = sorted({t for p in phrases for t in p})
        limit = f"ORDER BY id DESC LIMIT {int(newest)}" if newest is not None else ""
        try:
            total, average = self._totals()
            idfs = [bm25.idf(n, total) for n in self._phrase_counts(phrases).values()]
            rows = self._rows(
                "SELECT c.id, c.length, u.lexeme, u.positions FROM (SELECT id, length, terms "
                f"FROM memory_chunks WHERE agent_id = %s AND terms @@ %s::tsquery {limit}) c "
                "CROSS JOIN LATERAL unnest(ts_filter(setweight(setweight(c.terms, 'D'), 'A', "
                "%s::text[]), '{a}')) u", (self.agent_id, query, wanted))
        except Exception as exc:  # noqa: BLE001 - the search goes on without keywords
            raise SearchFailed(f"keyword search in the database failed: {exc}") from exc
        chunks: dict[int, tuple[int, dict[str, set[int]]]] = {}
        for chunk_id, length, lexeme, positions in rows:
            chunks.setdefault(int(chunk_id), (int(length), {}))[1][lexeme] = set(positions)
        scored = [(chunk_id, bm25.score([bm25.occurrences(p, held) for p in phrases], idfs,
                                        length, average))
                  for chunk_id, (length, held) in chunks.items()]
        scored = [item for item in scored if item[1] > 0]  # as FTS5: a match scores above 0
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:k]

    # --- upkeep -----------------------------------------------------------------------------

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
