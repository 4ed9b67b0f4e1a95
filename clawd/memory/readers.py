"""The read-only connections to the memory index file: one per thread, what searches read
through.

In WAL mode a reader sees the last committed state and never waits for a writer, so a sync
committing on the store's writer connection does not hold up a search, and the keyword and
vector halves of one search (two threads) run side by side (apsw releases the GIL while
SQLite works). A thread's connection is opened on its first read, with sqlite-vec loaded
and FTS5's vocabulary of the chunks (``temp.chunks_vocab``) when the index has them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from clawd.memory.schema import load_vec_extension


class Readers:
    """Each thread's read-only connection to one index file."""

    def __init__(self, path: Path, *, vec: bool, fts: bool, extension_path: str | None):
        self.path = path
        self.vec, self.fts = vec, fts
        self.extension_path = extension_path
        self._local = threading.local()
        self._opened: list[apsw.Connection] = []
        self._lock = threading.Lock()

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """Rows of a query on this thread's connection."""
        return self.connection().execute(sql, params).fetchall()

    def connection(self) -> apsw.Connection:
        """This thread's connection (opened on first use)."""
        reader = getattr(self._local, "conn", None)
        if reader is None:
            reader = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
            reader.set_busy_timeout(5000)
            reader.execute("PRAGMA mmap_size=1073741824")
            if self.vec:
                load_vec_extension(reader, self.extension_path)
            if self.fts:
                reader.execute("CREATE VIRTUAL TABLE temp.chunks_vocab USING "
                               "fts5vocab(main, chunks_fts, row)")
            self._local.conn = reader
            with self._lock:
                self._opened.append(reader)
        return reader

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads of this thread inside see one committed state of the index."""
        reader = self.connection()
        reader.execute("BEGIN")
        try:
            yield
        finally:
            reader.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            for reader in self._opened:
                reader.close()
            self._opened.clear()
