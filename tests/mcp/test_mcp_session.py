"""A person switches an MCP server off (and on again) for one session: ``/mcp off NAME`` in
the REPL or on the web page, kept in the session's entry; ``GET /api/sessions/{key}/mcp``
lists the servers, each on or off, with their tools. A tool list that changes reaches a
running session at its next turn."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clawd.config import Config
from clawd.config.mcp import McpServer
from clawd.core.events import CommandOutput
from clawd.frontends.commands import Chat
from clawd.mcp.client import McpClients
from clawd.providers.scripted import ScriptedProvider
from clawd.tools.files import file_tools

from conftest import make_runtime

NOTES = str(Path(__file__).parents[1] / "mcp_notes.py")
pytestmark = pytest.mark.slow


@pytest.fixture
def notes(tmp_path):
    server = {"command": sys.executable, "args": [NOTES, str(tmp_path / "notes.txt")],
              "connectionTimeoutMs": 60_000}
    clients = McpClients({"notes": McpServer.model_validate(server)}, logs=tmp_path / "logs")
    clients.start()
    yield clients, Config.model_validate({"mcp": {"servers": {"notes": server}}})
    clients.close()


def _runtime(tmp_path, provider, notes):
    clients, config = notes
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    rt.config, rt.mcp = config, clients
    return rt


def _said(chat: Chat, line: str) -> str:
    return "\n".join(e.text for e in chat.handle(line) if isinstance(e, CommandOutput))


def test_a_server_switched_off_in_a_session_is_not_offered_there(tmp_path, notes):
    provider = ScriptedProvider(["one", "two", "three"])
    chat = Chat.open(_runtime(tmp_path, provider, notes), "agent:main:main")
    list(chat.handle("hi"))
    assert "notes__add_note" in {s.name for s in provider.requests[0].tools}
    assert "no more offered" in _said(chat, "/mcp off notes")
    assert "(off in this session)" in _said(chat, "/mcp")
    list(chat.handle("hi again"))
    sent = {s.name for s in provider.requests[1].tools}
    assert not any(name.startswith("notes__") for name in sent) and "read" in sent
    assert "notes__add_note" not in provider.requests[1].system[0]
    assert chat.session.entry.get("mcpOff") == ["notes"]
    again = Chat.open(chat.runtime, "agent:main:main")  # the session opened again keeps it
    assert again.session.entry.get("mcpOff") == ["notes"]
    _said(again, "/mcp on notes")
    list(again.handle("and now?"))
    assert "notes__add_note" in {s.name for s in provider.requests[2].tools}
    assert "no MCP server 'nope'" in "".join(
        getattr(e, "message", "") for e in again.handle("/mcp off nope"))


def test_the_page_lists_the_servers_each_on_or_off(tmp_path, notes):
    from gateway_client import AUTH, gateway, send

    provider = ScriptedProvider(["ok"])
    rt = _runtime(tmp_path, provider, notes)
    with gateway(tmp_path, provider, runtimes=[rt]) as client:
        listed = client.get("/api/sessions/main/mcp", headers=AUTH).json()
        send(client, "/mcp off notes")
        after = client.get("/api/sessions/main/mcp", headers=AUTH).json()
    server = listed["servers"][0]
    assert server["name"] == "notes" and server["on"] and server["state"] == "ready"
    assert "notes__add_note" in [t["name"] for t in server["tools"]]
    assert not after["servers"][0]["on"]


def test_a_tool_list_that_changes_reaches_a_running_session_at_its_next_turn(tmp_path, notes):
    import time

    from clawd.providers.scripted import Reply, tool

    clients, _ = notes
    provider = ScriptedProvider([Reply("", [tool("notes__learn")]), "learnt", "next"])
    rt = _runtime(tmp_path, provider, notes)
    clients.listen(lambda: rt.tools.__setitem__(slice(None), [
        t for t in rt.tools if not t.spec.origin] + clients.tools()))
    chat = Chat.open(rt, "agent:main:main")
    list(chat.handle("learn something"))
    deadline = time.monotonic() + 20
    while "notes__later" not in {t.spec.name for t in rt.tools}:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    list(chat.handle("what now?"))
    assert "notes__later" in {s.name for s in provider.requests[-1].tools}
