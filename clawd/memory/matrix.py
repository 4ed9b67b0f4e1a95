"""The vector stage's fast path: every chunk vector in one in-process float32 matrix.

A KNN over 100k × 384 vectors is a single matrix-vector product (about 150 MB streamed from
memory, a few milliseconds), against tens of milliseconds for sqlite-vec's ``vec0`` scan of
the same vectors in pages. The product runs on the calling thread (``einsum``, not the BLAS
thread pool, which on a busy machine waits for its threads far longer than the scan takes).
The scan is exact, so its results are those of an exact KNN.

sqlite-vec stays the store of record: the matrix is a cache of the ``chunks.embedding``
column, stamped with the index's ``generation`` (a meta row every sync commit increments, in
whichever process). When the stamp differs, the matrix catches up from the store's vector
log (the chunk ids each sync removed or added, written in the sync's own transaction): the
rows of removed chunks are filled by the last rows, new vectors are appended or replace their
chunk's row. A catch-up of a few thousand rows happens in line, before the search scans; a
larger one, or a full load (a new process, a log that no longer reaches back to the
matrix's generation, or a commit by a writer that does not keep the log), runs on a
background thread while ``vec0`` answers, so a search never waits for it. Without
sqlite-vec everything happens in line (there is nothing else to search with).

Crash safety: nothing of the matrix is written to disk, and the log is part of the store's
transactions, so no crash leaves a torn file behind. An update that fails half-way (or is
interrupted) leaves the matrix without a stamp, and an unstamped matrix is never scanned:
the next search loads it afresh from the store.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawd.memory.vector_log import VectorChanges

log = logging.getLogger(__name__)

INLINE_ROWS = 4096  # a catch-up adding at most this many vectors happens within the search
GROWTH = 1.25  # spare rows kept for appends, as a share of the rows in use


class VectorMatrix:
    """Chunk ids and their vectors as of one generation of the index."""

    def __init__(self) -> None:
        import numpy as np

        self._lock = threading.Lock()  # the arrays, while they change or are scanned
        self._updating = threading.Lock()  # one update (catch-up or load) at a time
        self._generation: str | None = None  # None: not loaded, or torn by a failed update
        self._ids = np.empty(0, dtype=np.int64)
        self._matrix = np.empty((0, 0), dtype=np.float32)
        self._count = 0
        self._loading: threading.Thread | None = None

    @property
    def generation(self) -> str | None:
        return self._generation

    def nearest(self, store: Any, qvec: Any, k: int, *, wait: bool) -> list[int] | None:
        """The ``k`` nearest chunk ids by cosine, or None when the matrix is not (yet) in
        step with the store; ``wait`` brings it in step in line instead of in the
        background."""
        import numpy as np

        if self._generation != store.generation() and not self._catch_up(store, wait):
            return None
        with self._lock:
            if self._generation is None:  # torn by an update that failed meanwhile
                return None
            count = self._count
            if not count:
                return []
            # float32 like the matrix: a float64 query makes einsum cast every row (3.5x)
            query = np.asarray(qvec, dtype=np.float32)
            sims = np.einsum("ij,j->i", self._matrix[:count], query)
            k = min(k, count)
            top = np.argpartition(-sims, k - 1)[:k]
            return [int(self._ids[i]) for i in top[np.argsort(-sims[top])]]

    @property
    def nbytes(self) -> int:
        """Memory of the rows in use: the spare rows are reserved, never touched (so never
        resident) until vectors are appended to them."""
        return int(self._count * (self._ids.itemsize + self._matrix[0:1].nbytes))

    def wait_loaded(self, timeout: float | None = None) -> None:
        """Wait for a background update (tests, benchmarks)."""
        thread = self._loading
        if thread is not None:
            thread.join(timeout)

    # --- keeping in step ----------------------------------------------------------------

    def _catch_up(self, store: Any, wait: bool) -> bool:
        """Bring the matrix in step; whether it is (False: it happens in the background)."""
        if not self._updating.acquire(blocking=wait):
            return False  # a background update is running: vec0 answers meanwhile
        try:
            if self._update(store, None if wait else INLINE_ROWS):
                return True
        except Exception as exc:  # noqa: BLE001 - the search goes on with vec0
            if wait:
                raise
            log.warning("memory vectors in process out of step (%s); reloading them", exc)
        finally:
            self._updating.release()
        self._start_background(store)
        return False

    def _update(self, store: Any, limit: int | None) -> bool:
        """Catch up from the store's log, or load afresh when it cannot bridge the gap;
        False, doing nothing, when that means more than ``limit`` new vectors."""
        if self._generation == store.generation():
            return True
        stamp = self._generation
        changes = store.vector_changes(stamp) if stamp is not None else None
        if limit is not None and (changes is None or len(changes.added) > limit):
            return False
        if changes is None:
            self.load(store)
        else:
            self.apply(store, changes)
        return True

    def _start_background(self, store: Any) -> None:
        with self._lock:
            if self._loading is not None and self._loading.is_alive():
                return
            self._loading = threading.Thread(target=self._update_quietly, args=(store,),
                                             daemon=True, name="clawd-memory-matrix")
            self._loading.start()

    def _update_quietly(self, store: Any) -> None:
        try:
            with self._updating:
                self._update(store, None)
        except Exception as exc:  # noqa: BLE001 - vec0 keeps answering meanwhile
            self._generation = None
            log.warning("memory vectors not loaded in process: %s", exc)

    def load(self, store: Any) -> None:
        """Read every vector afresh from the store."""
        generation, ids, matrix = store.vector_matrix(headroom=GROWTH - 1)
        with self._lock:
            self._ids = _grow(ids, len(ids), len(matrix))
            self._matrix, self._count = matrix, len(ids)
            self._generation = generation
        log.debug("memory vectors in process: %d × %d", len(ids), matrix.shape[1])

    def apply(self, store: Any, changes: VectorChanges) -> None:
        """Apply one ``VectorChanges`` from the store's log, in place.

        Removed rows (and rows whose vector was replaced) are filled by the last rows in
        use, then the new vectors are appended. The vectors are read before the matrix is
        touched; while it is being changed it has no stamp, so a failure half-way leaves a
        matrix no search uses, which the next one loads afresh.
        """
        import numpy as np

        added_ids, added = store.vectors_of(changes.added)
        gone = np.array(changes.removed + changes.added, dtype=np.int64)
        with self._lock:
            self._generation = None
            ids, matrix, count = self._ids, self._matrix, self._count
            rows = np.flatnonzero(np.isin(ids[:count], gone))
            keep = count - len(rows)
            # The rows in use past the new end move into the holes before it.
            holes = rows[rows < keep]
            tail = np.setdiff1d(np.arange(keep, count), rows, assume_unique=True)
            ids[holes] = ids[tail]
            matrix[holes] = matrix[tail]
            end = keep + len(added_ids)
            if len(added_ids) and matrix.shape[1] != added.shape[1]:
                if keep:
                    raise ValueError(f"vectors of {added.shape[1]} dimensions added to a "
                                     f"matrix of {matrix.shape[1]}")
                matrix = np.empty((0, added.shape[1]), dtype=np.float32)
            if end > len(matrix):
                capacity = int(end * GROWTH) + 64
                ids, matrix = _grow(ids, keep, capacity), _grow(matrix, keep, capacity)
            if len(added_ids):
                ids[keep:end] = added_ids
                matrix[keep:end] = added
            self._ids, self._matrix, self._count = ids, matrix, end
            self._generation = changes.generation


def _grow(array: Any, used: int, rows: int) -> Any:
    """An array of ``rows`` rows whose first ``used`` are those of ``array``."""
    import numpy as np

    if len(array) == rows:
        return array
    grown = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown
