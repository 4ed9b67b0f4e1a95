"""Memory search against awkward files and input: binary junk, control characters, one huge
line, empty queries and bad limits, a fresh process's status, templates, links out."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import ToolError
from clawd.frontends import cli
from clawd.frontends.reports import format_memory_status
from clawd.memory import search as policy
from clawd.storage.files.memory import open_file_index
from clawd.tools.base import ToolContext
from clawd.tools.memory import memory_tools
from clawd.workspace.init import apply, plan_init

from conftest import disk_tool_context
from memory_fakes import FakeEmbedder, settings, write

NOTE = "# Servers\n\n- ferro-db-01 is the primary Postgres host in rack 4\n"
CONTROL = {chr(c) for c in range(32) if chr(c) not in "\n\t"} | {"\x7f", "\x9b"}


def junk(size: int = 20_000, seed: int = 7) -> bytes:
    """Random bytes, NULs included, as a stray binary file would be."""
    data = random.Random(seed).randbytes(size)
    return data if b"\x00" in data else data + b"\x00"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "# Memory\n\n- The user prefers short answers.\n")
    write(root, "memory/2026-11-20.md", NOTE)
    return root


def make(ws: Path, tmp_path: Path, **overrides):
    overrides.setdefault("sync", {"watch": False})
    overrides.setdefault("fallback", "none")
    return open_file_index("main", ws, settings(**overrides), tmp_path / "state",
                           embedder=FakeEmbedder(), env={})


def places(result) -> list[tuple[str, int, int]]:
    return [(r["path"], r["startLine"], r["endLine"]) for r in result["results"]]


def skip_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "skipping" in r.getMessage()]


def run_tool(name: str, args: dict, ctx: ToolContext) -> str:
    return next(t for t in memory_tools() if t.spec.name == name).run(args, ctx)


def tool_context(ws: Path, memory=None) -> ToolContext:
    agent = AgentDefaults.model_validate({"memorySearch": {"fallback": "none"}})
    return disk_tool_context(workspace=ws, settings=agent, memory=memory)


# --- 1. binary files --------------------------------------------------------------------------

def test_binary_and_non_utf8_files_are_skipped_with_one_warning(ws, tmp_path, caplog):
    (ws / "memory" / "junk.md").write_bytes(junk())
    (ws / "memory" / "latin1.md").write_bytes("café ferro-db-01 notes\n".encode("latin-1"))
    caplog.set_level(logging.WARNING)
    index = make(ws, tmp_path)
    summary = index.sync()
    assert summary["files"] == 2 and summary["skipped"] == 2
    assert sorted(skip_warnings(caplog)) == [
        "memory index: skipping memory/junk.md (not a text file: it contains NUL bytes)",
        "memory index: skipping memory/latin1.md (not UTF-8 text: invalid byte at offset 3)"]
    assert set(index.store.files()) == {"MEMORY.md", "memory/2026-11-20.md"}
    result = index.search("ferro-db-01", min_score=0)
    assert places(result)[0] == ("memory/2026-11-20.md", 1, 3)
    assert not {"memory/junk.md", "memory/latin1.md"} & {r["path"] for r in result["results"]}
    assert index.status()["skippedFiles"] == [
        {"path": "memory/junk.md", "reason": "not a text file: it contains NUL bytes"},
        {"path": "memory/latin1.md", "reason": "not UTF-8 text: invalid byte at offset 3"}]
    # Searches on a dirty index, and a new process, do not warn again.
    caplog.clear()
    index.mark_dirty()
    index.search("ferro-db-01")
    assert index.wait_synced(10)  # the sync that search started
    index.close()
    again = make(ws, tmp_path)
    again.search("ferro-db-01")
    assert skip_warnings(caplog) == []
    assert [s["path"] for s in again.status()["skippedFiles"]] == ["memory/junk.md",
                                                                   "memory/latin1.md"]
    # A change to the file is worth one more warning; a fixed file is indexed again.
    (ws / "memory" / "junk.md").write_bytes(junk(30_000, seed=8))
    (ws / "memory" / "latin1.md").write_text("café ferro-db-01 notes\n", encoding="utf-8")
    again.sync()
    assert skip_warnings(caplog) == [
        "memory index: skipping memory/junk.md (not a text file: it contains NUL bytes)"]
    assert "memory/latin1.md" in again.store.files()
    assert [s["path"] for s in again.status()["skippedFiles"]] == ["memory/junk.md"]
    again.close()


def test_a_note_that_turns_binary_leaves_the_index(ws, tmp_path):
    index = make(ws, tmp_path)
    index.sync()
    assert "memory/2026-11-20.md" in index.store.files()
    (ws / "memory" / "2026-11-20.md").write_bytes(NOTE.encode() + b"\x00\x01\x02")
    index.mark_dirty()
    index.search("ferro-db-01", min_score=0)  # syncs in the background
    assert index.wait_synced(10)
    found = index.search("ferro-db-01", min_score=0)["results"]
    assert "memory/2026-11-20.md" not in {r["path"] for r in found}
    assert "memory/2026-11-20.md" not in index.store.files()
    index.close()


def test_snippets_never_carry_control_characters(ws, tmp_path):
    write(ws, "memory/colours.md",
          "# Build log\n\n\x1b[31mERROR\x1b[0m zircon-gate failed\x07 at step 3\r\n"
          "- retried\x0b\x0c zircon-gate \x9b2J ok\x7f\n\tindented\n")
    index = make(ws, tmp_path)
    result = index.search("zircon-gate", min_score=0)
    snippet = result["results"][0]["snippet"]
    assert result["results"][0]["path"] == "memory/colours.md"
    assert "zircon-gate" in snippet and "\n" in snippet and "\tindented" in snippet
    assert not CONTROL & set(snippet)
    assert "\ufffd[31mERROR" in snippet
    index.close()
    long_text = ("\x1b[1m" + "word " * 50 + "\n") * 40
    assert not CONTROL & set(policy.snippet(long_text, ["word"]))
    assert len(policy.snippet(long_text, ["word"])) <= policy.SNIPPET_CHARS


def test_memory_get_refuses_a_binary_file(ws):
    (ws / "memory" / "junk.md").write_bytes(junk())
    (ws / "memory" / "latin1.md").write_bytes("café\n".encode("latin-1"))
    ctx = tool_context(ws)
    with pytest.raises(ToolError, match=r"memory/junk.md is not a text file.*not indexed"):
        run_tool("memory_get", {"path": "memory/junk.md"}, ctx)
    with pytest.raises(ToolError, match=r"memory/latin1.md is not UTF-8 text"):
        run_tool("memory_get", {"path": "memory/latin1.md"}, ctx)
    assert "ferro-db-01" in run_tool("memory_get", {"path": "memory/2026-11-20.md"}, ctx)


# --- 2. one very long line --------------------------------------------------------------------

def test_pieces_of_one_long_line_come_back_once(ws, tmp_path):
    long_line = " ".join(["alpha beta gamma ferro-db-01 delta"] * 400)
    write(ws, "memory/long.md", "# Long\n\nintro\n\nmore\n\n" + long_line + "\n")
    for name in ("racks", "backups", "oncall"):
        write(ws, f"memory/{name}.md", f"# {name}\n\n- {name} notes mention ferro-db-01 once\n")
    index = make(ws, tmp_path, chunking={"tokens": 40, "overlap": 8})
    index.sync()
    pieces = index.store.conn.execute(
        "SELECT count(*) FROM chunks WHERE path = 'memory/long.md' AND start_line = 7 "
        "AND end_line = 7").fetchall()[0][0]
    assert pieces > 24  # more than the whole candidate pool (6 results x 4)
    result = index.search("ferro-db-01", min_score=0)
    found = places(result)
    assert len(found) == len(set(found)) == 6
    assert ("memory/long.md", 7, 7) in found
    assert {"memory/2026-11-20.md", "memory/racks.md", "memory/backups.md",
            "memory/oncall.md"} <= {path for path, _, _ in found}
    # The repeat kept is the best-scored one.
    scores = [r["score"] for r in result["results"]]
    assert scores == sorted(scores, reverse=True)
    index.close()


def test_distinct_keeps_the_first_of_each_place():
    ranked = [policy.Scored(i, 1 - i / 10, 0, 0) for i in range(6)]
    where = {0: ("a", 1, 1), 1: ("a", 1, 1), 2: ("b", 1, 2), 3: None, 4: ("a", 1, 1),
             5: ("a", 1, 2)}
    kept, repeats = policy.distinct(ranked, where.get, 10)
    assert [s.chunk_id for s in kept] == [0, 2, 5] and repeats == 2
    kept, _ = policy.distinct(ranked, where.get, 2)
    assert [s.chunk_id for s in kept] == [0, 2]


# --- 3. empty queries and bad limits ----------------------------------------------------------

@pytest.fixture
def cli_workspace(isolated_home, ws):
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text(json.dumps(
        {"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
            "provider": "openai", "fallback": "none", "sync": {"watch": False}}}}}))
    return ws


@pytest.mark.parametrize("argv", [
    ["memory", "search", ""], ["memory", "search", "   "],
    ["memory", "search", "x", "--max-results", "0"],
    ["memory", "search", "x", "--max-results", "-3"],
    ["memory", "search", "x", "--max-results", "many"],
    ["memory", "search", "x", "--min-score", "1.5"],
    ["memory", "search", "x", "--min-score", "-0.1"],
    ["memory", "search", "x", "--min-score", "nan"],
])
def test_cli_rejects_empty_queries_and_bad_limits(cli_workspace, capsys, argv):
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and ("empty" in errors[0] or "expected" in errors[0])


def test_cli_accepts_the_limits_at_their_bounds(cli_workspace, capsys):
    assert cli.main(["memory", "search", "ferro-db-01", "--max-results", "1",
                     "--min-score", "0", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert places(found) == [("memory/2026-11-20.md", 1, 3)]


def test_index_search_refuses_an_empty_query_or_no_results(ws, tmp_path):
    index = make(ws, tmp_path)
    for query, limit in (("", None), (" \n", None), ("ferro", 0), ("ferro", -3)):
        with pytest.raises(ValueError):
            index.search(query, max_results=limit)
    assert len(index.search("ferro-db-01 postgres", max_results=1, min_score=0)["results"]) == 1
    index.close()


class RecordingMemory:
    def __init__(self):
        self.calls = []

    def search(self, query, max_results=None, min_score=None):
        self.calls.append((query, max_results, min_score))
        return {"results": [], "provider": None, "model": None, "fallback": None}


def test_memory_search_tool_validates_and_caps_its_arguments(ws):
    memory = RecordingMemory()
    ctx = tool_context(ws, memory)
    for bad, message in (({"query": ""}, "empty"), ({"query": " \t"}, "empty"),
                         ({"query": "x", "maxResults": 0}, "between 1 and 50"),
                         ({"query": "x", "maxResults": -3}, "between 1 and 50"),
                         ({"query": "x", "maxResults": 2.5}, "must be int"),
                         ({"query": "x", "minScore": 1.5}, "between 0 and 1"),
                         ({"query": "x", "minScore": -0.1}, "between 0 and 1")):
        with pytest.raises(ToolError, match=message):
            run_tool("memory_search", bad, ctx)
    assert memory.calls == []
    run_tool("memory_search", {"query": "x", "maxResults": 500}, ctx)
    run_tool("memory_search", {"query": "x", "maxResults": 50, "minScore": 0}, ctx)
    assert memory.calls == [("x", 50, None), ("x", 50, 0.0)]
    spec = next(t.spec for t in memory_tools() if t.spec.name == "memory_search")
    assert spec.parameters["properties"]["maxResults"]["maximum"] == 50


# --- 4. status in a new process ---------------------------------------------------------------

def test_last_sync_survives_the_process_and_status_says_so(ws, tmp_path):
    first = make(ws, tmp_path)
    fresh = first.status()
    assert fresh["lastSync"] is None
    assert "not indexed yet" in format_memory_status(fresh)
    first.sync()
    first.close()
    second = make(ws, tmp_path)  # as `clawd memory status` right after `clawd memory index`
    status = second.status()
    assert status["lastSync"]["indexed"] == 2 and status["lastSync"]["files"] == 2
    assert status["lastSync"]["at"].endswith("+00:00") and status["dirty"] is False
    state = next(line for line in format_memory_status(status).splitlines()
                 if line.startswith("state"))
    assert "up to date (synced 2" in state  # nothing changed since: not "dirty"
    second.close()
    note = next(ws.rglob("*.md"))
    note.write_text(note.read_text() + "\n- one more line\n")
    third = make(ws, tmp_path)  # a note changed after the index: the next sync takes it
    status = third.status()
    assert status["dirty"] is True
    text = format_memory_status(status)
    state = next(line for line in text.splitlines() if line.startswith("state"))
    assert "last synced 2" in state and "checked again before the next search" in state
    assert "dirty" not in text
    third.sync()
    state = next(line for line in format_memory_status(third.status()).splitlines()
                 if line.startswith("state"))
    assert "up to date (synced 2" in state
    third.close()


def test_cli_status_after_cli_index(cli_workspace, capsys):
    assert cli.main(["memory", "index"]) == 0
    printed = capsys.readouterr().out
    assert "2 memory files: 2 indexed" in printed and "at:" not in printed
    assert cli.main(["memory", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["lastSync"]["indexed"] == 2 and status["skippedFiles"] == []
    assert cli.main(["memory", "status"]) == 0
    assert "up to date (synced" in capsys.readouterr().out


# --- 5. templates are not memories ------------------------------------------------------------

def test_init_keeps_templates_out_of_memory(tmp_path):
    workspace = tmp_path / "ws"
    state = tmp_path / "state"
    apply(plan_init(state, state / "clawd.json", workspace))
    assert (workspace / "memory").is_dir() and list((workspace / "memory").iterdir()) == []
    templates = sorted(p.name for p in (workspace / "templates").iterdir())
    assert templates == ["daily.md", "project-tracking.md", "research-intel.md"]
    agents = (workspace / "AGENTS.md").read_text()
    assert "templates/daily.md" in agents and "TEMPLATE-" not in agents
    index = make(workspace, tmp_path)
    index.sync()
    assert set(index.store.files()) == {"MEMORY.md"}
    result = index.search("status blockers next steps", min_score=0)
    assert all(not r["path"].startswith("templates/") for r in result["results"])
    index.close()
    # A second init keeps what the user changed.
    (workspace / "templates" / "daily.md").write_text("mine\n")
    apply(plan_init(state, state / "clawd.json", workspace))
    assert (workspace / "templates" / "daily.md").read_text() == "mine\n"


# --- 6. links out of the workspace ------------------------------------------------------------

def test_links_out_are_warned_about_once(ws, tmp_path, caplog):
    outside = tmp_path / "outside"
    write(outside, "secret.md", "# Secret\n\nplatypus password\n")
    write(outside, "notes/more.md", "# More\n\nplatypus again\n")
    (ws / "memory" / "link_out.md").symlink_to(outside / "secret.md")
    (ws / "memory" / "linked_dir").symlink_to(outside / "notes", target_is_directory=True)
    caplog.set_level(logging.WARNING)
    index = make(ws, tmp_path)
    index.sync()
    assert sorted(skip_warnings(caplog)) == [
        "memory index: skipping memory/link_out.md (a link out of the workspace)",
        "memory index: skipping memory/linked_dir (a link to a folder out of the workspace)"]
    assert index.status()["skippedFiles"] == [
        {"path": "memory/link_out.md", "reason": "a link out of the workspace"},
        {"path": "memory/linked_dir", "reason": "a link to a folder out of the workspace"}]
    found = index.search("platypus password", min_score=0)["results"]
    assert {r["path"] for r in found} == {"MEMORY.md", "memory/2026-11-20.md"}
    caplog.clear()
    for _ in range(3):  # searches, REPL starts: new processes and dirty indexes
        index.mark_dirty()
        index.search("platypus")
        assert index.wait_synced(10)
    index.close()
    again = make(ws, tmp_path)
    again.sync()
    assert skip_warnings(caplog) == []
    # Gone and back: the link is new again.
    (ws / "memory" / "link_out.md").unlink()
    again.sync()
    assert [s["path"] for s in again.status()["skippedFiles"]] == ["memory/linked_dir"]
    (ws / "memory" / "link_out.md").symlink_to(outside / "secret.md")
    again.sync()
    assert skip_warnings(caplog) == [
        "memory index: skipping memory/link_out.md (a link out of the workspace)"]
    again.close()
