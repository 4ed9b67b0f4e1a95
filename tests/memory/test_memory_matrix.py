"""The in-process vector matrix: it agrees with an exact KNN while syncs add, replace and
remove vectors (caught up from the store's vector log, in place), and it recovers from
every inconsistent state by reading the store of record again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawd.memory import matrix as matrix_module
from clawd.memory import vector_log as vector_log_module
from clawd.memory.matrix import VectorMatrix
from clawd.memory.store import Store

DIMS = 384


def unit(rng: np.random.Generator, count: int) -> np.ndarray:
    x = rng.standard_normal((count, DIMS)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Notes:
    """A store filled the way syncs fill it: files of chunks, replaced and removed whole."""

    def __init__(self, path: Path, seed: int = 1, reset: bool = True):
        self.store = Store(path)
        self.rng = np.random.default_rng(seed)
        self.files = 0
        if reset:
            with self.store.lock, self.store.transaction():
                self.store.bump_generation()
                self.store.reset(DIMS)

    def sync(self, add: int = 0, remove: list[str] = (), replace: list[str] = (),
             unembedded: int = 0, fill: bool = False) -> list[str]:
        """One committed sync; the new file names."""
        store, new = self.store, []
        with store.lock, store.transaction():
            store.bump_generation()
            if add or fill:
                store.set_dims(DIMS)  # as a sync does when an index gets its first vectors
            for path in remove:
                store.delete_file(path)
            for path in replace:
                store.delete_file(path)
                self._file(path, 5)
            if fill:
                for chunk_id, _, _, _ in store.chunks_without_embedding():
                    store.set_embedding(chunk_id, unit(self.rng, 1)[0].tobytes(), None)
            for count, embedded in ((add, True), (unembedded, False)):
                for start in range(0, count, 10):
                    self.files += 1
                    new.append(f"memory/f{self.files}.md")
                    self._file(new[-1], min(10, count - start), embedded)
        return new

    def _file(self, path: str, chunks: int, embedded: bool = True) -> None:
        for vector in unit(self.rng, chunks):
            self.store.insert_chunk(path, "memory", 1, 2, "", path, "h",
                                    vector.tobytes() if embedded else None, None)
        self.store.upsert_file(path, "memory", "h", 0.0, 0)

    def exact(self, qvec: np.ndarray, k: int = 10) -> list[int]:
        ids, blobs = zip(*self.store.all_vectors())
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), DIMS)
        sims = matrix @ qvec
        return [ids[i] for i in np.argsort(-sims)[:k]]


@pytest.fixture
def notes(tmp_path):
    notes = Notes(tmp_path / "index.sqlite")
    yield notes
    notes.store.close()


def agrees(vectors: VectorMatrix, notes: Notes, queries: int = 25) -> None:
    for qvec in unit(np.random.default_rng(99), queries):
        assert vectors.nearest(notes.store, qvec, 10, wait=False) == notes.exact(qvec)
    exact = {cid for cid, _ in notes.store.vec_knn(qvec.tobytes(), 10)}
    assert set(vectors.nearest(notes.store, qvec, 10, wait=False)) == exact
    assert vectors.generation == notes.store.generation()


def loads(monkeypatch, store: Store) -> list[int]:
    """Counts full loads of the matrix from the store."""
    calls: list[int] = []
    real = store.vector_matrix
    monkeypatch.setattr(store, "vector_matrix", lambda **kw: calls.append(1) or real(**kw))
    return calls


@pytest.mark.slow  # many random syncs
def test_the_matrix_agrees_with_exact_knn_through_incremental_syncs(notes, monkeypatch):
    files = notes.sync(add=3000)
    vectors = VectorMatrix()
    full = loads(monkeypatch, notes.store)
    vectors.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True)
    agrees(vectors, notes)
    assert vectors.nbytes == 3000 * (8 + DIMS * 4)  # spare rows are not counted
    # Vectors added, files replaced (new ids) and removed, the highest ids among them so
    # that SQLite hands the same ids out again; chunks stored without vectors, then filled.
    for round_ in range(4):
        doomed = files[-3:] + files[round_ * 7:round_ * 7 + 5]
        files = [f for f in files if f not in doomed] + notes.sync(
            add=60, remove=doomed[:4], replace=doomed[4:] + files[100:102],
            unembedded=20 if round_ == 1 else 0, fill=round_ == 2)
        files = files + doomed[4:]
        agrees(vectors, notes)
    assert notes.store.counts()["embedded"] == vectors._count
    assert full == [1]  # caught up in place each time, never read whole again


def test_the_log_records_net_changes(notes):
    (first,) = notes.sync(add=10)
    since = notes.store.generation()
    notes.sync(replace=[first])  # the same ids come back: SQLite reuses the highest rowid
    changes = notes.store.vector_changes(since)
    assert sorted(changes.added) == sorted(c for c, _ in notes.store.all_vectors())
    assert changes.removed == list(range(6, 11))
    assert notes.store.vector_changes(notes.store.generation()).added == []


def test_a_catch_up_that_fails_half_way_is_never_scanned(notes, monkeypatch):
    notes.sync(add=500)
    vectors = VectorMatrix()
    vectors.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True)
    notes.sync(add=400, remove=["memory/f1.md"])  # more rows than spare: the matrix grows
    real_grow = matrix_module._grow

    def crash_once(*args):
        monkeypatch.setattr(matrix_module, "_grow", real_grow)
        raise MemoryError("simulated crash while growing the matrix")

    monkeypatch.setattr(matrix_module, "_grow", crash_once)
    monkeypatch.setattr(vectors, "_start_background", lambda store: None)
    qvec = unit(notes.rng, 1)[0]
    # Holes were already filled when it failed: the torn matrix has no stamp and no search
    # scans it (vec0 answers) ...
    assert vectors.nearest(notes.store, qvec, 10, wait=False) is None
    assert vectors.generation is None
    assert vectors.nearest(notes.store, qvec, 10, wait=False) is None
    # ... until it is loaded afresh from the store of record, in the background.
    monkeypatch.undo()
    assert vectors.nearest(notes.store, qvec, 10, wait=False) is None
    vectors.wait_loaded(10)
    agrees(vectors, notes)


def test_a_commit_the_log_missed_loads_the_matrix_afresh(notes, monkeypatch):
    notes.sync(add=200)
    vectors, stale = VectorMatrix(), VectorMatrix()
    for matrix in (vectors, stale):
        matrix.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True)
    full = loads(monkeypatch, notes.store)
    # A writer that does not keep the log (an older clawd) commits a vector.
    store = notes.store
    with store.lock, store.transaction():
        store.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                           "WHERE key = 'generation'")
        store.conn.execute("INSERT INTO chunks(path, source, start_line, end_line, heading, "
                           "text, hash, embedding) VALUES ('x.md', 'memory', 1, 1, '', 'x', "
                           "'h', ?)", (unit(notes.rng, 1)[0].tobytes(),))
    assert store.vector_changes(vectors.generation) is None
    qvec = unit(notes.rng, 1)[0]
    assert vectors.nearest(store, qvec, 10, wait=False) is None
    vectors.wait_loaded(10)
    assert full == [1] and vectors._count == 201
    # The next sync that keeps the log starts it again from there.
    notes.sync(add=10)
    assert vectors.nearest(store, qvec, 10, wait=False) is not None and full == [1]
    assert vectors._count == 211
    # A copy from before the missed commit cannot catch up across it.
    assert stale.nearest(store, qvec, 10, wait=False) is None
    stale.wait_loaded(10)
    assert full == [1, 1]
    agrees(stale, notes)


def test_a_matrix_older_than_the_log_is_loaded_afresh(notes, monkeypatch):
    notes.sync(add=50)
    vectors = VectorMatrix()
    vectors.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True)
    monkeypatch.setattr(vector_log_module, "LOG_GENERATIONS", 3)
    for _ in range(4):
        notes.sync(add=1)
    assert notes.store.vector_changes(vectors.generation) is None
    rows = notes.store.conn.execute("SELECT count(DISTINCT generation) FROM vector_log")
    assert rows.fetchall()[0][0] == 3
    assert vectors.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True) is not None
    agrees(vectors, notes)


def test_a_sync_that_dies_before_its_commit_leaves_the_matrix_in_step(notes):
    notes.sync(add=100)
    vectors = VectorMatrix()
    vectors.nearest(notes.store, unit(notes.rng, 1)[0], 10, wait=True)
    generation = notes.store.generation()
    store = notes.store
    with pytest.raises(RuntimeError), store.lock, store.transaction():
        store.bump_generation()
        store.delete_file("memory/f1.md")
        raise RuntimeError("the process dies here")
    assert store.generation() == generation
    assert store.conn.execute("SELECT count(*) FROM vector_log WHERE generation > ?",
                              (int(generation),)).fetchall()[0][0] == 0
    agrees(vectors, notes)


def test_a_keyword_only_index_then_its_first_vectors(tmp_path, monkeypatch):
    notes = Notes(tmp_path / "index.sqlite", reset=False)
    notes.sync(unembedded=20)  # no embedder yet: chunks without vectors, no dimensions
    vectors = VectorMatrix()
    full = loads(monkeypatch, notes.store)
    qvec = unit(np.random.default_rng(3), 1)[0]
    assert vectors.nearest(notes.store, qvec, 10, wait=True) == []
    notes.sync(add=30, fill=True)  # caught up from the log into a matrix of no width
    assert vectors.nearest(notes.store, qvec, 10, wait=False) == notes.exact(qvec)
    assert vectors._count == 50 and full == [1]
    notes.store.close()
