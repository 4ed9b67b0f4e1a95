"""Section parts end to end: a paraphrase of one section of a daily log finds it with the
real local model while off-topic queries find nothing (tests/data/memory_sections.json); an
index written before parts is rebuilt once, from the embedding cache; the vectors of a note's
parts go when the note changes or is deleted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clawd.memory import chunk_parts
from clawd.memory.local import LocalEmbedder
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write

DATA = json.loads((Path(__file__).parents[1] / "data" / "memory_sections.json").read_text())
DAY = DATA["notes"][0]  # "## Kitchen" and "## Car"
CAR = "why was the dashboard warning lamp on"  # the check-engine light, a loose fuel cap


def index_of(root: Path, embedder, **overrides):
    overrides.setdefault("sync", {"watch": False})
    overrides.setdefault("fallback", "none")
    return open_file_index("main", root / "ws", settings(**overrides), root / "state",
                           embedder=embedder, env={})


def write_notes(root: Path) -> None:
    for note in DATA["notes"]:
        write(root / "ws", note["path"], "\n".join(note["lines"]) + "\n")


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder()


@pytest.fixture(scope="module")
def index(tmp_path_factory, local):
    root = tmp_path_factory.mktemp("sections")
    write_notes(root)
    idx = index_of(root, local)
    idx.sync()
    yield idx
    idx.close()


def found(idx, case) -> int | None:
    """The rank of the case's note among the results at the defaults, None if absent."""
    note = DATA["notes"][case["note"]]
    line = next(i for i, t in enumerate(note["lines"], 1) if case["target"] in t)
    results = idx.search(case["query"])["results"]
    return next((rank for rank, r in enumerate(results) if r["path"] == note["path"]
                 and r["startLine"] <= line <= r["endLine"]), None)


def test_a_paraphrase_of_one_section_finds_the_note_and_off_topic_finds_nothing(index):
    results = index.search(CAR)["results"]
    assert results and results[0]["path"] == DAY["path"]
    assert index.search("knitting pattern for a scarf")["results"] == []


def test_the_same_note_as_one_blur_was_missed(tmp_path, local, monkeypatch):
    monkeypatch.setattr(chunk_parts, "SECTION_PARTS", False)
    write(tmp_path / "ws", DAY["path"], "\n".join(DAY["lines"]) + "\n")
    idx = index_of(tmp_path, local)
    idx.sync()
    assert idx.search(CAR)["results"] == []
    idx.close()


def test_the_set_at_defaults(index):
    ranks = [found(index, case) for case in DATA["cases"]]
    assert sum(r is not None and r < 5 for r in ranks) >= 28  # 30 of 36 when written
    assert sum(r == 0 for r in ranks) >= 27  # 29
    for query in DATA["off_topic"]:
        assert index.search(query)["results"] == [], query


def parts_of(idx, path: str) -> list[int]:
    """How many part vectors each chunk of ``path`` has stored (1: the whole alone)."""
    rows = idx.store.conn.execute("SELECT segments FROM chunks WHERE path = ?", (path,))
    return [len(blob) // (4 * idx.store.dims) if blob else 1 for (blob,) in rows]


def test_an_index_from_before_parts_is_rebuilt_once_from_the_cache(tmp_path, monkeypatch):
    write_notes(tmp_path)
    write(tmp_path / "ws", "MEMORY.md", "# Memory\n\n- The gateway runs on the Mac Studio.\n")
    monkeypatch.setattr(chunk_parts, "SECTION_PARTS", False)
    monkeypatch.setattr(chunk_parts, "ITEM_PARTS", False)  # a rule of its own (test_memory_parts)
    before = index_of(tmp_path, FakeEmbedder(segment_tokens=96))
    before.sync()
    # as the previous version of clawd wrote it
    before.store.set_meta("chunking", json.dumps({"tokens": 400, "overlap": 80, "version": 2}))
    assert parts_of(before, DAY["path"]) == [1]
    before.close()

    monkeypatch.setattr(chunk_parts, "SECTION_PARTS", True)
    fake = FakeEmbedder(segment_tokens=96)
    after = index_of(tmp_path, fake)
    summary = after.sync()
    assert summary["rebuilt"] and summary["files"] == len(DATA["notes"]) + 1
    assert parts_of(after, DAY["path"]) == [2]
    # only the new parts' texts were embedded: the rest came from the embedding cache
    assert summary["cached"] >= 1 and len(fake.embedded) == summary["embedded"]
    assert not any("Mac Studio" in text for text in fake.embedded)
    assert sum(text.startswith("2026-03-02 > ") for text in fake.embedded) == 2
    assert after.sync()["rebuilt"] is False
    again = after.sync(force=True)  # every part is in the embedding cache now
    assert again["rebuilt"] and again["embedded"] == 0 and again["cached"] > 0
    counts = after.status()
    assert counts["embeddedChunks"] == counts["chunks"] == len(DATA["notes"]) + 1
    assert after.search("check-engine fuel cap")["results"][0]["path"] == DAY["path"]
    after.close()


def test_part_vectors_go_with_a_changed_or_deleted_note(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_parts, "ITEM_PARTS", False)  # sections only: counts stay readable
    path = write(tmp_path / "ws", DAY["path"], "\n".join(DAY["lines"]) + "\n")
    fake = FakeEmbedder(segment_tokens=96)
    idx = index_of(tmp_path, fake)
    idx.sync()
    assert parts_of(idx, DAY["path"]) == [2]
    car = idx.search("check-engine fuel cap", mode="vector", min_score=0.3)["results"]
    assert [r["path"] for r in car] == [DAY["path"]]

    path.write_text("\n".join(DAY["lines"][:5]) + "\n")  # the car section removed
    idx.mark_dirty()
    idx.sync()
    assert parts_of(idx, DAY["path"]) == [1]
    (blob,) = idx.store.conn.execute("SELECT embedding FROM chunks WHERE path = ?",
                                     (DAY["path"],)).fetchone()
    kitchen = fake.embed_documents(["2026-03-02 > Kitchen\n" + "\n".join(DAY["lines"][3:5])])
    assert np.allclose(np.frombuffer(blob, dtype=np.float32), kitchen[0], atol=1e-6)
    assert idx.search("check-engine fuel cap", mode="vector", min_score=0.3)["results"] == []

    path.unlink()
    idx.mark_dirty()
    idx.sync()
    assert parts_of(idx, DAY["path"]) == []
    assert idx.store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    if idx.store.vec_available:
        assert idx.store.conn.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == 0
    idx.close()
