"""The vector stage's fast path: every chunk vector in one in-process float32 matrix.

A KNN over 100k × 384 vectors is a single matrix-vector product (about 150 MB streamed from
memory, a few milliseconds), against tens of milliseconds for sqlite-vec's ``vec0`` scan of
the same vectors in pages. sqlite-vec stays the store of record: the matrix is a cache of
the ``chunks.embedding`` column, stamped with the index's ``generation`` (a meta row every
sync commit increments, in whichever process). A search whose stamp differs from the
matrix's uses ``vec0`` meanwhile and the matrix is reloaded on a background thread, so a
search never waits for it; nothing of it is written to disk, so a crash leaves nothing stale
to recover: the next process loads it afresh from the store. Without sqlite-vec the first
search loads it in line (there is nothing else to search with). The scan is exact, so its
results are those of an exact KNN.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class VectorMatrix:
    """Chunk ids and their vectors as loaded at one generation of the index."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: tuple[str, Any, Any] | None = None  # (generation, ids, matrix)
        self._loading: threading.Thread | None = None

    def nearest(self, store: Any, qvec: Any, k: int, *, wait: bool) -> list[int] | None:
        """The ``k`` nearest chunk ids by cosine, or None when the matrix is not (yet) in
        step with the store; ``wait`` loads it in line instead of in the background."""
        import numpy as np

        generation = store.generation()
        loaded = self._loaded
        if loaded is None or loaded[0] != generation:
            if not wait:
                self._load_in_background(store)
                return None
            self._load(store)
            loaded = self._loaded
            if loaded is None:
                return None
        _, ids, matrix = loaded
        if not len(ids):
            return []
        sims = matrix @ qvec
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k]
        return [int(ids[i]) for i in top[np.argsort(-sims[top])]]

    def drop(self) -> None:
        self._loaded = None

    @property
    def nbytes(self) -> int:
        loaded = self._loaded
        return 0 if loaded is None else int(loaded[1].nbytes + loaded[2].nbytes)

    def _load_in_background(self, store: Any) -> None:
        with self._lock:
            if self._loading is not None and self._loading.is_alive():
                return
            self._loading = threading.Thread(target=self._load_quietly, args=(store,),
                                             daemon=True, name="clawd-memory-matrix")
            self._loading.start()

    def _load_quietly(self, store: Any) -> None:
        try:
            self._load(store)
        except Exception as exc:  # noqa: BLE001 - vec0 keeps answering meanwhile
            log.warning("memory vectors not loaded in process: %s", exc)

    def _load(self, store: Any) -> None:
        import numpy as np

        generation = store.generation()
        ids, matrix = store.vector_matrix()
        self._loaded = (generation, ids, matrix)
        log.debug("memory vectors in process: %d × %d", *np.shape(matrix))

    def settle(self, timeout: float | None = None) -> None:
        """Wait for a background load (tests, benchmarks)."""
        thread = self._loading
        if thread is not None:
            thread.join(timeout)
