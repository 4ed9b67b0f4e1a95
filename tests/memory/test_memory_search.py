"""The hybrid policy: merge arithmetic, normalisation, calibration, queries, snippets."""

from __future__ import annotations

import itertools
import math

import pytest

from clawd.memory.search import (
    calibrate,
    combine_cosines,
    fts_query,
    merge_hybrid,
    min_max,
    query_terms,
    select,
    snippet,
)


def scores(merged):
    return {s.chunk_id: round(s.score, 6) for s in merged}


def test_merge_weights_normalised_scores():
    # text arrives as -bm25 (higher = better): 9 is the best keyword hit, 3 the worst
    merged = merge_hybrid({1: 0.9, 2: 0.5}, {2: 9.0, 3: 3.0}, 0.7, 0.3)
    assert scores(merged) == {1: 0.63, 2: 0.65, 3: 0.0}
    assert [s.chunk_id for s in merged] == [2, 1, 3]
    by_id = {s.chunk_id: s for s in merged}
    assert (by_id[2].vector, by_id[2].text) == (0.5, 1.0)


def test_best_keyword_match_ranks_first_not_last():
    # the sign trap: a larger -bm25 must give a larger text score
    merged = merge_hybrid({}, {10: 12.5, 11: 2.0, 12: 7.0}, 0.0, 1.0)
    assert [s.chunk_id for s in merged] == [10, 12, 11]
    assert merged[0].score == 1.0 and merged[-1].score == 0.0


@pytest.mark.parametrize("vw,tw,expected", [
    (0.7, 0.3, {1: 0.7, 2: 0.3}),
    (7, 3, {1: 0.7, 2: 0.3}),   # weights are normalised to sum 1
    (1.0, 0.0, {1: 1.0, 2: 0.0}),  # keyword half unavailable
    (0.0, 1.0, {1: 0.0, 2: 1.0}),  # vector half unavailable
    (0.0, 0.0, {1: 0.5, 2: 0.5}),
])
def test_merge_weights_table(vw, tw, expected):
    assert scores(merge_hybrid({1: 1.0}, {2: 4.0}, vw, tw)) == expected


def test_min_max_edges():
    assert min_max({}) == {}
    assert min_max({1: 3.0, 2: 3.0}) == {1: 1.0, 2: 1.0}
    assert min_max({1: 2.0, 2: 4.0, 3: 3.0}) == {1: 0.0, 2: 1.0, 3: 0.5}


@pytest.mark.parametrize("cosine,span,expected", [
    (0.1, (0.1, 0.5), 0.0), (0.05, (0.1, 0.5), 0.0), (0.3, (0.1, 0.5), math.tanh(0.5)),
    (0.5, (0.1, 0.5), math.tanh(1.0)), (0.4, (0.0, 1.0), math.tanh(0.4)),
    (-0.2, (0.0, 1.0), 0.0), (0.5, (0.5, 0.5), math.tanh(0.5)),
])
def test_calibrate(cosine, span, expected):
    assert calibrate(cosine, span) == pytest.approx(expected)


def test_calibrate_is_strictly_increasing_and_below_one():
    values = [calibrate(c / 100, (0.1, 0.5)) for c in range(11, 101)]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert values[-1] < 1.0


def test_paraphrase_clears_the_default_threshold_on_its_vector_alone():
    # a related note at cosine 0.45 with no shared word, defaults 0.7/0.3 and minScore 0.35
    v = calibrate(0.45, (0.1, 0.5))
    merged = merge_hybrid({1: v}, {}, 0.7, 0.3)
    assert select(merged, 0.35, 6)[0].chunk_id == 1
    unrelated = merge_hybrid({1: calibrate(0.15, (0.1, 0.5))}, {}, 0.7, 0.3)
    assert select(unrelated, 0.35, 6) == []


def test_select_threshold_and_limit():
    merged = merge_hybrid({i: i / 10 for i in range(1, 10)}, {}, 1.0, 0.0)
    assert [s.chunk_id for s in select(merged, 0.35, 3)] == [9, 8, 7]
    assert [s.chunk_id for s in select(merged, 0.75, 10)] == [9, 8]


def test_combine_cosines_takes_the_better_view():
    assert combine_cosines(0.2, 0.6) == 0.6
    assert combine_cosines(0.5, 0.3) == 0.5


@pytest.mark.parametrize("query,terms", [
    ("When did Caroline go to the LGBTQ support group?",
     ["caroline", "go", "lgbtq", "support", "group"]),
    ("What's Nate's favorite genre?", ["nate", "favorite", "genre"]),
    ("what is it", ["what", "is", "it"]),  # only stop words: keep them all
    ("May 3, 2023", ["may", "3", "2023"]),
])
def test_query_terms(query, terms):
    assert query_terms(query) == terms


def test_fts_query_adds_phrases_for_identifiers():
    assert fts_query("OPENAI_API_KEY missing") == \
        '"openai" OR "api" OR "key" OR "missing" OR "openai api key"'
    assert fts_query("memorySearch.query.hybrid") == \
        '"memorysearch" OR "query" OR "hybrid" OR "memorysearch query hybrid"'
    assert fts_query("a828e60") == '"a828e60"'
    assert fts_query("  ?? ") is None
    assert '"' not in fts_query('say "hi" there').replace('"say"', "").replace(
        '"hi"', "").replace('"there"', "").replace(" OR ", "")


def test_snippet_is_capped_and_centred_on_matching_lines():
    lines = [f"filler line number {i} with nothing much" for i in range(60)]
    lines[40] = "the gateway runs on the Mac Studio"
    text = "\n".join(lines)
    out = snippet(text, ["gateway", "studio"])
    assert len(out) <= 700
    assert "gateway runs on the Mac Studio" in out
    assert snippet("short", ["x"]) == "short"
    long_line = "word " * 400
    cut = snippet(long_line)
    assert len(cut) <= 700 and cut.endswith("…")
