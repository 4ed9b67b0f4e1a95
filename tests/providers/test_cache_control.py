"""Prompt caching end to end: a session turn through the real Anthropic SDK on 127.0.0.1.

The runtime is built the way the command line builds it (``compose.build_runtime``: the
provider registry, ``uses_cache`` from the wire format), the model server is
``FakeServer`` speaking Anthropic's SSE, and the assertions read the JSON the SDK sent.
"""

from __future__ import annotations

import json

import pytest

from clawd.config import Config
from clawd.core.events import CommandOutput, TurnDone
from clawd.frontends.commands import Chat
from clawd.frontends.compose import build_runtime
from clawd.frontends.reports import format_status

from fakeserver import FakeServer, anthropic_stream

KEY = "agent:main:main"
PATH = "/v1/messages"
EPHEMERAL = {"type": "ephemeral"}
PLACEHOLDER = "[Old tool result content cleared]"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer() as srv:
        yield srv


def make_chat(tmp_path, server, clock, **pruning) -> Chat:
    workspace = tmp_path / "ws"
    (workspace / "logs").mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("# Operating instructions\nCheck logs before answering.\n")
    (workspace / "logs" / "build.log").write_text(
        "".join(f"step {i:05d}: compiled module ok\n" for i in range(1000)))
    config = Config.model_validate({
        "models": {"providers": {"anthropic": {
            "baseUrl": server.url, "maxRetries": 0,
            "models": [{"id": "claude-test-1", "contextWindow": 20000}]}}},
        "agents": {"defaults": {
            "workspace": str(workspace), "model": "anthropic/claude-test-1",
            "compaction": {"enabled": False, "memoryFlush": {"enabled": False}},
            "contextPruning": {"keepLastAssistants": 1, **pruning}}}})
    runtime = build_runtime(config, None)
    runtime.clock = clock
    return Chat.open(runtime, KEY)


def read_then_answer(server, *, answer: str = "The build log is clean.") -> None:
    server.queue("POST", PATH,
                 lambda r: anthropic_stream("", [{"id": "toolu_01", "name": "read",
                                                  "arguments": {"path": "logs/build.log"}}],
                                            usage={"input_tokens": 1200,
                                                   "cache_creation_input_tokens": 3000}),
                 lambda r: anthropic_stream(answer, usage={
                     "input_tokens": 40, "output_tokens": 7,
                     "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 900}))


def turn(chat: Chat, text: str) -> TurnDone:
    return [e for e in chat.handle(text) if isinstance(e, TurnDone)][-1]


def test_session_requests_carry_cache_breakpoints(tmp_path, server, clock):
    read_then_answer(server)
    chat = make_chat(tmp_path, server, clock)
    done = turn(chat, "is the build ok?")
    assert done.text == "The build log is clean." and done.steps == 2

    first, second = (r.json() for r in server.requests)
    for body in (first, second):
        system = body["system"]
        assert len(system) >= 2  # the system prompt, then the project context
        assert system[-1]["cache_control"] == EPHEMERAL
        assert all("cache_control" not in block for block in system[:-1])
        assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
        assert json.dumps(body).count("cache_control") == 2
    # the breakpoint moves to the newest message: now the tool result, sent whole
    result = second["messages"][-1]["content"][-1]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
    log = (tmp_path / "ws" / "logs" / "build.log").read_text()
    assert result["content"][0]["text"] == log
    assert first["messages"][-1]["content"][-1]["text"] == "is the build ok?"


def test_cache_usage_reaches_status(tmp_path, server, clock):
    read_then_answer(server)
    chat = make_chat(tmp_path, server, clock)
    turn(chat, "is the build ok?")
    entry = chat.session.store.get(KEY)
    assert (entry["cumulativeInputTokens"], entry["cumulativeCacheReadTokens"],
            entry["cumulativeCacheWriteTokens"]) == (1240, 3000, 3900)
    assert entry["inputTokens"] == 1240  # one turn: the latest turn's input is all of it
    status = format_status(chat.session)
    assert "in 1,240" in status and "cache read 3,000 · cache write 3,900" in status
    shown = [e.text for e in chat.handle("/status") if isinstance(e, CommandOutput)]
    assert shown == [status]
    # the context size counts cache reads and writes (docs/conversations.md):
    # 40 + 3000 + 900 + 7 output
    assert chat.session.context_tokens() >= 3947


def test_pruned_request_still_carries_breakpoints(tmp_path, server, clock):
    """Past the ttl the old log is trimmed in the request, the cache markers stay, and the
    transcript keeps the full log. (The fake usage counts far fewer tokens than the log
    holds, so the calibrated context looks small: a low softTrimRatio makes it prunable.)"""
    read_then_answer(server)
    chat = make_chat(tmp_path, server, clock, softTrimRatio=0.05)
    turn(chat, "is the build ok?")
    on_disk = chat.session.transcript.path.read_bytes()

    server.queue("POST", PATH, lambda r: anthropic_stream("Nothing changed."))
    clock.advance(minutes=6)
    turn(chat, "anything new?")
    third = server.requests[-1].json()
    tool_result = third["messages"][2]["content"][0]
    assert tool_result["type"] == "tool_result"
    text = tool_result["content"][0]["text"]
    assert "[Tool result trimmed: kept first 1500 and last 1500 of" in text
    assert text.startswith("step 00000") and "step 00999" in text and "step 00500" not in text
    assert third["system"][-1]["cache_control"] == EPHEMERAL
    assert third["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert chat.session.transcript.path.read_bytes().startswith(on_disk)
    assert b"Tool result trimmed" not in chat.session.transcript.path.read_bytes()


def test_within_the_ttl_the_cached_prefix_is_resent_unchanged(tmp_path, server, clock):
    read_then_answer(server)
    chat = make_chat(tmp_path, server, clock)
    turn(chat, "is the build ok?")
    server.queue("POST", PATH, lambda r: anthropic_stream("Nothing changed."))
    clock.advance(minutes=4)
    turn(chat, "anything new?")
    second, third = server.requests[1].json(), server.requests[2].json()

    def strip(block: dict) -> dict:
        return {k: v for k, v in block.items() if k != "cache_control"}

    # everything the second request sent is a prefix of the third: the cache can hit
    assert [strip(b) for b in third["system"]] == [strip(b) for b in second["system"]]
    prefix = second["messages"]
    assert [[strip(b) for b in m["content"]] for m in third["messages"][:len(prefix)]] == [
        [strip(b) for b in m["content"]] for m in prefix]
