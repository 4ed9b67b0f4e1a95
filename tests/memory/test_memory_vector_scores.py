"""The vector scores of a search's candidates, read in one query: each chunk's score is its
calibrated cosine, raised by its best segment's, exactly as scored one chunk at a time;
chunks without a vector get none, and a chunk without segment vectors keeps its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from clawd.memory.candidates import vector_scores
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write


def _one_by_one(store, embedders, qvec, ids) -> dict[int, float]:
    scores = {}
    for chunk_id in ids:
        scores.update(vector_scores(store, embedders, qvec, [chunk_id]))
    return scores


def test_scores_read_at_once_are_those_of_each_chunk(tmp_path: Path):
    embedder = FakeEmbedder(segment_tokens=6)
    long = "\n".join(f"line {n} about the harbour and some boats number {n}" for n in range(12))
    write(tmp_path / "ws", "memory/long.md", f"# Harbour\n\n{long}\n")
    write(tmp_path / "ws", "memory/short.md", "# Boats\n\nboats\n")
    write(tmp_path / "ws", "memory/other.md", "# Other\n\nnothing to see\n")
    idx = open_file_index("main", tmp_path / "ws", settings(sync={"watch": False}),
                          tmp_path / "state", embedder=embedder, env={})
    try:
        idx.sync()
        store = idx.store
        ids = [row[0] for row in store.conn.execute("SELECT id FROM chunks ORDER BY id")]
        segmented = [row[0] for row in store.conn.execute(
            "SELECT id FROM chunks WHERE segments IS NOT NULL")]
        assert segmented and len(segmented) < len(ids)  # both kinds are scored
        store.conn.execute("UPDATE chunks SET embedding = NULL, segments = NULL WHERE id = ?",
                           (ids[-1],))
        idx.search("harbour boats")  # the embedder is active
        qvec = np.asarray(embedder.embed_query("harbour boats"), dtype=np.float32)
        wanted = ids + [max(ids) + 100]  # a chunk gone meanwhile
        got = vector_scores(store, idx.embedders, qvec, wanted)
        expected = _one_by_one(store, idx.embedders, qvec, wanted)
        assert set(got) == set(expected) == set(ids[:-1])
        assert got == expected
        assert vector_scores(store, idx.embedders, qvec, []) == {}
        assert vector_scores(store, idx.embedders, qvec, [ids[-1]]) == {}
    finally:
        idx.close()
