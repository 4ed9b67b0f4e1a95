"""Time and diversity in search: temporal decay of dated notes, MMR, their settings."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from clawd.config import MemorySearch
from clawd.memory.diversity import mmr
from clawd.memory.recency import dated, decay, factor
from clawd.memory.search import Scored
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write

TODAY = date(2026, 11, 20)
FACT = "- The office wifi password is tern-harbour-42\n"


@pytest.mark.parametrize("path,expected", [
    ("memory/2026-11-20.md", date(2026, 11, 20)),
    ("memory/2026-11-20-trip-planning.md", date(2026, 11, 20)),
    ("MEMORY.md", None),
    ("memory/ideas.md", None),
    ("memory/2026-13-40.md", None),  # not a real date
    ("memory/archive/2026-11-20.md", None),
    ("notes/2026-11-20.md", None),
])
def test_dated_notes_by_name(path, expected):
    assert dated(path) == expected


def test_decay_factor():
    assert factor(0, 30) == 1.0
    assert factor(30, 30) == pytest.approx(0.5)
    assert factor(90, 30) == pytest.approx(0.125)
    assert factor(-5, 30) == 1.0  # a note dated in the future counts as today's


def test_decay_puts_the_newer_of_equal_notes_first_and_leaves_undated_alone():
    paths = {1: "memory/2026-10-21.md", 2: "memory/2026-11-19-call.md", 3: "MEMORY.md",
             4: "memory/ideas.md"}
    ranked = [Scored(c, 0.8, 0.8, 0.8) for c in (1, 2, 3, 4)]
    out = decay(ranked, paths.get, TODAY, 30)
    by_id = {s.chunk_id: s.score for s in out}
    assert by_id[3] == by_id[4] == 0.8
    assert by_id[1] == pytest.approx(0.8 * 0.5)  # 30 days old
    assert by_id[2] == pytest.approx(0.8 * 0.5 ** (1 / 30))
    assert [s.chunk_id for s in out] == [3, 4, 2, 1]


def make(root: Path, tmp_path: Path, **query):
    cfg = settings(sync={"watch": False}, fallback="none", query=query)
    return open_file_index("main", root, cfg, tmp_path / "state", embedder=FakeEmbedder(),
                           env={}, today=lambda: TODAY)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel in ("MEMORY.md", "memory/wifi.md", "memory/2026-08-22.md", "memory/2026-11-18.md",
                "memory/2026-10-21-office.md"):
        write(root, rel, "# Notes\n\n" + FACT)
    return root


def scores(result) -> dict[str, float]:
    return {r["path"]: r["score"] for r in result["results"]}


def test_index_decays_dated_notes_only(ws, tmp_path):
    plain = make(ws, tmp_path / "a")
    timed = make(ws, tmp_path / "b", temporalDecay={"enabled": True, "halfLifeDays": 30})
    before = scores(plain.search("office wifi password", max_results=10))
    found = timed.search("office wifi password", max_results=10)
    after = scores(found)
    assert len(set(before.values())) == 1  # the same text: the same relevance everywhere
    base = before["MEMORY.md"]
    assert after["MEMORY.md"] == after["memory/wifi.md"] == base
    assert after["memory/2026-11-18.md"] == pytest.approx(base * 0.5 ** (2 / 30), abs=1e-4)
    assert after["memory/2026-10-21-office.md"] == pytest.approx(base * 0.5, abs=1e-4)
    # minScore judged relevance before decay: 90 days old (an eighth of the score) is kept
    assert after["memory/2026-08-22.md"] == pytest.approx(base * 0.125, abs=1e-4)
    dated_order = [r["path"] for r in found["results"] if dated(r["path"])]
    assert dated_order == ["memory/2026-11-18.md", "memory/2026-10-21-office.md",
                           "memory/2026-08-22.md"]
    assert [r["path"] for r in found["results"]][:2] == ["MEMORY.md", "memory/wifi.md"]
    plain.close()
    timed.close()


def test_decay_is_off_by_default(ws, tmp_path):
    index = make(ws, tmp_path)
    assert not index.settings.query.temporal_decay.enabled
    assert len(set(scores(index.search("office wifi password", max_results=10)).values())) == 1
    index.close()


def test_mmr_prefers_a_different_note_to_a_near_duplicate():
    a = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    near = np.array([0.99, 0.14, 0.0], dtype=np.float32)
    other = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    ranked = [Scored(1, 0.9, 0.9, 0.9), Scored(2, 0.88, 0.88, 0.88), Scored(3, 0.7, 0.7, 0.7)]
    vectors = {1: a, 2: near, 3: other}
    assert [s.chunk_id for s in mmr(ranked, vectors, 0.7, 2)] == [1, 3]
    assert [s.chunk_id for s in mmr(ranked, vectors, 1.0, 2)] == [1, 2]  # plain ranking
    # scores are not changed; a chunk without a vector is similar to nothing
    assert mmr(ranked, {1: a}, 0.7, 3) == ranked


def test_index_mmr_drops_a_repeated_fact_for_another_note(tmp_path):
    root = tmp_path / "ws"
    repeat = "# Log\n\n- The backup server heron runs the nightly backups at 02:00\n"
    for day in ("2026-11-10", "2026-11-12", "2026-11-14"):
        write(root, f"memory/{day}.md", repeat)
    write(root, "memory/laptop.md",
          "# Laptop\n\n- The laptop backups run nightly to an external disk\n")
    query = "nightly backups server"
    plain = make(root, tmp_path / "a").search(query, max_results=2, min_score=0.0)
    diverse = make(root, tmp_path / "b", mmr={"enabled": True, "lambda": 0.5}).search(
        query, max_results=2, min_score=0.0)
    assert [r["path"] for r in plain["results"]] == ["memory/2026-11-10.md",
                                                    "memory/2026-11-12.md"]
    assert [r["path"] for r in diverse["results"]] == ["memory/2026-11-10.md",
                                                      "memory/laptop.md"]


def test_settings_of_time_and_diversity():
    query = MemorySearch().query
    assert (query.temporal_decay.enabled, query.temporal_decay.half_life_days) == (False, 30)
    assert (query.mmr.enabled, query.mmr.lambda_) == (False, 0.7)
    parsed = MemorySearch.model_validate({"query": {
        "temporalDecay": {"enabled": True, "halfLifeDays": 7},
        "mmr": {"enabled": True, "lambda": 0.5}}}).query
    assert (parsed.temporal_decay.half_life_days, parsed.mmr.lambda_) == (7, 0.5)
    for bad in ({"temporalDecay": {"halfLifeDays": 0}}, {"temporalDecay": {"halfLifeDays": "30"}},
                {"temporalDecay": {"enabled": "yes"}}, {"temporalDecay": {"halfLife": 30}},
                {"mmr": {"lambda": 1.5}}, {"mmr": {"lambda": -0.1}}, {"mmr": {"on": True}}):
        with pytest.raises(ValidationError):
            MemorySearch.model_validate({"query": bad})


def test_mmr_without_embeddings_keeps_the_keyword_ranking(tmp_path):
    root = tmp_path / "ws"
    for day in ("2026-11-10", "2026-11-12"):
        write(root, f"memory/{day}.md", "# Log\n\n- The nightly backups run on heron\n")
    write(root, "memory/laptop.md", "# Laptop\n\n- The laptop backups go to a disk\n")
    cfg = settings(sync={"watch": False}, provider="openai", fallback="none",
                   query={"mmr": {"enabled": True, "lambda": 0.1}})
    index = open_file_index("main", root, cfg, tmp_path / "state", env={})  # no key: keyword-only
    found = index.search("nightly backups heron", max_results=2, min_score=0.0)
    assert found["mode"] == "keyword"
    assert [r["path"] for r in found["results"]] == ["memory/2026-11-10.md",
                                                    "memory/2026-11-12.md"]
    index.close()
