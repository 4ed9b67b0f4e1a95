"""Each chunk's FTS tokens, line by line, are stored when it is written, so a search does not
tokenize its keyword hits again: stored and freshly computed tokens are the same, a chunk
written anew with other text never keeps the old tokens, a chunk without stored tokens (an
index from before they were kept) is tokenized at search time and filled in by a sync, and
the per-generation token counts of the query plan follow every committed sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawd.memory import keyword_tables, tokens
from clawd.memory.candidates import keyword_hits
from clawd.memory.schema import MIGRATIONS
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write

NOTE = ("# Trips\n\nWe went camping near Lake Tahoe.\n\n東京の会議は水曜日です\n"
        "Who booked the cabins?\n   \nRunning, runners and ran.\n")


@pytest.fixture
def index(tmp_path: Path):
    write(tmp_path / "ws", "memory/trips.md", NOTE)
    write(tmp_path / "ws", "memory/other.md", "# Other\n\nNothing about lakes here.\n")
    idx = open_file_index("main", tmp_path / "ws", settings(sync={"watch": False}),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    idx.sync()
    yield idx
    idx.close()


def _rows(index) -> list[tuple[int, str, str, str | None]]:
    return list(index.store.conn.execute(
        "SELECT id, heading, text, line_tokens FROM chunks ORDER BY id"))


def test_stored_tokens_are_those_of_the_text(index):
    rows = _rows(index)
    assert rows and all(stored is not None for *_, stored in rows)
    for chunk_id, heading, text, stored in rows:
        body, head, lines = tokens.chunk_tokens(heading, text)
        joined = [" ".join(line) for line in lines]
        assert tokens.decode_line_tokens(stored) == (head, joined)
        assert index.store.keyword_chunks([chunk_id])[chunk_id] == (body, head, joined)
        assert len(lines) == len(body.split("\n"))  # blank lines kept, one list each
    held = {t for *_, stored in rows for t in stored.split()}
    assert {"camp", "taho", "東", "会", "run", "runner", "cabin"} <= held


def test_encoding_round_trips_blank_lines_and_an_empty_heading():
    lines = [["a", "b"], [], ["c"], []]
    assert tokens.decode_line_tokens(
        tokens.encode_line_tokens([], lines)) == ([], ["a b", "", "c", ""])


def test_a_chunk_written_anew_does_not_keep_stale_tokens(index, tmp_path: Path):
    assert keyword_hits(index.store, "camping", 24)[0]
    write(tmp_path / "ws", "memory/trips.md", "# Trips\n\nWe went sailing instead.\n")
    index.mark_dirty()
    index.sync()
    assert keyword_hits(index.store, "camping", 24)[0] == {}
    hits, cover, lines = keyword_hits(index.store, "sailing", 24)
    assert len(hits) == 1
    chunk_id = next(iter(hits))
    assert cover[chunk_id] == 1.0 and lines[chunk_id] == 1.0
    body, head, per_line = index.store.keyword_chunks([chunk_id])[chunk_id]
    assert "camp" not in {t for line in per_line for t in line.split()}
    assert "sail" in {t for line in per_line for t in line.split()}


def test_chunks_without_stored_tokens_are_tokenized_and_filled_by_a_sync(index):
    expected = {q: keyword_hits(index.store, q, 24)
                for q in ("camping lake", "who booked the cabins", "会議", "runner")}
    index.store.conn.execute("UPDATE chunks SET line_tokens = NULL")
    for q, found in expected.items():
        assert keyword_hits(index.store, q, 24) == found
    index.mark_dirty()
    index.sync()  # nothing changed in the files; the sync fills the tokens in
    assert all(stored is not None for *_, stored in _rows(index))
    for q, found in expected.items():
        assert keyword_hits(index.store, q, 24) == found


def test_a_sync_fills_a_bounded_number_of_chunks(index, monkeypatch):
    index.store.conn.execute("UPDATE chunks SET line_tokens = NULL")
    monkeypatch.setattr(keyword_tables, "FILL_PER_SYNC", 1)
    index.mark_dirty()
    index.sync()
    assert sum(stored is None for *_, stored in _rows(index)) == len(_rows(index)) - 1


def test_an_index_from_before_the_column_is_migrated(tmp_path: Path):
    import apsw

    from clawd.memory.store import Store

    path = tmp_path / "old.sqlite"
    conn = apsw.Connection(str(path))
    for sql in MIGRATIONS[:3]:
        conn.execute(sql)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO chunks(path, source, start_line, end_line, heading, text, hash)"
                 " VALUES ('memory/a.md', 'memory', 1, 2, 'A', 'kayak trip', 'h')")
    conn.close()
    store = Store(path, vector_enabled=False)
    try:
        rows = list(store.conn.execute("SELECT id, line_tokens FROM chunks"))
        assert rows == [(1, None)]
        assert store.keyword_chunks([1])[1] == ("kayak trip", ["a"], ["kayak trip"])
        with store.lock, store.transaction():
            assert store.fill_line_tokens() == 1
        assert store.keyword_chunks([1])[1] == ("kayak trip", ["a"], ["kayak trip"])
        assert store.fill_line_tokens() == 0
    finally:
        store.close()


def test_token_counts_follow_each_sync(index, tmp_path: Path):
    total, docs = index.store.term_stats(["lake", "absent"])
    assert docs == {"lake": 2} and total == len(_rows(index))
    assert index.store.term_stats(["lake"]) == (total, {"lake": 2})  # from the cache
    write(tmp_path / "ws", "memory/third.md", "# Third\n\nAnother lake, and an absent friend.\n")
    index.mark_dirty()
    index.sync()
    total2, docs2 = index.store.term_stats(["lake", "absent"])
    assert docs2 == {"lake": 3, "absent": 1} and total2 == total + 1
