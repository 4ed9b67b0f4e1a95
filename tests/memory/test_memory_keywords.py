"""Line evidence: a chunk holding the query's terms together on one line outranks one that
scatters them over lines, terms are weighed by how rare they are among lines, and a question
that ends a chunk lends it only half its match (the answer is in the next chunk). The keyword
stage stays bounded on a large index: a query of common words only ranks the newest matches,
and a rare token is still found."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawd.memory import keywords
from clawd.memory import search as policy
from clawd.memory.candidates import keyword_hits
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write


def term(text: str) -> keywords.Term:
    return keywords.Term(text, (text,), 1.0, 1)


def line(text: str) -> keywords.ChunkLine:
    return keywords.ChunkLine(frozenset(re.findall(r"\w+", text.lower())), text.endswith("?"))


def test_terms_on_one_line_beat_terms_scattered_over_lines():
    terms = [term("rome"), term("trip")]
    evidence = keywords.line_evidence(terms, {
        1: [line("Jon: took a trip to Rome"), line("Gina: nice")],
        2: [line("Jon: Rome is lovely"), line("Gina: my trip was long")],
    })
    assert evidence[1] == pytest.approx(1.0)
    assert evidence[2] == pytest.approx(0.5)


def test_a_term_on_every_chunk_still_tells_lines_apart():
    # "jon" is in every chunk (its chunk-level IDF is about 0) but on few of their lines
    terms = [term("jon"), term("rome")]
    evidence = keywords.line_evidence(terms, {
        1: [line("jon: I saw rome"), line("gina: wow"), line("gina: when")],
        2: [line("gina: rome is far"), line("jon: yes"), line("gina: ok")],
    })
    assert evidence[1] == pytest.approx(1.0)
    assert evidence[2] < 0.75


def test_a_question_ending_the_chunk_counts_half():
    terms = [term("pose"), term("hold")]
    ends = [line("Tim: how long do you hold that pose?")]
    answered = [line("Tim: how long do you hold that pose?"), line("John: 30 seconds")]
    evidence = keywords.line_evidence(terms, {1: ends, 2: answered})
    assert evidence[1] == pytest.approx(keywords.TRAILING_QUESTION * evidence[2])
    assert evidence[2] == pytest.approx(1.0)


def test_no_terms_no_evidence():
    assert keywords.line_evidence([], {1: [line("anything")]}) == {1: 0.0}


def test_line_evidence_is_half_of_the_text_score():
    merged = policy.merge_hybrid({}, {1: 9.0, 2: 3.0}, 0.0, 1.0, lines={1: 0.0, 2: 1.0})
    by_id = {s.chunk_id: s.text for s in merged}
    assert by_id == {1: pytest.approx(policy.LINE_SHARE), 2: pytest.approx(policy.LINE_SHARE)}
    assert {s.chunk_id: s.text for s in policy.merge_hybrid({}, {1: 9.0, 2: 3.0}, 0.0, 1.0)} \
        == {1: 1.0, 2: 0.0}


SCATTERED = """# Travel chat

Jon: I keep thinking about Rome.
Gina: How was the business trip?
"""
TOGETHER = """# Catching up

Gina: How was your week?
Jon: Took a short trip to Rome.
"""


@pytest.fixture
def index(tmp_path: Path):
    write(tmp_path / "ws", "memory/scattered.md", SCATTERED)
    write(tmp_path / "ws", "memory/together.md", TOGETHER)
    write(tmp_path / "ws", "memory/other.md", "# Plans\n\nGina: a trip to the coast, maybe.\n")
    for number, topic in enumerate(["the garden", "tax forms", "a new bike", "soup", "chess"]):
        write(tmp_path / "ws", f"memory/filler-{number}.md", f"# Notes\n\nGina: about {topic}.\n")
    idx = open_file_index("main", tmp_path / "ws", settings(sync={"watch": False}),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    idx.sync()
    yield idx
    idx.close()


def test_the_line_holding_the_query_ranks_first(index, monkeypatch):
    query = "Jon's trip to Rome"
    found = index.search(query, mode="text", min_score=0)["results"]
    assert found[0]["path"] == "memory/together.md"
    assert found[0]["score"] > found[1]["score"]
    # BM25 and coverage alone cannot tell the two apart
    monkeypatch.setattr(policy, "LINE_SHARE", 0.0)
    found = index.search(query, mode="text", min_score=0)["results"]
    assert found[0]["score"] == found[1]["score"]


def test_only_common_words_rank_the_newest_matches_only():
    docs = {"team": 60_000, "meeting": 30_000, "roadmap": 300, "zx": 90, "4471": 2}

    def stats(tokens):
        return 100_000, {t: docs.get(t, 0) for t in tokens}

    common = keywords.plan(["team", "meeting"], [], str.split, stats)
    assert common.match == '"meeting"' and common.newest == keywords.POSTINGS_BUDGET
    assert keywords.plan(["team", "roadmap"], [], str.split, stats).newest is None
    # a phrase walks the posting lists of its words too
    phrase = keywords.plan(["zx", "4471"], [["team", "meeting"]], str.split, stats)
    assert phrase.newest == keywords.POSTINGS_BUDGET
    assert keywords.plan(["zx", "4471"], [["zx", "4471"]], str.split, stats).newest is None
    # on a small index nothing is bounded
    assert keywords.plan(["team"], [], str.split, lambda t: (100, {"team": 90})).newest is None


def test_compounds_leave_clitics_out():
    assert policy.compounds("What's Nate's favorite ZX-4471 don't") == [["zx", "4471"]]
    assert policy.compounds("state-of-the-art") == [["state", "of", "the", "art"]]


@pytest.fixture
def crowded(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(keywords, "POSTINGS_BUDGET", 4)
    write(tmp_path / "ws", "memory/00-old.md",
          "# Old\n\nThe team meeting about ticket OPS-1182.\n")
    for number in range(1, 10):
        write(tmp_path / "ws", f"memory/{number:02d}.md",
              f"# Day {number}\n\nThe team meeting ran long, item {number}.\n")
    idx = open_file_index("main", tmp_path / "ws", settings(sync={"watch": False}),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    idx.sync()
    yield idx
    idx.close()


def test_a_common_query_ranks_the_newest_matches_and_a_rare_token_is_kept(crowded):
    ids = [row[0] for row in crowded.store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    found = crowded.store.fts_search('"team"', 24, newest=4)
    assert sorted(c for c, _ in found) == ids[-4:]
    assert len(crowded.store.fts_search('"team"', 24)) == len(ids)
    hits, _, _ = keyword_hits(crowded.store, "team meeting", 24)
    assert len(hits) == 4
    hits, _, _ = keyword_hits(crowded.store, "OPS-1182 team meeting", 24)
    paths = {row.path for row in crowded.store.get_chunks(hits).values()}
    assert "memory/00-old.md" in paths
