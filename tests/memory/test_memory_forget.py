"""Forget: note lines holding a text (or named as PATH#Lx-Ly) leave the notes, the keyword
index, the vectors and the embedding cache; the old notes are kept in the backups, which the
index never reads; search, recall, memory_get and read no longer find the text. Real
SQLite, FTS5, sqlite-vec and the local embedder."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from clawd.config import AgentDefaults, MemorySearch
from clawd.context.access import Access
from clawd.core.errors import ClawdError
from clawd.core.messages import Message
from clawd.loop.recall import recall
from clawd.memory.forget import Request, find, forget, parse, remove, still_found
from clawd.memory.plan import text_hash
from clawd.memory.purge import embedded_texts
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.memory import open_file_index
from clawd.storage.files.workspace import DiskFiles
from clawd.tools.files import file_tools
from clawd.tools.memory import memory_tools

from conftest import disk_tool_context
from memory_fakes import write

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
DAY = ("# 2026-11-20\n\n## Kitchen\n\n- The new oven timer beeps twice when done.\n\n"
       "## Safe\n\n- The safe code is Quillon 7731, keep it to yourself.\n"
       "- Ines arrives in Lisbon on May 14.\n")
MEMORY = "# Memory\n\n- quillon is the brand of the safe in the study\n- I like green tea\n"


def found_lines(workspace, request):
    return find(DiskFiles(workspace), request)


def forgotten(workspace, index, lines, now=NOW):
    return forget(DiskFiles(workspace), DiskBackups(workspace), index, lines, now)


@pytest.fixture
def setup(tmp_path):
    workspace = tmp_path / "ws"
    write(workspace, "memory/2026-11-20.md", DAY)
    write(workspace, "MEMORY.md", MEMORY)
    write(workspace, "memory/2026-11-19.md", "# 2026-11-19\n\n- Booked the dentist.\n")
    index = open_file_index("main", workspace, MemorySearch(), tmp_path / "state")
    index.sync()
    yield workspace, index
    index.close()


def holding(index, needle):
    """The chunk rows holding ``needle`` and every text embedded for them."""
    rows = [row for path in index.store.files() for row in index.store.chunks_at(path)
            if needle in row.text.lower()]
    return rows, embedded_texts(rows, {}, index.embedders.get())


def cached(index, texts):
    hashes = [text_hash(t) for t in texts]
    marks = ",".join("?" * len(hashes))
    return {h for (h,) in index.store.conn.execute(
        f"SELECT hash FROM embedding_cache WHERE hash IN ({marks})", hashes)}


def test_forget_takes_the_text_out_of_notes_keywords_vectors_and_cache(setup):
    workspace, index = setup
    rows, texts = holding(index, "quillon")
    held = [t for t in texts if "quillon" in t.lower()]
    old_vectors = {vector for vector, _ in index.store.get_vectors(r.id for r in rows).values()}
    before = cached(index, held)
    assert len(rows) == 2 and before  # the cache held them before
    assert index.search("quillon", mode="text")["results"]

    lines = found_lines(workspace, parse("QUILLON"))
    assert [(line.path, line.number) for line in lines] == [("MEMORY.md", 3),
                                                            ("memory/2026-11-20.md", 9)]
    done = forgotten(workspace, index, lines)

    # the notes: those lines gone, every other line as it was
    assert (workspace / "memory/2026-11-20.md").read_text() == DAY.replace(
        "- The safe code is Quillon 7731, keep it to yourself.\n", "")
    assert (workspace / "MEMORY.md").read_text() == (
        "# Memory\n\n- I like green tea\n")
    assert done.index is not None and done.index["chunks"] == 2
    assert done.index["cacheEntries"] >= len(before)
    # the keyword index
    store = index.store
    assert store.conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH "
                              "'quillon'").fetchall()[0][0] == 0
    assert not [t for (t,) in store.conn.execute("SELECT text FROM chunks")
                if "quillon" in t.lower()]
    # the vectors: neither the chunk rows nor the vec0 table keep the old ones
    now_vectors = {v for (v,) in store.conn.execute("SELECT embedding FROM chunks")}
    now_vectors |= {v for (v,) in store.conn.execute("SELECT embedding FROM chunks_vec")}
    assert old_vectors and not old_vectors & now_vectors
    assert store.conn.execute(
        f"SELECT count(*) FROM chunks_vec WHERE rowid IN ({','.join('?' * len(rows))})",
        [r.id for r in rows]).fetchall()[0][0] == 0
    # the embedding cache: no entry of any text that held it
    assert cached(index, held) == set()
    # search, by keyword and by meaning
    for query, mode in (("quillon", "text"), ("Quillon 7731", "hybrid"),
                        ("what is the code of the safe", "hybrid")):
        found = index.search(query, min_score=0.0, mode=mode)["results"]
        assert not [h for h in found if "quillon" in h["snippet"].lower()]
    assert index.search("oven timer")["results"][0]["path"] == "memory/2026-11-20.md"
    # not a byte of it left in the index's files (deleted rows overwritten, WAL truncated)
    index.close()
    for path in index.path.parent.iterdir():
        assert b"quillon" not in path.read_bytes().lower(), path.name


def test_the_old_notes_are_kept_in_the_backups_which_search_never_indexes(setup, tmp_path):
    workspace, index = setup
    done = forgotten(workspace, index, found_lines(workspace, parse("quillon")))
    backups = DiskBackups(workspace)
    kept = {v.name: v for v in backups.versions()}
    assert set(kept) == {"MEMORY.md", "memory/2026-11-20.md"}
    assert backups.text(kept["memory/2026-11-20.md"]) == DAY
    assert [v.ref for v in done.kept] == [kept["MEMORY.md"].ref,
                                          kept["memory/2026-11-20.md"].ref]
    assert backups.where(kept["memory/2026-11-20.md"]).startswith(".clawd/history/")
    assert not [p for p in index.store.files() if p.startswith(".clawd")]
    # not even with the whole workspace as an extra path
    wide = open_file_index("wide", workspace, MemorySearch.model_validate({"extraPaths": ["."]}),
                           tmp_path / "state2")
    try:
        wide.sync()
        assert not [p for p in wide.store.files() if ".clawd" in p]
        assert not wide.search("quillon", mode="text")["results"]
    finally:
        wide.close()
    # and a daily note can be restored from them (clawd history restore)
    backups.restore(backups.find("memory/2026-11-20.md"), NOW)
    assert (workspace / "memory/2026-11-20.md").read_text() == DAY


def test_after_forget_neither_recall_nor_memory_get_nor_read_find_it(setup):
    workspace, index = setup
    settings = MemorySearch.model_validate({"recall": {"enabled": True}})
    question = Message.user("What is the code of the safe, Quillon?")

    def recalled() -> str:  # the notes recall would send with the question
        found = recall(index, Access(), settings, question, "", 200_000)
        return "\n".join(hit.text for hit in found.hits) if found else ""

    assert "7731" in recalled()
    forgotten(workspace, index, found_lines(workspace, parse("quillon")))
    assert "quillon" not in recalled().lower() and "7731" not in recalled()
    ctx = disk_tool_context(workspace=workspace, settings=AgentDefaults(), memory=index)
    tools = {t.spec.name: t for t in memory_tools() + file_tools()}
    for path in ("memory/2026-11-20.md", "MEMORY.md"):
        assert "quillon" not in tools["memory_get"].run({"path": path}, ctx).lower()
        assert "quillon" not in tools["read"].run({"path": path}, ctx).lower()
    assert "quillon" not in tools["memory_search"].run({"query": "quillon safe code"},
                                                       ctx).lower()


def test_lines_named_as_search_cites_them(setup):
    workspace, index = setup
    assert parse("memory/2026-11-20.md#L9-L10") == Request(path="memory/2026-11-20.md",
                                                           start=9, end=10)
    assert parse("memory/2026-11-20.md#L9") == Request(path="memory/2026-11-20.md",
                                                       start=9, end=9)
    hit = index.search("oven timer beeps")["results"][0]
    assert found_lines(workspace, parse(hit["citation"]))  # a result's citation works as it is
    lines = found_lines(workspace, parse("memory/2026-11-20.md#L8-L10"))  # L8 is blank: it stays
    assert [line.number for line in lines] == [9, 10]
    forgotten(workspace, index, lines)
    assert (workspace / "memory/2026-11-20.md").read_text().endswith("## Safe\n\n")
    assert "quillon" in (workspace / "MEMORY.md").read_text()  # only the lines named
    assert not index.search("Ines Lisbon May", mode="text")["results"]


@pytest.mark.parametrize("argument, message", [
    ("../outside.md#L1", "is outside the workspace"),
    ("/etc/motd.md#L1", "is outside the workspace"),
    ("AGENTS.md#L1", "is not a note"),
    ("memory/missing.md#L1", "no such note: memory/missing.md"),
    ("memory/2026-11-20.md#L99", "has 10 lines, none at L99"),
    ("memory/2026-11-20.md#L4-L2", "the first before the last"),
    ("ab", "give at least 3 characters"),
])
def test_bad_requests_are_refused_in_one_line_and_nothing_changes(setup, argument, message):
    workspace, _ = setup
    write(workspace, "AGENTS.md", "# Agents\n")
    with pytest.raises(ClawdError) as caught:
        found_lines(workspace, parse(argument))
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert (workspace / "memory/2026-11-20.md").read_text() == DAY


def test_a_note_changed_since_listing_is_not_touched(setup):
    workspace, _ = setup
    lines = found_lines(workspace, parse("quillon"))
    (workspace / "MEMORY.md").write_text("# Memory\n\n- something else now\n- quillon\n")
    with pytest.raises(ClawdError, match="changed since its lines were listed"):
        remove(DiskFiles(workspace), DiskBackups(workspace), lines, NOW)
    assert (workspace / "memory/2026-11-20.md").read_text() == DAY
    assert DiskBackups(workspace).versions() == []


def test_what_forget_does_not_change_is_reported(setup, tmp_path):
    workspace, _ = setup
    write(tmp_path, "extra/trip.md", "# Trip\n\n- quillon travel safe\n")
    index = open_file_index("extra", workspace, MemorySearch.model_validate(
        {"extraPaths": [str(tmp_path / "extra")]}), tmp_path / "state3")
    try:
        index.sync()
        request = parse("quillon")
        forgotten(workspace, index, found_lines(workspace, request))
        assert still_found(index, request) == [f"{tmp_path / 'extra' / 'trip.md'}#L1-L3"]
    finally:
        index.close()
