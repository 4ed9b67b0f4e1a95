"""An MCP tool that changes things asks first, as ``exec`` does (``approval``): the policy
alone, then a real SDK server (``tests/mcp_notes.py``) whose tools say ``readOnlyHint`` or
nothing, in a session with a person to ask and without, and ``clawd chat -m``, where nobody
can answer and the write is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clawd.config.mcp import McpServer
from clawd.core.events import ToolFinished
from clawd.loop.session import Session
from clawd.mcp.approval import asks, request
from clawd.mcp.client import McpClients
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.files import file_tools

from conftest import make_runtime, transcript_entries

NOTES = str(Path(__file__).parents[1] / "mcp_notes.py")
KEY = "agent:main:main"


@pytest.mark.parametrize("approval, annotations, expected", [
    ("writes", {"readOnlyHint": True}, False),
    ("writes", {"readOnlyHint": False}, True),
    ("writes", None, True),  # a tool that says nothing of itself may change things
    ("writes", {}, True),
    ("writes", {"readOnlyHint": True, "destructiveHint": True}, True),  # the careful hint
    ("writes", {"readOnlyHint": "yes"}, True),  # not a boolean: not read as one
    ("always", {"readOnlyHint": True}, True),
    ("never", {"destructiveHint": True}, False),
])
def test_which_calls_ask(approval, annotations, expected):
    assert asks(approval, annotations, "t") is expected


def test_auto_approved_tools_never_ask_and_the_request_names_the_call():
    assert not asks("always", None, "add_note", ["add_note"])
    assert asks("always", None, "clear_notes", ["add_note"])
    said = request("notes__add_note", {"text": "x" * 1000})
    assert said.startswith('notes__add_note {"text": "xxx') and len(said) < 360


def _clients(tmp_path: Path, **kw) -> McpClients:
    clients = McpClients({"notes": McpServer(command=sys.executable,
                                             args=[NOTES, str(tmp_path / "notes.txt")],
                                             connection_timeout_ms=60_000, **kw)},
                         logs=tmp_path / "logs")
    assert clients.start() == []
    return clients


def _turn(tmp_path: Path, clients: McpClients, approve=None) -> tuple[list, list]:
    provider = ScriptedProvider([
        Reply("", [tool("notes__add_note", text="buy milk")]),
        Reply("", [tool("notes__read_notes")]), "Done."])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    rt.approve = approve
    session = Session.open(rt, KEY)
    events = list(session.run_turn("note: buy milk"))
    finished = [(e.name, e.is_error) for e in events if isinstance(e, ToolFinished)]
    results = [e["content"][0]["text"] for e in transcript_entries(session)
               if e.get("role") == "toolResult"]
    return finished, results


@pytest.mark.slow
def test_with_nobody_to_ask_a_write_is_refused_and_a_read_runs(tmp_path):
    clients = _clients(tmp_path)
    try:
        finished, results = _turn(tmp_path, clients)
    finally:
        clients.close()
    assert finished == [("notes__add_note", True), ("notes__read_notes", False)]
    assert "needs a person's approval" in results[0] and 'approval: "never"' in results[0]
    assert not (tmp_path / "notes.txt").exists()  # nothing was written
    assert results[1].endswith("(no notes)")


@pytest.mark.slow
@pytest.mark.parametrize("answer", [True, False])
def test_a_person_is_asked_before_a_write_and_not_before_a_read(tmp_path, answer):
    asked: list[str] = []

    def approve(what: str) -> bool:
        asked.append(what)
        return answer

    clients = _clients(tmp_path)
    try:
        finished, results = _turn(tmp_path, clients, approve)
    finally:
        clients.close()
    assert asked == ['notes__add_note {"text": "buy milk"}']  # the read was not put to them
    written = (tmp_path / "notes.txt").read_text() if answer else None
    assert finished[0] == ("notes__add_note", not answer)
    if answer:
        assert written == "buy milk\n" and results[1].endswith("buy milk\n")
    else:
        assert "declined" in results[0] and not (tmp_path / "notes.txt").exists()


@pytest.mark.slow
def test_approval_never_lets_a_write_run_with_nobody_to_ask_and_always_asks_for_reads(
        tmp_path):
    clients = _clients(tmp_path, approval="never")
    try:
        finished, _ = _turn(tmp_path, clients)
    finally:
        clients.close()
    assert finished == [("notes__add_note", False), ("notes__read_notes", False)]
    assert (tmp_path / "notes.txt").read_text() == "buy milk\n"
    asked: list[str] = []
    strict = _clients(tmp_path / "s", approval="always")
    try:
        _turn(tmp_path / "s", strict, lambda what: asked.append(what) or True)
    finally:
        strict.close()
    assert [a.split()[0] for a in asked] == ["notes__add_note", "notes__read_notes"]


@pytest.mark.slow
def test_a_one_shot_chat_refuses_an_mcp_write(isolated_home, local_server, capfd, fresh_mcp):
    from clawd.frontends.cli import main

    from conftest import write_local_config
    from fakeserver import openai_stream

    write_local_config(isolated_home, local_server.url)
    path = isolated_home / ".clawd" / "clawd.json"
    notes = isolated_home / "notes.txt"
    config = json.loads(path.read_text())
    config["mcp"] = {"servers": {"notes": {"command": sys.executable,
                                           "args": [NOTES, str(notes)]}}}
    path.write_text(json.dumps(config))
    local_server.queue("POST", "/v1/chat/completions", lambda r: openai_stream("", [
        {"id": "call_1", "name": "notes__add_note", "arguments": {"text": "pwned"}}]))
    local_server.queue("POST", "/v1/chat/completions", lambda r: openai_stream("Refused."))
    assert main(["chat", "-m", "add a note"]) == 0
    assert not notes.exists()
    sent = local_server.requests[-1].json()["messages"][-1]
    assert sent["role"] == "tool" and "needs a person's approval" in sent["content"]


@pytest.mark.slow
@pytest.mark.parametrize("answer", [True, False])
def test_the_web_page_asks_and_the_answer_decides(tmp_path, answer):
    """A turn sent as the page sends it (``approvals: true``) gets an ``approval`` event and
    waits for the answer; one sent without it is refused, as in a ``-m`` run."""
    from gateway_client import AUTH, gateway, page_turn, send

    clients = _clients(tmp_path)
    provider = ScriptedProvider([
        Reply("", [tool("notes__add_note", text="from the page")]), "Noted.",
        Reply("", [tool("notes__add_note", text="from a script")]), "Refused."])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    try:
        with gateway(tmp_path, provider, runtimes=[rt]) as client:
            turn, lines, said = page_turn(client, "note this",
                                          lambda line: [{"approve": answer}])
            assert [r.status_code for r in said] == [200], [r.text for r in said]
            again = client.post(f"/api/turns/{turn}/approvals/{lines[-1].get('id', 1)}",
                                headers=AUTH, json={"approve": True})
            assert again.status_code == 404  # nothing waits any more
            scripted = send(client, "note this too")
    finally:
        clients.close()
    asked = next(line for line in lines if line["type"] == "approval")
    assert asked["text"] == 'notes__add_note {"text": "from the page"}'
    assert any(line["type"] == "approvalAnswered" and line["approved"] is answer
               for line in lines)
    result = next(line for line in lines if line["type"] == "toolResult")
    assert result["isError"] is (not answer)
    written = (tmp_path / "notes.txt").read_text() if (tmp_path / "notes.txt").exists() else ""
    assert written == ("from the page\n" if answer else "")
    refused = next(line for line in scripted if line["type"] == "toolResult")
    assert refused["isError"] and "nobody can give it in this turn" in refused["text"]
    assert not any(line["type"] == "approval" for line in scripted)
