"""Exact tokens at default settings: a rare identifier, name, number, hyphenated code or CJK
word comes back on its keyword evidence alone, whatever the vector half says; a query that
shares nothing with the notes still returns nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from clawd.memory import keywords
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write

DAILY = """# 2026-03-14

- Walked to the farmers market, bought apples and sourdough.
- My sister Greta called about the birthday party; the order code is ZX-4471.
- Finished reading the chapter on distributed consensus.
- Opened ticket OPS-1182 for the flaky deploy pipeline.
- Set OPENAI_API_KEY in the staging env file.
- 东京的会议改到下周三。
- Ran 5k in the park, knee felt fine.
"""


class BlindEmbedder(FakeEmbedder):
    """Vectors that carry no meaning: every text gets its own random direction, so the
    vector half scores every chunk near zero."""

    provider = "blind"

    def _vector(self, text: str) -> np.ndarray:
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        vec = np.random.default_rng(seed).standard_normal(self.dims).astype(np.float32)
        return vec / np.linalg.norm(vec)


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws, "memory/2026-03-14.md", DAILY)
    for i in range(12):
        write(ws, f"memory/2026-02-{i + 1:02d}.md",
              f"# Notes {i}\n\n- Planted tomatoes in row {i}.\n- Cooked pasta with garlic.\n"
              "- Reviewed the quarterly roadmap with the team.\n")
    return ws


@pytest.fixture(params=["blind", "keyword-only"])
def index(request, tmp_path: Path):
    embedder = BlindEmbedder() if request.param == "blind" else None
    env = {} if embedder else {"CLAWD_TEST": "1"}
    cfg = settings(sync={"watch": False}) if embedder else \
        settings(sync={"watch": False}, provider="local", local={"modelPath": str(tmp_path)},
                 fallback="none")
    idx = open_file_index("main", workspace(tmp_path), cfg, tmp_path / "state", embedder=embedder,
                          env=env)
    idx.sync()
    yield idx
    idx.close()


@pytest.mark.parametrize("query", ["ZX-4471", "zx-4471", "4471", "Greta", "OPS-1182", "1182",
                                   "OPENAI_API_KEY", "会议", "东京", "下周三"])
def test_exact_token_found_at_defaults(index, query):
    results = index.search(query)["results"]  # default minScore 0.35, weights 0.7 / 0.3
    assert results, query
    assert results[0]["path"] == "memory/2026-03-14.md"
    assert results[0]["score"] >= 0.35


@pytest.mark.parametrize("query", ["quantum chromodynamics lattice",
                                   "recipe for chocolate souffle", "ZX-9999", "京都"])
def test_off_topic_returns_nothing(index, query):
    assert index.search(query)["results"] == []


def test_blind_vectors_alone_would_cut_the_identifier(tmp_path: Path):
    # the weighted mix by itself: keyword evidence is capped at textWeight 0.3 < minScore
    idx = open_file_index("main", workspace(tmp_path), settings(sync={"watch": False}),
                          tmp_path / "state", embedder=BlindEmbedder(), env={})
    idx.sync()
    hit = idx.search("ZX-4471", min_score=0)["results"][0]
    assert hit["path"] == "memory/2026-03-14.md" and hit["score"] == pytest.approx(0.6)
    idx.close()


def test_fts_text_splits_cjk_only():
    assert keywords.fts_text("东京的会议 at 3pm") == " 东  京  的  会  议  at 3pm"
    assert keywords.fts_text("plain text") == "plain text"


def test_coverage_is_idf_weighted_and_absolute():
    rare = keywords.Term("greta", ("greta",), keywords.idf(1, 1000), 1)
    common = keywords.Term("party", ("parti",), keywords.idf(400, 1000), 400)
    assert keywords.coverage([rare, common], {"greta", "parti"}) == 1.0
    only_rare = keywords.coverage([rare, common], {"greta"})
    only_common = keywords.coverage([rare, common], {"parti"})
    assert only_rare > 0.8 and only_common < 0.2
    assert keywords.alone(1.0) > 0.35 > keywords.alone(only_common)


def test_plan_leaves_very_common_terms_out_of_the_match():
    docs = {"team": 60_000, "meeting": 30_000, "roadmap": 300}

    def stats(tokens):
        return 100_000, {t: docs.get(t, 0) for t in tokens}

    plan = keywords.plan(["team", "roadmap"], [], str.split, stats)
    assert plan.match == '"roadmap"'
    assert [t.text for t in plan.terms] == ["team", "roadmap"]  # both still weigh coverage
    assert keywords.plan(["team", "meeting"], [], str.split, stats).match == '"meeting"'
    # on a small index every term is asked for
    small = keywords.plan(["team", "roadmap"], [], str.split,
                          lambda tokens: (100, {"team": 60, "roadmap": 3}))
    assert small.match == '"team" OR "roadmap"'
