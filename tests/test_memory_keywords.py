"""Line evidence: a chunk holding the query's terms together on one line outranks one that
scatters them over lines, terms are weighed by how rare they are among lines, and a question
that ends a chunk lends it only half its match (the answer is in the next chunk)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from memory_fakes import FakeEmbedder, settings, write

from clawd.memory import keywords
from clawd.memory import search as policy
from clawd.memory.index import open_index


def term(text: str) -> keywords.Term:
    return keywords.Term(text, (text,), 1.0, 1)


def line(text: str) -> keywords.Line:
    return keywords.line(text, lambda t: re.findall(r"\w+", t.lower()))


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
    idx = open_index("main", tmp_path / "ws", settings(sync={"watch": False}),
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
