"""The per-agent SQLite file behind memory search: schema, migrations and row access.

Tables: ``meta`` (key/value: the index signature, vector dimensions), ``files`` (one row per
indexed file with its content hash), ``chunks`` (text, 1-based line range, heading path, the
chunk vector and the vectors of its segments as float32 blobs), ``chunks_fts`` (FTS5 over
heading and text, Porter-stemmed, rowid = chunk id), ``chunks_vec`` (a sqlite-vec ``vec0``
table of chunk vectors, cosine distance, rowid = chunk id), ``embedding_cache`` and
``embedding_batches`` (batch jobs submitted without waiting, ``remote.batch.wait: false``:
the job id, the embedder it belongs to, and the text hashes it embeds, in order) and
``vector_log`` (the chunk ids whose vectors each sync removed or added, by generation: how an
in-process copy of the vectors catches up without reading them all). The schema evolves by
numbered migrations recorded in ``PRAGMA user_version``.

Python's own ``sqlite3`` is often built without extension loading, so the binding is
``apsw`` (a current SQLite with FTS5, able to load extensions). If FTS5 or sqlite-vec is
missing the store still opens: ``fts_available`` / ``vec_available`` say what works and the
search falls back accordingly. ``chunks_vec`` is created once the vector size is known.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from clawd.memory.keywords import fts_text

log = logging.getLogger(__name__)

# Each migration runs once, in order, inside one transaction; never edit a released one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE files (
        path TEXT PRIMARY KEY, source TEXT NOT NULL, hash TEXT NOT NULL,
        mtime REAL NOT NULL, size INTEGER NOT NULL, indexed_at REAL NOT NULL);
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, heading TEXT NOT NULL,
        text TEXT NOT NULL, hash TEXT NOT NULL, embedding BLOB, segments BLOB);
    CREATE INDEX chunks_path ON chunks(path);
    CREATE TABLE embedding_cache (
        provider TEXT NOT NULL, model TEXT NOT NULL, fingerprint TEXT NOT NULL,
        hash TEXT NOT NULL, dims INTEGER NOT NULL, embedding BLOB NOT NULL,
        used_at REAL NOT NULL, PRIMARY KEY (provider, model, fingerprint, hash));
    CREATE INDEX embedding_cache_used ON embedding_cache(used_at);
    """,
    """
    CREATE TABLE embedding_batches (
        provider TEXT NOT NULL, model TEXT NOT NULL, fingerprint TEXT NOT NULL,
        job TEXT NOT NULL, hashes TEXT NOT NULL, count INTEGER NOT NULL,
        attempt INTEGER NOT NULL, submitted_at REAL NOT NULL,
        PRIMARY KEY (provider, job));
    """,
    """
    CREATE TABLE vector_log (
        generation INTEGER NOT NULL, chunk_id INTEGER NOT NULL, added INTEGER NOT NULL);
    CREATE INDEX vector_log_generation ON vector_log(generation);
    """,
)

# The vector log keeps the chunk ids whose vectors each sync removed or added, so a copy of
# the vectors held elsewhere (``matrix.py``) catches up without reading them all again. It
# holds every change of the generations after ``vectorLogSince`` up to ``vectorLogAt``; a
# commit by a writer that does not keep it leaves ``vectorLogAt`` behind the generation.
LOG_SINCE, LOG_AT = "vectorLogSince", "vectorLogAt"
LOG_GENERATIONS = 64  # generations kept: a copy older than that is loaded afresh


@dataclass(slots=True)
class VectorChanges:
    """What the syncs after one generation did to the chunk vectors, up to ``generation``:
    ids whose vectors are gone, ids whose vectors are new or replaced."""

    generation: str
    removed: list[int]
    added: list[int]

FTS_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
FTS_SQL = ("CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5("
           f"heading, text, tokenize = '{FTS_TOKENIZER[0]} {' '.join(FTS_TOKENIZER[1])}')")


def _batches(ids: Sequence[Any], size: int = 500) -> Iterable[tuple[list[Any], str]]:
    """Slices of ``ids`` small enough for one statement, with their ``?,?,...`` marks."""
    for start in range(0, len(ids), size):
        part = list(ids[start:start + size])
        yield part, ",".join("?" * len(part))


@dataclass(slots=True)
class ChunkRow:
    id: int
    path: str
    source: str
    start_line: int
    end_line: int
    heading: str
    text: str


@dataclass(slots=True)
class BatchJobRow:
    """A batch job that was submitted and not yet collected."""

    provider: str
    model: str
    fingerprint: str
    job: str
    hashes: list[str]
    attempt: int
    submitted_at: float


def _create_fts(conn: apsw.Connection) -> None:
    conn.execute(FTS_SQL)


def load_vec_extension(conn: apsw.Connection, extension_path: str | None) -> str | None:
    """Load sqlite-vec into ``conn``; the version string, or None (logged) when it cannot."""
    try:
        if extension_path:
            path = str(Path(extension_path).expanduser())
        else:
            import sqlite_vec

            path = sqlite_vec.loadable_path()
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
        return str(conn.execute("SELECT vec_version()").fetchall()[0][0])
    except (ImportError, apsw.Error, AttributeError, OSError) as exc:
        log.warning("sqlite-vec unavailable (%s); vector search runs in-process", exc)
        return None


class Store:
    """One open index file. Methods are serialised by a lock: the watcher thread shares it."""

    def __init__(self, path: Path, *, vector_enabled: bool = True,
                 extension_path: str | None = None):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.conn = apsw.Connection(str(path))
        self.conn.set_busy_timeout(5000)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # Memory-mapped reads roughly halve vec0's KNN scan time on large indexes.
        self.conn.execute("PRAGMA mmap_size=1073741824")
        self.vec_version = load_vec_extension(self.conn, extension_path) if vector_enabled \
            else None
        self._migrate()
        self.fts_available = self._init_fts()
        self.vec_available = self.vec_version is not None
        self._extension_path = extension_path
        self._readers = threading.local()
        self._all_readers: list[apsw.Connection] = []
        self._reader_lock = threading.Lock()
        self._chunk_count: tuple[str, int] | None = None  # (generation, chunks)
        self._log_generation: int | None = None  # the generation this transaction logs
        if self.vec_available and self.dims:
            self._ensure_vec_table(self.dims)

    # --- schema -----------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self.lock:
            version = self.conn.execute("PRAGMA user_version").fetchall()[0][0]
            for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
                with self.conn:
                    self.conn.execute(sql)
                    self.conn.execute(f"PRAGMA user_version = {number}")
                log.debug("memory index %s: migration %d applied", self.path, number)

    def _init_fts(self) -> bool:
        try:
            _create_fts(self.conn)
            return True
        except apsw.Error as exc:
            log.warning("FTS5 unavailable (%s); memory search runs vector-only", exc)
            return False

    def _ensure_vec_table(self, dims: int) -> None:
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
            f"embedding float[{int(dims)}] distance_metric=cosine)")

    # --- meta -------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            rows = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
        return rows[0][0] if rows else None

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
            self._log_generation = None

    def reset(self, dims: int) -> None:
        """Drop every chunk and vector; the vector table is recreated for ``dims``."""
        self.conn.execute("DELETE FROM chunks; DELETE FROM files; DELETE FROM vector_log;")
        # Every copy of the vectors is out of date: the log restarts after this generation.
        self.set_meta(LOG_SINCE, self.conn.execute(
            "SELECT coalesce((SELECT value FROM meta WHERE key = 'generation'), '0')"
        ).fetchall()[0][0])
        self._log_generation = None
        if self.fts_available:
            self.conn.execute("DELETE FROM chunks_fts")
        if self.vec_available:
            self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
        self.set_meta("dims", str(dims))
        if self.vec_available and dims:
            self._ensure_vec_table(dims)

    def set_dims(self, dims: int) -> None:
        if dims and dims != self.dims:
            self.set_meta("dims", str(dims))
            if self.vec_available:
                self.conn.execute("DROP TABLE IF EXISTS chunks_vec")
                self._ensure_vec_table(dims)

    def delete_file(self, path: str) -> None:
        ids = [row[0] for row in self.conn.execute("SELECT id FROM chunks WHERE path = ?",
                                                   (path,))]
        self._delete_chunks(ids)
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def _delete_chunks(self, ids: Sequence[int]) -> None:
        for part, marks in _batches(ids):
            self.conn.execute(f"DELETE FROM chunks WHERE id IN ({marks})", part)
            if self.fts_available:
                self.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", part)
            if self.vec_available and self.dims:
                self.conn.execute(f"DELETE FROM chunks_vec WHERE rowid IN ({marks})", part)
        self._log(ids, added=False)

    def insert_chunk(self, path: str, source: str, start_line: int, end_line: int,
                     heading: str, text: str, text_hash: str, embedding: bytes | None,
                     segments: bytes | None) -> int:
        self.conn.execute(
            "INSERT INTO chunks(path, source, start_line, end_line, heading, text, hash, "
            "embedding, segments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (path, source, start_line, end_line, heading, text, text_hash, embedding, segments))
        chunk_id = self.conn.last_insert_rowid()
        if self.fts_available:
            self.conn.execute("INSERT INTO chunks_fts(rowid, heading, text) VALUES (?, ?, ?)",
                              (chunk_id, fts_text(heading), fts_text(text)))
        if embedding is not None:
            self._insert_vec(chunk_id, embedding)
            self._log([chunk_id], added=True)
        return chunk_id

    def set_embedding(self, chunk_id: int, embedding: bytes, segments: bytes | None) -> None:
        self.conn.execute("UPDATE chunks SET embedding = ?, segments = ? WHERE id = ?",
                          (embedding, segments, chunk_id))
        if self.vec_available and self.dims:
            self.conn.execute("DELETE FROM chunks_vec WHERE rowid = ?", (chunk_id,))
        self._insert_vec(chunk_id, embedding)
        self._log([chunk_id], added=True)

    def _insert_vec(self, chunk_id: int, embedding: bytes) -> None:
        if self.vec_available and self.dims:
            self.conn.execute("INSERT INTO chunks_vec(rowid, embedding) VALUES (?, ?)",
                              (chunk_id, embedding))

    def _log(self, ids: Sequence[int], *, added: bool) -> None:
        if self._log_generation is not None and ids:
            self.conn.executemany(
                "INSERT INTO vector_log(generation, chunk_id, added) VALUES (?, ?, ?)",
                [(self._log_generation, chunk_id, int(added)) for chunk_id in ids])

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
                return self.conn.execute(sql).fetchall()[0][0]
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
        for part, marks in _batches(ids):
            for row in self._read("SELECT id, path, source, start_line, end_line, heading, "
                                  f"text FROM chunks WHERE id IN ({marks})", part):
                out[row[0]] = ChunkRow(*row)
        return out

    def get_vectors(self, ids: Iterable[int]) -> dict[int, tuple[bytes | None, bytes | None]]:
        """chunk id -> (chunk vector, segment vectors) as stored."""
        ids = list(ids)
        out: dict[int, tuple[bytes | None, bytes | None]] = {}
        for part, marks in _batches(ids):
            for row in self._read("SELECT id, embedding, segments FROM chunks "
                                  f"WHERE id IN ({marks})", part):
                out[row[0]] = (row[1], row[2])
        return out

    def generation(self) -> str:
        """Changes with every committed sync (``bump_generation``), in any process."""
        rows = self._read("SELECT value FROM meta WHERE key = 'generation'")
        return str(rows[0][0]) if rows else "0"

    def bump_generation(self) -> None:
        """First thing in a sync's transaction: cached copies of the index are out of date.

        The vector changes written in the rest of the transaction are logged under the new
        generation. When the log missed the previous generation (a writer that does not
        keep it committed it), it restarts here; generations older than the last
        ``LOG_GENERATIONS`` are forgotten.
        """
        meta = dict(self.conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('generation', ?, ?)", (LOG_SINCE, LOG_AT)))
        old = int(meta.get("generation", 0))
        new = old + 1
        since = int(meta[LOG_SINCE]) if LOG_SINCE in meta and meta.get(LOG_AT) == str(old) \
            else old
        since = max(since, new - LOG_GENERATIONS)
        self.conn.execute("DELETE FROM vector_log WHERE generation <= ?", (since,))
        for key, value in (("generation", new), (LOG_SINCE, since), (LOG_AT, new)):
            self.set_meta(key, str(value))
        self._log_generation = new

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Reads of this thread inside see one committed state of the index."""
        reader = self._reader()
        reader.execute("BEGIN")
        try:
            yield
        finally:
            reader.execute("COMMIT")

    def vector_matrix(self, headroom: float = 0.0) -> tuple[str, Any, Any]:
        """(generation, chunk ids, float32 matrix of their vectors), read in one snapshot.
        The matrix has ``headroom`` × as many rows again, uninitialised, to grow into."""
        import numpy as np

        with self._snapshot():
            generation = self.generation()
            count = int(self._read("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
                        [0][0])
            dims = self._read("SELECT value FROM meta WHERE key = 'dims'")
            ids = np.empty(count, dtype=np.int64)
            matrix = np.empty((count + int(count * headroom), int(dims[0][0]) if dims else 0),
                              dtype=np.float32)
            # Straight into the matrix, row by row: no second copy of the vectors in memory.
            for row, (chunk_id, blob) in enumerate(self._reader().execute(
                    "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL")):
                ids[row] = chunk_id
                matrix[row] = np.frombuffer(blob, dtype=np.float32)
        return generation, ids, matrix

    def vector_changes(self, since: str) -> VectorChanges | None:
        """The vector changes committed after generation ``since``, read in one snapshot;
        None when the log does not reach back to it (the vectors must be read afresh)."""
        with self._snapshot():
            meta = dict(self._read("SELECT key, value FROM meta WHERE key IN "
                                   "('generation', ?, ?)", (LOG_SINCE, LOG_AT)))
            generation = str(meta.get("generation", "0"))
            if generation == since:
                return VectorChanges(generation, [], [])
            if meta.get(LOG_AT) != generation or not since.isdigit() \
                    or int(since) < int(meta.get(LOG_SINCE, generation)):
                return None
            rows = self._read("SELECT chunk_id, added FROM vector_log WHERE generation > ? "
                              "ORDER BY generation, added", (int(since),))
        final: dict[int, int] = {}
        for chunk_id, added in rows:  # a sync removes before it adds; the last change holds
            final[int(chunk_id)] = int(added)
        return VectorChanges(generation, [c for c, a in final.items() if not a],
                             [c for c, a in final.items() if a])

    def vectors_of(self, ids: Sequence[int]) -> tuple[Any, Any]:
        """(chunk ids, float32 matrix of their vectors) of those of ``ids`` that have one."""
        import numpy as np

        found: list[int] = []
        blobs: list[bytes] = []
        for part, marks in _batches(ids):
            for chunk_id, blob in self._read("SELECT id, embedding FROM chunks WHERE embedding "
                                             f"IS NOT NULL AND id IN ({marks})", part):
                found.append(int(chunk_id))
                blobs.append(blob)
        dims = len(blobs[0]) // 4 if blobs else 0
        return (np.array(found, dtype=np.int64),
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), dims))

    def all_vectors(self) -> list[tuple[int, bytes]]:
        with self.lock:
            return list(self.conn.execute(
                "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id"))

    def vec_knn(self, query: bytes, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the ``k`` nearest chunk vectors, by vec0 KNN."""
        rows = self._read("SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? "
                          "AND k = ?", (query, int(k)))
        return [(int(rowid), 1.0 - float(distance)) for rowid, distance in rows]

    def _read(self, sql: str, params: Any = ()) -> list[Any]:
        """Rows of a query on this thread's read-only connection.

        Searches read through these: in WAL mode a reader sees the last committed state and
        never waits for a writer, so a sync committing on ``conn`` does not hold up a search,
        and the keyword and vector halves of one search (two threads) run side by side
        (apsw releases the GIL while SQLite works).
        """
        return self._reader().execute(sql, params).fetchall()

    def _reader(self) -> apsw.Connection:
        """This thread's read-only connection (opened on first use)."""
        reader = getattr(self._readers, "conn", None)
        if reader is None:
            reader = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
            reader.set_busy_timeout(5000)
            reader.execute("PRAGMA mmap_size=1073741824")
            if self.vec_available:
                load_vec_extension(reader, self._extension_path)
            if self.fts_available:
                reader.execute("CREATE VIRTUAL TABLE temp.chunks_vocab USING "
                               "fts5vocab(main, chunks_fts, row)")
            self._readers.conn = reader
            with self._reader_lock:
                self._all_readers.append(reader)
        return reader

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        """(chunk id, -bm25) for the best ``k`` FTS matches: higher is better, always > 0.
        With ``newest``, only the newest that many matches (highest ids) are ranked: FTS5
        walks the posting lists in id order and stops there.

        SQLite's ``bm25()`` is negative with lower = better; it is negated here once so no
        caller ever handles the inverted sign.
        """
        if newest is None:
            sql = ("SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? "
                   "ORDER BY bm25(chunks_fts) LIMIT ?")
            rows = self._read(sql, (match, int(k)))
        else:
            sql = ("SELECT rowid, score FROM (SELECT rowid, -bm25(chunks_fts) AS score "
                   "FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid DESC LIMIT ?) "
                   "ORDER BY score DESC LIMIT ?")
            rows = self._read(sql, (match, int(newest), int(k)))
        return [(int(r), float(s)) for r, s in rows]

    def _tokenizer(self) -> Any:
        # The tokenizer belongs to this thread's connection: one in use by another thread
        # (a sync writing) would refuse it.
        tokenizer = getattr(self._readers, "tokenizer", None)
        if tokenizer is None:
            tokenizer = self._readers.tokenizer = self._reader().fts5_tokenizer(*FTS_TOKENIZER)
        return tokenizer

    def fts_tokens(self, text: str) -> list[str]:
        """``text`` as FTS5 tokenizes it for a query (lower-cased, Porter-stemmed)."""
        found = self._tokenizer()(text.encode("utf-8", "replace"), apsw.FTS5_TOKENIZE_QUERY,
                                  None, include_offsets=False)
        return [item[0] for item in found]

    def fts_line_tokens(self, text: str) -> list[list[str]]:
        """``fts_tokens`` of each line of ``text`` (split at ``\\n``), in one tokenizer call."""
        data = text.encode("utf-8", "replace")
        ends = [m.start() for m in re.finditer(b"\n", data)] + [len(data)]
        lines: list[list[str]] = [[] for _ in ends]
        number, end, current = 0, ends[0], lines[0]
        for start, _, token in self._tokenizer()(data, apsw.FTS5_TOKENIZE_QUERY, None,
                                                 include_colocated=False):
            if start > end:  # tokens come in order: move on to the line this one starts in
                while start > end:
                    number += 1
                    end = ends[number]
                current = lines[number]
            current.append(token)
        return lines

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, chunks holding each token) from the FTS5 vocabulary."""
        generation = self.generation()
        cached = self._chunk_count
        if cached is None or cached[0] != generation:
            # count(*) walks the whole table: once per committed sync, not per search
            cached = (generation, int(self._read("SELECT count(*) FROM chunks")[0][0]))
            self._chunk_count = cached
        total = cached[1]
        docs: dict[str, int] = {}
        for part, marks in _batches(list(tokens)):
            for term, count in self._read(
                    f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", part):
                docs[term] = int(count)
        return int(total), docs

    def chunk_texts(self, ids: Iterable[int]) -> dict[int, str]:
        """chunk id -> heading and text."""
        ids = list(ids)
        out: dict[int, str] = {}
        for part, marks in _batches(ids):
            for chunk_id, heading, text in self._read(
                    f"SELECT id, heading, text FROM chunks WHERE id IN ({marks})", part):
                out[int(chunk_id)] = f"{heading}\n{text}"
        return out

    # --- embedding cache --------------------------------------------------------------------

    def cache_get(self, provider: str, model: str, fingerprint: str,
                  hashes: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        now = time.time()
        with self.lock:
            for part, marks in _batches(hashes):
                key = (provider, model, fingerprint)
                rows = self.conn.execute(
                    "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND "
                    f"model = ? AND fingerprint = ? AND hash IN ({marks})", (*key, *part))
                found.update({h: blob for h, blob in rows})
                if found:
                    self.conn.execute(
                        "UPDATE embedding_cache SET used_at = ? WHERE provider = ? AND "
                        f"model = ? AND fingerprint = ? AND hash IN ({marks})",
                        (now, *key, *part))
        return found

    def cache_put(self, provider: str, model: str, fingerprint: str,
                  items: Iterable[tuple[str, int, bytes]], max_entries: int) -> None:
        now = time.time()
        with self.lock, self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache(provider, model, fingerprint, hash, "
                "dims, embedding, used_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(provider, model, fingerprint, h, dims, blob, now) for h, dims, blob in items])
            total = self.conn.execute("SELECT count(*) FROM embedding_cache").fetchall()[0][0]
            if total > max_entries:
                # Least recently used entries go first.
                self.conn.execute(
                    "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM "
                    "embedding_cache ORDER BY used_at ASC LIMIT ?)", (total - max_entries,))

    # --- pending batch jobs -----------------------------------------------------------------

    def add_batch_job(self, provider: str, model: str, fingerprint: str, job: str,
                      hashes: Sequence[str], attempt: int, submitted_at: float) -> None:
        """Record a submitted job at once (its own transaction): it must survive a crash."""
        with self.lock, self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO embedding_batches(provider, model, fingerprint, job, "
                "hashes, count, attempt, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (provider, model, fingerprint, job, json.dumps(list(hashes)), len(hashes),
                 attempt, submitted_at))

    def batch_jobs(self, provider: str, model: str, fingerprint: str) -> list[BatchJobRow]:
        """The pending jobs of one embedder, oldest first."""
        with self.lock:
            rows = list(self.conn.execute(
                "SELECT provider, model, fingerprint, job, hashes, attempt, submitted_at "
                "FROM embedding_batches WHERE provider = ? AND model = ? AND fingerprint = ? "
                "ORDER BY submitted_at, rowid", (provider, model, fingerprint)))
        return [BatchJobRow(p, m, f, j, json.loads(h), a, t) for p, m, f, j, h, a, t in rows]

    def delete_batch_job(self, provider: str, job: str) -> None:
        with self.lock:
            self.conn.execute("DELETE FROM embedding_batches WHERE provider = ? AND job = ?",
                              (provider, job))

    def drop_batch_jobs_except(self, provider: str, model: str, fingerprint: str) -> int:
        """Forget the jobs of every other embedder; how many there were."""
        with self.lock:
            self.conn.execute(
                "DELETE FROM embedding_batches WHERE NOT (provider = ? AND model = ? AND "
                "fingerprint = ?)", (provider, model, fingerprint))
            return self.conn.changes()

    def batch_counts(self) -> tuple[int, int]:
        """(pending jobs, texts they embed)."""
        with self.lock:
            jobs, texts = self.conn.execute(
                "SELECT count(*), coalesce(sum(count), 0) FROM embedding_batches").fetchall()[0]
        return int(jobs), int(texts)

    def close(self) -> None:
        with self._reader_lock:
            for reader in self._all_readers:
                reader.close()
            self._all_readers.clear()
        with self.lock:
            self.conn.close()
