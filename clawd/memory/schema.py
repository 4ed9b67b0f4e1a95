"""The memory index's SQLite schema: numbered migrations, the FTS5 table, the sqlite-vec
extension and its vector table, and the statement helper the store's parts share.

The schema evolves by numbered migrations recorded in ``PRAGMA user_version``; each runs
once, in order, inside one transaction. ``chunks_fts`` (FTS5 over heading and text,
Porter-stemmed, rowid = chunk id) is created when FTS5 is available, and ``chunks_vec`` (a
sqlite-vec ``vec0`` table of chunk vectors, cosine distance) once the vector size is known.
Python's own ``sqlite3`` is often built without extension loading, so the binding is
``apsw``; when FTS5 or sqlite-vec is missing the store still opens and says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw

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
    # Each chunk's FTS tokens line by line (keyword_tables.py); chunks written before have
    # none until a sync fills them in, found through the partial index.
    """
    ALTER TABLE chunks ADD COLUMN line_tokens TEXT;
    CREATE INDEX chunks_without_line_tokens ON chunks(id) WHERE line_tokens IS NULL;
    """,
)

FTS_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
FTS_SQL = ("CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5("
           f"heading, text, tokenize = '{FTS_TOKENIZER[0]} {' '.join(FTS_TOKENIZER[1])}')")


def batched(ids: Sequence[Any], size: int = 500) -> Iterable[tuple[list[Any], str]]:
    """Slices of ``ids`` small enough for one statement, with their ``?,?,...`` marks."""
    for start in range(0, len(ids), size):
        part = list(ids[start:start + size])
        yield part, ",".join("?" * len(part))


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


def migrate(conn: apsw.Connection, path: Path) -> None:
    """Apply the migrations ``conn``'s file has not had yet."""
    version = int(conn.execute("PRAGMA user_version").fetchall()[0][0] or 0)
    for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
        with conn:
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {number}")
        log.debug("memory index %s: migration %d applied", path, number)


def init_fts(conn: apsw.Connection) -> bool:
    """Create the FTS5 table if needed; whether FTS5 works."""
    try:
        _create_fts(conn)
        return True
    except apsw.Error as exc:
        log.warning("FTS5 unavailable (%s); memory search runs vector-only", exc)
        return False


def ensure_vec_table(conn: apsw.Connection, dims: int) -> None:
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING vec0("
                 f"embedding float[{int(dims)}] distance_metric=cosine)")
