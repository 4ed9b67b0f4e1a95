"""Paraphrases at default settings with the real local model: every query of the hand-written
set (tests/data/memory_paraphrases.json, no content word shared with its note) finds its
note, and the off-topic queries find nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawd.memory.local import LocalEmbedder
from clawd.memory.search import STOP_WORDS, query_terms
from clawd.storage.files.memory import open_file_index

from memory_fakes import settings, write

DATA = json.loads((Path(__file__).parents[1] / "data" / "memory_paraphrases.json").read_text())


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("paraphrases")
    for number, pair in enumerate(DATA["pairs"]):
        write(root / "ws", f"memory/note-{number:02d}.md", f"# Note\n\n- {pair['note']}\n")
    idx = open_file_index("main", root / "ws", settings(sync={"watch": False}), root / "state",
                          embedder=LocalEmbedder(), env={})
    idx.sync()
    yield idx
    idx.close()


def test_the_set_is_large_and_shares_no_words():
    assert len(DATA["pairs"]) >= 30 and len(DATA["off_topic"]) >= 5
    for pair in DATA["pairs"]:
        shared = set(query_terms(pair["query"])) & set(query_terms(pair["note"])) - STOP_WORDS
        assert not shared, pair


def test_every_paraphrase_comes_back_at_defaults(index):
    first = 0
    for number, pair in enumerate(DATA["pairs"]):
        results = index.search(pair["query"])["results"]  # minScore 0.35, 0.7 / 0.3
        paths = [r["path"] for r in results]
        assert f"memory/note-{number:02d}.md" in paths, (pair, results[:2])
        first += paths[0] == f"memory/note-{number:02d}.md"
    assert first >= 0.85 * len(DATA["pairs"])


@pytest.mark.parametrize("query", DATA["off_topic"])
def test_off_topic_queries_find_nothing(index, query):
    assert index.search(query)["results"] == []
