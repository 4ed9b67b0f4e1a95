"""The vectors of the memory index as an in-process copy (``matrix.py``) reads them: all at
once, or only what changed since the generation the copy holds.

``vector_log`` keeps the chunk ids whose vectors each sync removed or added, by generation
(``bump_generation`` starts a sync's transaction), so a copy catches up without reading
every vector again. ``store.Store`` holds one ``VectorLog``, built on its writer connection,
its per-thread read-only connections (``readers.py``) and its meta table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from clawd.memory.readers import Readers
from clawd.memory.schema import batched

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


class VectorLog:
    """The vector log of one index file, and the vector reads of the in-process matrix.

    ``set_meta`` and ``generation`` are the store's: the log's bounds are kept in its meta
    table, by the generation it counts."""

    def __init__(self, conn: apsw.Connection, readers: Readers,
                 set_meta: Callable[[str, str], None], generation: Callable[[], str]):
        self.conn, self.readers = conn, readers
        self.set_meta, self.generation = set_meta, generation
        self.logging: int | None = None  # the generation this transaction logs

    def log(self, ids: Sequence[int], *, added: bool) -> None:
        """Within a sync's transaction: these chunks' vectors were removed or added."""
        if self.logging is not None and ids:
            self.conn.executemany(
                "INSERT INTO vector_log(generation, chunk_id, added) VALUES (?, ?, ?)",
                [(self.logging, chunk_id, int(added)) for chunk_id in ids])

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
        self.logging = new

    def restart(self) -> None:
        """Within a transaction that drops every vector (``Store.reset``): every copy is out
        of date, so the log restarts after the current generation and logs nothing more of
        this transaction."""
        self.conn.execute("DELETE FROM vector_log")
        self.set_meta(LOG_SINCE, str(self.conn.execute(
            "SELECT coalesce((SELECT value FROM meta WHERE key = 'generation'), '0')"
        ).fetchall()[0][0]))
        self.logging = None

    def end_transaction(self) -> None:
        """The transaction is over: nothing more is logged until the next generation."""
        self.logging = None

    def vector_matrix(self, headroom: float = 0.0) -> tuple[str, Any, Any]:
        """(generation, chunk ids, float32 matrix of their vectors), read in one snapshot.
        The matrix has ``headroom`` × as many rows again, uninitialised, to grow into."""
        import numpy as np

        read = self.readers.read
        with self.readers.snapshot():
            generation = self.generation()
            count = int(read("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")[0][0])
            dims = read("SELECT value FROM meta WHERE key = 'dims'")
            ids = np.empty(count, dtype=np.int64)
            matrix = np.empty((count + int(count * headroom), int(dims[0][0]) if dims else 0),
                              dtype=np.float32)
            # Straight into the matrix, row by row: no second copy of the vectors in memory.
            for row, (chunk_id, blob) in enumerate(self.readers.connection().execute(
                    "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL")):
                ids[row] = chunk_id
                matrix[row] = np.frombuffer(blob, dtype=np.float32)
        return generation, ids, matrix

    def vector_changes(self, since: str) -> VectorChanges | None:
        """The vector changes committed after generation ``since``, read in one snapshot;
        None when the log does not reach back to it (the vectors must be read afresh)."""
        read = self.readers.read
        with self.readers.snapshot():
            meta = dict(read("SELECT key, value FROM meta WHERE key IN ('generation', ?, ?)",
                             (LOG_SINCE, LOG_AT)))
            generation = str(meta.get("generation", "0"))
            if generation == since:
                return VectorChanges(generation, [], [])
            if meta.get(LOG_AT) != generation or not since.isdigit() \
                    or int(since) < int(meta.get(LOG_SINCE, generation)):
                return None
            rows = read("SELECT chunk_id, added FROM vector_log WHERE generation > ? "
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
        for part, marks in batched(ids):
            for chunk_id, blob in self.readers.read(
                    "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL AND "
                    f"id IN ({marks})", part):
                found.append(int(chunk_id))
                blobs.append(blob)
        dims = len(blobs[0]) // 4 if blobs else 0
        return (np.array(found, dtype=np.int64),
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), dims))
