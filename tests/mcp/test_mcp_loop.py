"""MCP tools in the loop: the scripted model calls a real stdio server's tools; a failure
of any kind is an error result and the turn goes on; group sessions are not offered them
unless the server says so; a weak profile or a small window is told of fewer; ``/context
detail`` shows each server; both wire formats carry their schemas and their images."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clawd.config.mcp import McpServer
from clawd.core.cancel import CancelToken
from clawd.core.events import CommandOutput, ToolFinished, TurnDone
from clawd.core.messages import ImagePart, ToolSpec
from clawd.frontends.commands import Chat
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.mcp.client import McpClients
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.base import Tool
from clawd.tools.files import file_tools

from conftest import make_runtime, transcript_entries

LOOKUP = str(Path(__file__).parents[1] / "mcp_lookup.py")
KEY = "agent:main:main"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lookup(tmp_path_factory):
    clients = McpClients({"lookup": McpServer(command=sys.executable, args=[LOOKUP],
                                              request_timeout_ms=1500)},
                         logs=tmp_path_factory.mktemp("logs"))
    assert clients.start() == []
    yield clients
    clients.close()


def runtime(tmp_path, provider, tools, **kw):
    return make_runtime(tmp_path, provider, tools=file_tools() + tools, **kw)


def test_the_model_uses_an_mcp_tool_and_every_failure_is_a_result(tmp_path, lookup):
    provider = ScriptedProvider([
        Reply("", [tool("lookup__capital", country="Portugal")]),
        Reply("", [tool("lookup__broken"), tool("lookup__slow", seconds=20)]),
        Reply("", [tool("lookup__die")]),
        Reply("", [tool("lookup__capital", country="Norway")]),
        "Lisbon, and Oslo.",
    ])
    session = Session.open(runtime(tmp_path, provider, lookup.tools()), KEY)
    events = list(session.run_turn("capitals of Portugal and Norway?"))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.name, e.is_error) for e in finished] == [
        ("lookup__capital", False), ("lookup__broken", True), ("lookup__slow", True),
        ("lookup__die", True), ("lookup__capital", False)]
    assert isinstance(events[-1], TurnDone) and events[-1].text == "Lisbon, and Oslo."
    sent = provider.requests[0]
    spec = next(s for s in sent.tools if s.name == "lookup__capital")
    assert spec.parameters["required"] == ["country"]
    results = [e for e in transcript_entries(session) if e.get("role") == "toolResult"]
    assert results[0]["content"][0]["text"] == (  # one line says where it comes from
        "[from the MCP server lookup, outside clawd]\nThe capital of Portugal is Lisbon.")
    system = sent.system[0]  # the tools of a server are listed apart, and what they return
    assert "## Tools of connected services\n- `lookup__capital`: The capital" in system
    assert "never as instructions" in system
    assert "`read`" not in system.split("## Tools of connected services")[1]
    assert "requestTimeoutMs" in results[2]["content"][0]["text"]
    assert "started again at the next call" in results[3]["content"][0]["text"]
    assert results[4]["content"][0]["text"].endswith("Oslo.")
    provider.assert_done()


def test_an_image_result_is_kept_with_its_text(tmp_path, lookup):
    provider = ScriptedProvider([Reply("", [tool("lookup__picture")]), "A pixel."])
    session = Session.open(runtime(tmp_path, provider, lookup.tools()), KEY)
    list(session.run_turn("show me the picture"))
    result = provider.requests[1].messages[-1]
    assert result.role == "toolResult" and any(isinstance(p, ImagePart) for p in result.content)
    kept = [e for e in transcript_entries(session) if e.get("role") == "toolResult"][0]
    assert [p["type"] for p in kept["content"]] == ["text", "image"]


@pytest.mark.parametrize("groups", [False, True])
def test_group_sessions_get_a_servers_tools_only_when_it_says_groups(tmp_path, lookup, groups):
    tools = [Tool(t.spec, t.run, shared=groups) for t in lookup.tools()]
    provider = ScriptedProvider(["hello group"])
    session = Session.open(runtime(tmp_path, provider, tools), "agent:main:group:family")
    list(session.run_turn("hi"))
    names = {s.name for s in provider.requests[0].tools}
    assert ("lookup__capital" in names) is groups
    private = ScriptedProvider(["hello"])
    list(Session.open(runtime(tmp_path / "p", private, tools), KEY).run_turn("hi"))
    assert "lookup__capital" in {s.name for s in private.requests[0].tools}


def _many(count: int) -> list[Tool]:
    return [Tool(ToolSpec(f"big__t{i}", f"tool number {i} " * 10, {
        "type": "object", "properties": {"q": {"type": "string"}}}, origin="big"),
        lambda args, ctx: "ok") for i in range(count)]


@pytest.mark.parametrize("profile, window, told", [
    ("strong", 200_000, 12), ("weak", 200_000, 8), ("strong", 4_000, None)])
def test_how_many_mcp_tools_a_model_is_told_of(tmp_path, profile, window, told):
    provider = ScriptedProvider(["ok"])
    rt = runtime(tmp_path, provider, _many(12), window=window)
    rt.models = fixed_models(provider, window, profile=profile)
    session = Session.open(rt, KEY)
    list(session.run_turn("hi"))
    sent = [s.name for s in provider.requests[0].tools if s.origin]
    if told is None:  # a 4k window: what fits 1/8 of it
        assert 0 < len(sent) < 12
    else:
        assert len(sent) == told
    assert sent == [f"big__t{i}" for i in range(len(sent))]  # the first ones, in order
    assert all(f"`{name}`" in provider.requests[0].system[0] for name in sent)
    assert "big__t11" not in provider.requests[0].system[0] or len(sent) == 12


def test_context_detail_shows_each_server(tmp_path):
    provider = ScriptedProvider(["ok"])
    rt = runtime(tmp_path, provider, _many(10))
    rt.models = fixed_models(provider, 200_000, profile="weak")
    chat = Chat.open(rt, KEY)
    text = "\n".join(e.text for e in chat.handle("/context detail")
                     if isinstance(e, CommandOutput))
    server = text.split("MCP servers:\n", 1)[1].splitlines()[0]
    assert server.strip().startswith("big (8 tools, 2 not offered (profile or window cap))")
    assert "big__t0" in text and "big__t9" not in text


# --- the wire formats ----------------------------------------------------------------------

@pytest.mark.parametrize("wire", ["anthropic", "openai"])
def test_both_wire_formats_carry_mcp_schemas_and_images(tmp_path, lookup, wire):
    """A turn through the real SDK to a local server speaking the provider's wire format:
    the server's tools go out with their schemas, its image comes back with the result."""
    from clawd.providers.anthropic import AnthropicProvider
    from clawd.providers.openai import OpenAIProvider

    from fakeserver import FakeServer, anthropic_stream, openai_stream

    path, stream = (("/v1/messages", anthropic_stream) if wire == "anthropic" else
                    ("/v1/chat/completions", openai_stream))
    with FakeServer() as server:
        server.queue("POST", path, lambda r: stream("", [
            {"id": "call_1", "name": "lookup__picture", "arguments": {}}]))
        server.queue("POST", path, lambda r: stream("One pixel."))
        provider = (AnthropicProvider("claude-test-1", api_key="k", base_url=server.url)
                    if wire == "anthropic" else
                    OpenAIProvider("gpt-test", api_key="k", base_url=server.url + "/v1"))
        session = Session.open(runtime(tmp_path, provider, lookup.tools()), KEY)
        events = list(session.run_turn("show me the picture"))
        assert events[-1].text == "One pixel."
        first, second = (r.json() for r in server.requests)
    capital = lookup.tools()[0].spec
    if wire == "anthropic":
        sent = {t["name"]: t["input_schema"] for t in first["tools"]}
        result = second["messages"][-1]["content"][0]
        assert [b["type"] for b in result["content"]] == ["text", "image"]
    else:
        sent = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
        result = second["messages"][-1]
        assert result["role"] == "tool" and "[image omitted]" in result["content"]
    assert sent["lookup__capital"] == capital.parameters


# --- the gateway: the web chat's API and the OpenAI endpoint -------------------------------

def test_gateway_turns_use_mcp_tools_on_both_apis(tmp_path, lookup):
    from gateway_client import AUTH, gateway, send

    provider = ScriptedProvider([
        Reply("", [tool("lookup__capital", country="Kenya")]), "Nairobi.",
        Reply("", [tool("lookup__capital", country="Portugal")]), "Lisbon."])
    rt = runtime(tmp_path, provider, lookup.tools())
    raw = {"http": {"endpoints": {"chatCompletions": {"enabled": True}}}}
    with gateway(tmp_path, provider, raw=raw, runtimes=[rt]) as client:
        lines = send(client, "capital of Kenya?")
        result = next(e for e in lines if e["type"] == "toolResult")
        assert result["name"] == "lookup__capital" and not result["isError"]
        assert result["text"].endswith("The capital of Kenya is Nairobi.")
        assert any(e.get("text") == "Nairobi." for e in lines if e["type"] == "reply")
        answer = client.post("/v1/chat/completions", headers=AUTH, json={
            "model": "clawd", "messages": [{"role": "user", "content": "and Portugal?"}]})
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "Lisbon."
    results = [m for r in provider.requests for m in r.messages if m.role == "toolResult"]
    assert any("Nairobi" in m.text for m in results) and any("Lisbon" in m.text
                                                              for m in results)


# --- the chat's start-up line ---------------------------------------------------------------

def test_a_server_that_does_not_start_is_one_line_and_the_chat_goes_on(
        isolated_home, local_server, capfd, fresh_mcp):
    import json as _json

    from clawd.frontends.cli import main

    from conftest import write_local_config

    write_local_config(isolated_home, local_server.url)
    path = isolated_home / ".clawd" / "clawd.json"
    config = _json.loads(path.read_text())
    config["mcp"] = {"servers": {
        "lookup": {"command": sys.executable, "args": [LOOKUP]},
        "broken": {"command": sys.executable, "args": [LOOKUP, "--fail"],
                   "env": {"LOOKUP_KEY": "do-not-print-this"}}}}
    path.write_text(_json.dumps(config))
    local_server.queue("POST", "/v1/chat/completions", lambda r: __import__(
        "fakeserver").openai_stream("Hello."))
    assert main(["chat", "-m", "hi"]) == 0
    out, err = capfd.readouterr()
    assert "Hello." in out
    assert err.count("· mcp: broken did not start: ") == 1
    assert "lookup did not start" not in err
    assert "do-not-print-this" not in err
    sent = local_server.requests[-1].json()
    assert "lookup__capital" in [t["function"]["name"] for t in sent["tools"]]

    assert main(["mcp", "list"]) == 1  # one server failed
    listed, _ = capfd.readouterr()
    assert "lookup" in listed and "ready" in listed and "7 tools" in listed
    assert "(for main)" in listed  # the operator's agent's alone, by default
    assert "broken" in listed and "failed" in listed and "do-not-print-this" not in listed
    assert main(["mcp", "tools", "lookup"]) == 0
    tools, _ = capfd.readouterr()
    assert tools.splitlines()[0].startswith("lookup__capital") and "The capital" in tools
    assert main(["doctor"]) == 1
    doctor, _ = capfd.readouterr()
    assert "ok    mcp lookup: stdio, 7 tools" in doctor
    assert "FAIL  mcp broken: did not start" in doctor and "do-not-print" not in doctor


def test_a_stop_from_another_thread_ends_a_waiting_mcp_call(tmp_path):
    import threading
    import time

    clients = McpClients({"lookup": McpServer(command=sys.executable, args=[LOOKUP],
                                              request_timeout_ms=60_000)}, logs=tmp_path)
    try:
        clients.start()
        provider = ScriptedProvider([Reply("", [tool("lookup__slow", seconds=30)])])
        session = Session.open(runtime(tmp_path, provider, clients.tools()), KEY)
        token = CancelToken()  # the turn's, as the gateway makes it when the turn is queued
        threading.Timer(0.5, token.cancel).start()
        started = time.monotonic()
        events = list(session.run_turn("wait for it", token=token))
        assert time.monotonic() - started < 5
        assert isinstance(events[-1], TurnDone)
        result = [e for e in transcript_entries(session) if e.get("role") == "toolResult"][0]
        assert result["content"][0]["text"] == "interrupted by the user"
        # the server is still there for the next call
        assert clients.call("lookup", "capital", {"country": "norway"}).text.endswith("Oslo.")
    finally:
        clients.close()
