"""The vectors of the memory index as an in-process copy (``matrix.py``) reads them: all at
once, or only what changed since the generation the copy holds.

``vector_log`` keeps the chunk ids whose vectors each sync removed or added, by generation
(``bump_generation`` starts a sync's transaction), so a copy catches up without reading
every vector again. ``VectorLog`` is a part of ``store.Store``: it uses the store's writer
connection and its per-thread read-only connections.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apsw

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
    """The vector log and the vector reads of ``Store``."""

    conn: apsw.Connection
    _log_generation: int | None  # the generation this transaction logs

    if TYPE_CHECKING:
        def _read(self, sql: str, params: Any = ()) -> list[Any]: ...

        def _reader(self) -> apsw.Connection: ...

        def set_meta(self, key: str, value: str) -> None: ...

        def generation(self) -> str: ...

    def _log(self, ids: Sequence[int], *, added: bool) -> None:
        if self._log_generation is not None and ids:
            self.conn.executemany(
                "INSERT INTO vector_log(generation, chunk_id, added) VALUES (?, ?, ?)",
                [(self._log_generation, chunk_id, int(added)) for chunk_id in ids])

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
        for part, marks in batched(ids):
            for chunk_id, blob in self._read("SELECT id, embedding FROM chunks WHERE embedding "
                                             f"IS NOT NULL AND id IN ({marks})", part):
                found.append(int(chunk_id))
                blobs.append(blob)
        dims = len(blobs[0]) // 4 if blobs else 0
        return (np.array(found, dtype=np.int64),
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), dims))
