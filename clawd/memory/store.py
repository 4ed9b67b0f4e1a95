"""The per-agent SQLite file behind memory search: one open index and its rows.

Tables: ``meta`` (key/value: the index signature, vector dimensions, the generation),
``files`` (one row per indexed file with its content hash), ``chunks`` (text, 1-based line
range, heading path, the chunk vector and the vectors of its segments as float32 blobs, its
FTS tokens line by line), ``chunks_fts`` and ``chunks_vec`` (keyword and vector search over
the chunks), the embedding cache and pending batch jobs and ``vector_log``. The schema and
its migrations are in ``schema.py``.

``Store`` writes the chunks and files and reads them back; it holds a part for each of the
rest and hands their methods on: ``keywords`` (``keyword_tables.py``: FTS5 search, term
counts, stored line tokens), ``vector_log`` (``vector_log.py``: the vector changes of each
generation, the reads of the in-process matrix) and ``embedding_tables``
(``embedding_tables.py``: the embedding cache and pending batch jobs). Each part is given
the writer connection and what else it uses.

Writes go through the one writer connection, in a sync's transaction; searches read through
a read-only connection per thread (``readers.py``), so a sync committing never holds up a
search. If FTS5 or sqlite-vec is missing the store still opens: ``fts_available`` /
``vec_available`` say what works and the search falls back accordingly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from clawd.memory import schema
from clawd.memory.embedding_tables import BatchJobRow, EmbeddingTables
from clawd.memory.index_store import ChunkRow
from clawd.memory.keyword_tables import KeywordTables
from clawd.memory.keywords import fts_text
from clawd.memory.readers import Readers
from clawd.memory.schema import batched, load_vec_extension
from clawd.memory.tokens import ChunkTokens
from clawd.memory.vector_log import VectorChanges, VectorLog

log = logging.getLogger(__name__)


class Store:
    """One open index file (an ``IndexStore``). Writes are serialised by a lock: the
    watcher thread shares it."""

    knn_in_process = True  # the vector stage scans the in-process matrix (``matrix.py``)

    def __init__(self, path: Path, *, vector_enabled: bool = True,
                 extension_path: str | None = None):
        self.path = path
        self.location = str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.conn = apsw.Connection(str(path))
        self.conn.set_busy_timeout(5000)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # Memory-mapped reads roughly halve vec0's KNN scan time on large indexes.
        self.conn.execute("PRAGMA mmap_size=1073741824")
        self.vec_version = load_vec_extension(self.conn, extension_path) if vector_enabled \
            else None
        with self.lock:
            schema.migrate(self.conn, path)
        self.fts_available = schema.init_fts(self.conn)
        self.vec_available = self.vec_version is not None
        self.readers = Readers(path, vec=self.vec_available, fts=self.fts_available,
                               extension_path=extension_path)
        self.keywords = KeywordTables(self.conn, self.readers,
                                      fts_available=self.fts_available,
                                      generation=self.generation)
        self.vector_log = VectorLog(self.conn, self.readers, self.set_meta, self.generation)
        self.embedding_tables = EmbeddingTables(self.conn, self.lock)
        if self.vec_available and self.dims:
            schema.ensure_vec_table(self.conn, self.dims)

    # --- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.lock:
            self.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) "
                              "DO UPDATE SET value = excluded.value", (key, value))

    @property
    def dims(self) -> int:
        value = self.get_meta("dims")
        return int(value) if value else 0

    # --- writes (callers wrap these in ``transaction()``) -----------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            with self.conn:
                yield
        finally:
            self.vector_log.end_transaction()

    def bump_generation(self) -> None:
        """First thing in a sync's transaction (``VectorLog.bump_generation``)."""
        self.vector_log.bump_generation()

    def reset(self, dims: int) -> None:
        """Drop every chunk and vector; the vector table is recreated for ``dims``."""
        self.conn.execute("DELETE FROM chunks; DELETE FROM files;")
        self.vector_log.restart()  # every copy of the vectors is out of date
        if self.fts_available:
            self.conn.execute("DELETE FROM chunks_fts")
        if self.vec_available:
            self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
        self.set_meta("dims", str(dims))
        if self.vec_available and dims:
            schema.ensure_vec_table(self.conn, dims)

    def set_dims(self, dims: int) -> None:
        if dims and dims != self.dims:
            self.set_meta("dims", str(dims))
            if self.vec_available:
                self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
                schema.ensure_vec_table(self.conn, dims)

    def delete_file(self, path: str) -> None:
        ids = [row[0] for row in self.conn.execute("SELECT id FROM chunks WHERE path = ?",
                                                   (path,))]
        self._delete_chunks(ids)
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def _delete_chunks(self, ids: Sequence[int]) -> None:
        for part, marks in batched(ids):
            self.conn.execute(f"DELETE FROM chunks WHERE id IN ({marks})", part)
            if self.fts_available:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", part)
            if self.vec_available and self.dims:
                self.conn.execute(f"DELETE FROM chunks_vec WHERE rowid IN ({marks})", part)
        self.vector_log.log(ids, added=False)

    def insert_chunk(self, path: str, source: str, start_line: int, end_line: int,
                     heading: str, text: str, text_hash: str, embedding: bytes | None,
                     segments: bytes | None) -> int:
        self.conn.execute(
            "INSERT INTO chunks(path, source, start_line, end_line, heading, text, hash, "
            "embedding, segments, line_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (path, source, start_line, end_line, heading, text, text_hash, embedding, segments,
             self.keywords.stored_line_tokens(heading, text)))
        chunk_id = self.conn.last_insert_rowid()
        if self.fts_available:
            self.conn.execute("INSERT INTO chunks_fts(rowid, heading, text) VALUES (?, ?, ?)",
                              (chunk_id, fts_text(heading), fts_text(text)))
        if embedding is not None:
            self._insert_vec(chunk_id, embedding)
            self.vector_log.log([chunk_id], added=True)
        return chunk_id

    def set_embedding(self, chunk_id: int, embedding: bytes, segments: bytes | None) -> None:
        self.conn.execute("UPDATE chunks SET embedding = ?, segments = ? WHERE id = ?",
                          (embedding, segments, chunk_id))
        if self.vec_available and self.dims:
            self.conn.execute("DELETE FROM chunks_vec WHERE rowid = ?", (chunk_id,))
        self._insert_vec(chunk_id, embedding)
        self.vector_log.log([chunk_id], added=True)

    def _insert_vec(self, chunk_id: int, embedding: bytes) -> None:
        if self.vec_available and self.dims:
            self.conn.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)",
                              (chunk_id, embedding))

    def upsert_file(self, path: str, source: str, file_hash: str, mtime: float,
                    size: int) -> None:
        self.conn.execute(
            "INSERT INTO files(path, source, hash, mtime, size, indexed_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET source = excluded.source,"
            " hash = excluded.hash, mtime = excluded.mtime, size = excluded.size, "
            "indexed_at = excluded.indexed_at", (path, source, file_hash, mtime, size, time.time()))

    # --- reads ------------------------------------------------------------------------------

    def files(self) -> dict[str, tuple[str, str, float, int]]:
        """path -> (source, hash, mtime, size)."""
        with self.lock:
            return {row[0]: (row[1], row[2], row[3], row[4]) for row in self.conn.execute(
                "SELECT path, source, hash, mtime, size FROM files")}

    def counts(self) -> dict[str, int]:
        with self.lock:
            def one(sql: str) -> int:
                return int(self.conn.execute(sql).fetchall()[0][0] or 0)
            return {"files": one("SELECT count(*) FROM files"),
                    "chunks": one("SELECT count(*) FROM chunks"),
                    "embedded": one("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL"),
                    "cache": one("SELECT count(*) FROM embedding_cache")}

    def chunks_without_embedding(self) -> list[tuple[int, str, str, str]]:
        """(id, path, heading, text) of chunks stored without a vector."""
        with self.lock:
            return list(self.conn.execute("SELECT id, path, heading, text FROM chunks "
                                          "WHERE embedding IS NULL ORDER BY id"))

    def get_chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        out: dict[int, ChunkRow] = {}
        for part, marks in batched(ids):
            for row in self.readers.read("SELECT id, path, source, start_line, end_line, "
                                         f"heading, text FROM chunks WHERE id IN ({marks})",
                                         part):
                out[row[0]] = ChunkRow(*row)
        return out

    def chunks_at(self, path: str) -> list[ChunkRow]:
        """The chunks of one file, in line order."""
        with self.lock:
            return [ChunkRow(*row) for row in self.conn.execute(
                "SELECT id, path, source, start_line, end_line, heading, text FROM chunks "
                "WHERE path = ? ORDER BY start_line, id", (path,))]

    def get_vectors(self, ids: Iterable[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
        """chunk id -> (chunk vector, segment vectors) as stored."""
        ids = list(ids)
        out: dict[int, tuple[bytes | None, bytes | None]] = {}
        for part, marks in batched(ids):
            for row in self.readers.read("SELECT id, embedding, segments FROM chunks "
                                         f"WHERE id IN ({marks})", part):
                out[row[0]] = (row[1], row[2])
        return out

    def generation(self) -> str:
        """Changes with every committed sync (``bump_generation``), in any process."""
        rows = self.readers.read("SELECT value FROM meta WHERE key = 'generation'")
        return str(rows[0][0]) if rows else "0"

    def all_vectors(self) -> list[tuple[int, bytes]]:
        with self.lock:
            return list(self.conn.execute(
                "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id"))

    def vec_knn(self, query: bytes, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the ``k`` nearest chunk vectors, by vec0 KNN."""
        rows = self.readers.read("SELECT rowid, distance FROM chunks_vec WHERE embedding "
                                 "MATCH ? AND k = ?", (query, int(k)))
        return [(int(rowid), 1.0 - float(distance)) for rowid, distance in rows]

    @property
    def vector_mode(self) -> str:
        return "vec0" if self.vec_available else "in-process"

    @contextmanager
    def syncing(self, cancel: threading.Event) -> Iterator[None]:
        """Nothing to claim: the file's write lock orders its writers' commits, and one
        process is the file's usual writer."""
        yield

    def integrity(self) -> str:
        """SQLite's quick check: "ok" or the first problem it found."""
        with self.lock:
            return str(self.conn.execute("PRAGMA quick_check").fetchall()[0][0])

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """``secure_delete`` on within, so deleted rows are overwritten on disk; then the
        FTS5 segments are merged (``optimize`` drops what deleted rows left there), the file
        rewritten (``VACUUM``: a page keeps the old copy of a row an update moved) and the
        write-ahead log truncated."""
        with self.lock:
            self.conn.execute("PRAGMA secure_delete = ON")
        try:
            yield
            with self.lock:
                if self.fts_available:
                    with self.transaction():
                        self.conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
                try:
                    self.conn.execute("VACUUM")
                    self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except apsw.Error as exc:  # a reader mid-query: the next checkpoint does it
                    log.warning("memory index: could not compact the index after forget (%s);"
                                " its file may keep traces of the removed text until the "
                                "next forget", exc)
        finally:
            with self.lock:
                self.conn.execute("PRAGMA secure_delete = OFF")

    def close(self) -> None:
        self.readers.close()
        with self.lock:
            self.conn.close()

    # --- the parts' methods -----------------------------------------------------------------

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        return self.keywords.fts_search(match, k, newest)

    def fts_tokens(self, text: str) -> list[str]:
        return self.keywords.fts_tokens(text)

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.keywords.term_stats(tokens)

    def keyword_chunks(self, ids: Iterable[int]) -> dict[int, ChunkTokens]:
        return self.keywords.keyword_chunks(ids)

    def fill_line_tokens(self, limit: int | None = None) -> int:
        return self.keywords.fill_line_tokens(limit)

    def chunk_texts(self, ids: Iterable[int]) -> Mapping[int, str]:
        return self.keywords.chunk_texts(ids)

    def vector_matrix(self, headroom: float = 0.0) -> tuple[str, Any, Any]:
        return self.vector_log.vector_matrix(headroom)

    def vector_changes(self, since: str) -> VectorChanges | None:
        return self.vector_log.vector_changes(since)

    def vectors_of(self, ids: Sequence[int]) -> tuple[Any, Any]:
        return self.vector_log.vectors_of(ids)

    def cache_get(self, provider: str, model: str, fingerprint: str,
                  hashes: Sequence[str]) -> dict[str, bytes]:
        return self.embedding_tables.cache_get(provider, model, fingerprint, hashes)

    def cache_put(self, provider: str, model: str, fingerprint: str,
                  items: Iterable[tuple[str, int, bytes]], max_entries: int) -> None:
        self.embedding_tables.cache_put(provider, model, fingerprint, items, max_entries)

    def cache_delete(self, hashes: Sequence[str]) -> int:
        return self.embedding_tables.cache_delete(hashes)

    def add_batch_job(self, provider: str, model: str, fingerprint: str, job: str,
                      hashes: Sequence[str], attempt: int, submitted_at: float) -> None:
        self.embedding_tables.add_batch_job(provider, model, fingerprint, job, hashes,
                                            attempt, submitted_at)

    def batch_jobs(self, provider: str, model: str, fingerprint: str) -> list[BatchJobRow]:
        return self.embedding_tables.batch_jobs(provider, model, fingerprint)

    def delete_batch_job(self, provider: str, job: str) -> None:
        self.embedding_tables.delete_batch_job(provider, job)

    def drop_batch_jobs_except(self, provider: str, model: str, fingerprint: str) -> int:
        return self.embedding_tables.drop_batch_jobs_except(provider, model, fingerprint)

    def batch_counts(self) -> tuple[int, int]:
        return self.embedding_tables.batch_counts()
