"""Memory search wired into the runtime: CLI commands, /memory, tools in turns, lifecycle."""

from __future__ import annotations

import json

import pytest

from clawd.config import MemorySearch
from clawd.core.events import CommandOutput, ErrorEvent
from clawd.frontends import cli
from clawd.frontends.commands import Chat
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.storage.files.memory import open_file_index
from clawd.tools.memory import memory_tools

from conftest import make_runtime
from memory_fakes import FakeEmbedder

KEY = "agent:main:main"


def memory_runtime(tmp_path, provider, clock=None, agent_id="main"):
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.agent_id = agent_id
    runtime.tools = runtime.tools + memory_tools()
    runtime.memory = open_file_index(agent_id, runtime.workspace, MemorySearch(),
                                     tmp_path / "state", runtime.storage.sessions_dir,
                                     embedder=FakeEmbedder())
    return runtime


def outputs(events):
    return "\n".join(e.text for e in events if isinstance(e, CommandOutput))


def test_memory_commands_in_chat(tmp_path, clock):
    runtime = memory_runtime(tmp_path, ScriptedProvider(), clock)
    (runtime.workspace / "MEMORY.md").write_text(
        "# Memory\n- The gateway runs on the Mac Studio.\n")
    chat = Chat.open(runtime, KEY)
    text = outputs(chat.handle("/memory add Deploy key rotates every 90 days"))
    assert "memory/2026-11-22.md" in text
    log = (runtime.workspace / "memory" / "2026-11-22.md").read_text()
    assert log.endswith("- Deploy key rotates every 90 days\n")
    found = outputs(chat.handle("/memory search deploy key rotates"))
    assert "memory/2026-11-22.md:" in found and "90 days" in found
    shown = outputs(chat.handle("/memory show"))
    assert "Mac Studio" in shown and "memory/2026-11-22.md" in shown
    with open(runtime.workspace / "MEMORY.md", "ab") as handle:
        handle.write(b"- caf\xe9 (latin-1 byte)\n")
    assert "caf\ufffd" in outputs(chat.handle("/memory show"))  # shown, not a crash
    status = outputs(chat.handle("/memory status")).splitlines()
    rows = {line[:16].strip(): line[16:] for line in status}
    assert rows["files"] == "2" and rows["keyword search"] == "FTS5"
    assert rows["state"].startswith("up to date")  # the search above synced the index
    errors = [e for e in chat.handle("/memory frobnicate") if isinstance(e, ErrorEvent)]
    assert errors and "usage: /memory" in errors[0].message
    runtime.memory.close()


def test_saved_session_is_found_by_memory_search_in_the_next_one(tmp_path, clock):
    def model(request):
        if not request.tools:  # the slug request
            return "rate-limit-decision"
        last = request.messages[-1]
        if last.role == "user" and "what did we decide" in last.text:
            return Reply("", [tool("memory_search", query="API rate limit decision")])
        if last.role == "toolResult":
            return "We chose 100 requests per minute."
        return "Noted."

    provider = ScriptedProvider(default=model)
    runtime = memory_runtime(tmp_path, provider, clock)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("Decision: the API rate limit is 100 requests per minute."))
    list(chat.handle("/new"))
    list(chat.handle("what did we decide about the rate limit?"))
    result = next(m for m in chat.session.history.messages if m.role == "toolResult")
    found = json.loads(result.text)
    paths = [r["path"] for r in found["results"]]
    assert "memory/2026-11-22-rate-limit-decision.md" in paths
    assert any("100 requests per minute" in r["snippet"] for r in found["results"])
    runtime.memory.close()


def test_agents_have_separate_indexes(tmp_path, clock):
    a = memory_runtime(tmp_path / "a", ScriptedProvider(), clock, "main")
    b = memory_runtime(tmp_path / "b", ScriptedProvider(), clock, "work")
    (a.workspace / "MEMORY.md").write_text("The orchid password hint is purple.\n")
    (b.workspace / "MEMORY.md").write_text("Quarterly report due Friday.\n")
    assert a.memory.path != b.memory.path
    assert a.memory.search("orchid password")["results"]
    assert not b.memory.search("orchid password")["results"]
    a.memory.close()
    b.memory.close()


@pytest.fixture
def workspace_config(isolated_home):
    ws = isolated_home / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n\n- Set OPENAI_BASE_URL for the vLLM box\n"
        "- The staging database lives on host db-stg-04\n")
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text(json.dumps(
        {"agents": {"defaults": {"workspace": str(ws),
                                 "memorySearch": {"provider": "local"}}}}))
    return ws


@pytest.mark.slow  # the command line end to end
def test_memory_cli_with_the_local_model(workspace_config, capsys):
    assert cli.main(["memory", "index"]) == 0
    out, err = capsys.readouterr()
    assert "indexing [" in err and "chunks" in err
    assert cli.main(["memory", "status"]) == 0
    out, _ = capsys.readouterr()
    assert "local/all-MiniLM-L6-v2 (dims 384)" in out and "(vec0)" in out
    assert cli.main(["memory", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["files"], status["vector"]["mode"], status["fullyEmbedded"]) == (
        1, "vec0", True)
    assert status["chunks"] == status["embeddedChunks"] > 0
    assert cli.main(["memory", "search", "db-stg-04", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["results"][0]["path"] == "memory/2026-11-20.md"
    assert found["results"][0]["startLine"] >= 1 and len(found["results"][0]["snippet"]) <= 700
    assert cli.main(["memory", "search", "which machine hosts the staging database",
                     "--max-results", "1"]) == 0
    out, _ = capsys.readouterr()
    assert "memory/2026-11-20.md:" in out and out.startswith("1 result")


def test_repl_start_indexes_in_the_background_and_watches(tmp_path, clock):
    import time
    runtime = memory_runtime(tmp_path, ScriptedProvider(), clock)
    (runtime.workspace / "MEMORY.md").write_text("- The backup job runs at 02:00.\n")
    chat = Chat.open(runtime, KEY, background=True)
    chat.start_memory_sync()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not runtime.memory.status()["chunks"]:
        time.sleep(0.05)
    status = runtime.memory.status()
    assert status["chunks"] >= 1 and status["watching"]
    runtime.memory.close()


def test_a_note_just_added_is_found_by_the_next_search(tmp_path, clock):
    """The issue's script: hello, /memory add, /memory search, with the day's file new."""
    runtime = memory_runtime(tmp_path, ScriptedProvider(["Hello!"]), clock)
    chat = Chat.open(runtime, KEY)
    for line in ("hello", "/memory add remember SP-777 in the dir"):
        list(chat.handle(line))
    found = outputs(list(chat.handle("/memory search SP-777")))
    assert found.startswith("1 result") and "memory/2026-11-22.md:" in found
    assert "SP-777" in found
    runtime.memory.close()
