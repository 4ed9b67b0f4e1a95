"""A server's question during a call (MCP elicitation): the fields read as their types,
asked on the terminal in the REPL (``TerminalQuestions``), declined where nobody can answer;
a real SDK server (``tests/mcp_notes.py``'s ``introduce``) gets the answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clawd.config.mcp import McpServer
from clawd.frontends.questions import TerminalQuestions
from clawd.mcp.client import McpClients
from clawd.mcp.elicit import Field, clean, coerce, fields

NOTES = str(Path(__file__).parents[1] / "mcp_notes.py")


def test_fields_and_answers_are_read_as_their_types():
    found = fields({"type": "object", "required": ["age"], "properties": {
        "age": {"type": "integer", "description": "in years\x1b[2J"},
        "tea": {"type": "boolean"}, "size": {"type": "string", "enum": ["S", "M"]},
        "note": {"type": "string", "default": "none"}}})
    assert [(f.name, f.kind, f.required) for f in found] == [
        ("age", "integer", True), ("tea", "boolean", False), ("size", "string", False),
        ("note", "string", False)]
    assert found[0].prompt() == "age (in years[2J) [integer]: "
    assert coerce(found[0], " 36 ") == 36 and coerce(found[1], "Y") is True
    assert coerce(found[2], "M") == "M" and coerce(found[3], "") == "none"
    assert coerce(found[1], "") is None  # not required: skipped
    for field, text, said in [(found[0], "", "required"), (found[0], "x", "an integer"),
                              (found[1], "maybe", "y or n"), (found[2], "XL", "one of S, M")]:
        with pytest.raises(ValueError, match=said):
            coerce(field, text)
    assert clean("a\x1b[31m\nb\u202e") == "a[31m b"
    assert Field("x", "number", "", False).prompt() == "x [number, Enter to skip]: "


def _clients(tmp_path: Path) -> McpClients:
    clients = McpClients({"notes": McpServer(command=sys.executable, args=[
        NOTES, str(tmp_path / "notes.txt")], connection_timeout_ms=60_000)},
        logs=tmp_path / "logs")
    clients.start()
    return clients


@pytest.mark.slow
def test_a_servers_question_is_put_to_the_person_and_declined_without_one(tmp_path):
    answers = iter(["Ada", "thirty", "36", "y"])
    said: list[str] = []
    clients = _clients(tmp_path)
    try:
        nobody = clients.call("notes", "introduce", {})
        clients.elicit = TerminalQuestions(ask=lambda prompt: said.append(prompt) or next(
            answers), say=said.append)
        answered = clients.call("notes", "introduce", {})
        clients.elicit = TerminalQuestions(ask=lambda prompt: (_ for _ in ()).throw(
            EOFError()), say=said.append)
        declined = clients.call("notes", "introduce", {})
    finally:
        clients.close()
    assert nobody.text.endswith("no answer (decline)")
    assert answered.text.endswith("hello Ada, 36, likes tea: True")
    assert said[0] == "notes asks: Who are you?[31m"  # the escape is not sent to the terminal
    assert "name (your first name) [string]: " in said and "  an integer" in said
    assert declined.text.endswith("no answer (decline)")


@pytest.mark.slow
def test_the_web_page_gets_the_question_as_a_form(tmp_path):

    from clawd.providers.scripted import Reply, ScriptedProvider, tool
    from clawd.tools.files import file_tools

    from conftest import make_runtime
    from gateway_client import gateway, page_turn, send

    clients = _clients(tmp_path)
    provider = ScriptedProvider([Reply("", [tool("notes__introduce")]), "Hello Ada.",
                                 Reply("", [tool("notes__introduce")]), "No answer."])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    rt.mcp = clients
    try:
        with gateway(tmp_path, provider, runtimes=[rt]) as client:
            _, lines, said = page_turn(client, "introduce me", lambda line: [
                {"approve": True, "values": {"name": "Ada", "age": "old"}},
                {"approve": True, "values": {"name": "Ada", "age": "36", "tea": "y"}}])
            refused = said[0]
            scripted = send(client, "again")  # sent without approvals: nobody to ask
    finally:
        clients.close()
    asked = next(line for line in lines if line["type"] == "question")
    assert asked["text"] == "notes asks: Who are you?[31m"
    assert [(f["name"], f["kind"], f["required"]) for f in asked["fields"]] == [
        ("name", "string", True), ("age", "integer", True), ("tea", "boolean", True)]
    assert refused is not None and refused.status_code == 400 and "age" in refused.text
    result = next(line for line in lines if line["type"] == "toolResult")
    assert result["text"].endswith("hello Ada, 36, likes tea: True")
    declined = next(line for line in scripted if line["type"] == "toolResult")
    assert declined["text"].endswith("no answer (decline)")
