"""memory_search and memory_get as the model uses them, and /memory add."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import ClawdError, ToolError
from clawd.memory.notes import append_to_daily_log
from clawd.storage.files.memory import open_file_index
from clawd.storage.files.workspace import DiskFiles
from clawd.tools.base import ToolContext
from clawd.tools.memory import memory_tools

from conftest import disk_tool_context
from memory_fakes import FakeEmbedder, write


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "# Memory\n\nline two\nline three\nline four\n")
    write(root, "memory/2025-01-02.md", "# Day\n\n- met Ada about the ledger\n")
    write(root, "memory/sub/deep.md", "deep note\n")
    write(root, "AGENTS.md", "# Agents\n")
    write(root, "memory/data.json", "{}")
    write(tmp_path, "outside.md", "# outside\n")
    write(tmp_path, "extra/notes.md", "# Extra\n\nextra line\n")
    return root


def context(ws: Path, memory=None, **memory_search) -> ToolContext:
    settings = AgentDefaults.model_validate({"memorySearch": {"fallback": "none",
                                                              **memory_search}})
    return disk_tool_context(workspace=ws, settings=settings, memory=memory)


def run(name: str, args: dict, ctx: ToolContext) -> str:
    tool = next(t for t in memory_tools() if t.spec.name == name)
    return tool.run(args, ctx)


def test_tool_specs_use_the_spec_names():
    specs = {t.spec.name: t.spec for t in memory_tools()}
    assert set(specs) == {"memory_search", "memory_get"}
    assert set(specs["memory_search"].parameters["properties"]) == {"query", "maxResults",
                                                                     "minScore"}
    assert set(specs["memory_get"].parameters["properties"]) == {"path", "from", "lines"}
    assert specs["memory_get"].parameters["required"] == ["path"]


def test_memory_get_reads_lines(ws):
    ctx = context(ws)
    assert run("memory_get", {"path": "MEMORY.md"}, ctx) == \
        "# Memory\n\nline two\nline three\nline four"
    out = run("memory_get", {"path": "MEMORY.md", "from": 3, "lines": 2}, ctx)
    assert out.startswith("line two\nline three\n[...") and "from=5" in out
    assert run("memory_get", {"path": "memory/sub/deep.md"}, ctx) == "deep note"
    assert "ledger" in run("memory_get", {"path": "./memory/../memory/2025-01-02.md"}, ctx)


@pytest.mark.parametrize("path", [
    "AGENTS.md", "../outside.md", "/etc/passwd", "memory/data.json", "memory",
    "~/outside.md", "memory/../AGENTS.md", "sessions/abc.jsonl",
])
def test_memory_get_refuses_everything_else(ws, path):
    with pytest.raises(ClawdError) as info:
        run("memory_get", {"path": path}, context(ws))
    message = str(info.value)
    assert "\n" not in message
    assert "memory_get reads only" in message or "no such memory file" in message


def test_memory_get_refuses_symlinks_out(ws, tmp_path):
    (ws / "memory" / "link.md").symlink_to(tmp_path / "outside.md")
    with pytest.raises(ClawdError, match="memory_get reads only|escapes"):
        run("memory_get", {"path": "memory/link.md"}, context(ws))


def test_memory_get_allows_extra_paths_even_outside_the_workspace(ws, tmp_path):
    extra = tmp_path / "extra"
    ctx = context(ws, extraPaths=[str(extra)])
    absolute = str((extra / "notes.md").resolve())
    assert "extra line" in run("memory_get", {"path": absolute}, ctx)
    assert "extra line" in run("memory_get", {"path": "../extra/notes.md"}, ctx)
    with pytest.raises(ToolError):
        run("memory_get", {"path": str(tmp_path / "outside.md")}, ctx)
    inside = context(ws, extraPaths=["AGENTS.md"])
    assert run("memory_get", {"path": "AGENTS.md"}, inside) == "# Agents"


def test_memory_get_argument_errors(ws):
    ctx = context(ws)
    for args in ({}, {"path": "MEMORY.md", "from": 0}, {"path": "MEMORY.md", "lines": 0},
                 {"path": "memory/none.md"}):
        with pytest.raises(ToolError):
            run("memory_get", args, ctx)
    # past the end is said in words, not an error: after "'from' 14 is past the end" the
    # 1.5B model answered nothing
    assert run("memory_get", {"path": "MEMORY.md", "from": 99}, ctx) == \
        "[MEMORY.md has 5 lines; there is nothing after line 5]"


def test_memory_search_tool_returns_the_json(ws, tmp_path):
    index = open_file_index("main", ws, context(ws).settings.memory_search, tmp_path / "state",
                            embedder=FakeEmbedder())
    ctx = context(ws, memory=index)
    data = json.loads(run("memory_search", {"query": "Ada ledger", "maxResults": 2}, ctx))
    assert data["results"][0]["path"] == "memory/2025-01-02.md"
    assert len(data["results"]) <= 2
    assert data["provider"] == "fake" and data["fallback"] is None
    assert json.loads(run("memory_search", {"query": "Ada", "minScore": 1}, ctx))["results"] \
        in ([], data["results"][:1])
    for bad in ({"query": " "}, {"query": "x", "maxResults": 0}, {"query": "x", "minScore": 2}):
        with pytest.raises(ToolError):
            run("memory_search", bad, ctx)
    index.close()
    with pytest.raises(ToolError, match="not available"):
        run("memory_search", {"query": "x"}, context(ws))


def test_add_appends_to_todays_log(ws):
    day = date(2025, 1, 2)
    assert append_to_daily_log(DiskFiles(ws), "call  the\nplumber", day) == "memory/2025-01-02.md"
    text = (ws / "memory/2025-01-02.md").read_text()
    assert text == "# Day\n\n- met Ada about the ledger\n- call the plumber\n"
    append_to_daily_log(DiskFiles(ws), "first of the month", date(2025, 2, 1))
    assert (ws / "memory/2025-02-01.md").read_text() == "# 2025-02-01\n\n- first of the month\n"
    with pytest.raises(ToolError):
        append_to_daily_log(DiskFiles(ws), "   ", day)


def test_memory_get_takes_a_citation_as_the_path(ws):
    ctx = context(ws)
    assert run("memory_get", {"path": "MEMORY.md#L3-L4"}, ctx).startswith(
        "line two\nline three\n[... MEMORY.md: lines 3-4 of 5")
    assert run("memory_get", {"path": "memory/2025-01-02.md#L3"}, ctx) == \
        "- met Ada about the ledger"
    # lines asked for explicitly win over the citation's
    assert run("memory_get", {"path": "MEMORY.md#L3", "from": 5, "lines": 1}, ctx) == "line four"
    with pytest.raises(ClawdError, match="memory_get reads only"):
        run("memory_get", {"path": "AGENTS.md#L1"}, ctx)
