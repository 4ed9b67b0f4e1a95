"""The Anthropic and OpenAI adapters through the real SDKs against a server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.messages import Message, ModelRequest, ModelResponse, TextDelta, ToolCall, ToolSpec
from clawd.providers import common
from clawd.providers.anthropic import AnthropicProvider
from clawd.providers.base import complete
from clawd.providers.openai import OpenAIProvider

from fakeserver import (
    FakeServer,
    anthropic_error,
    anthropic_events,
    anthropic_stream,
    anthropic_stream_error,
    openai_error,
    openai_stream,
    stream_response,
)

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"
READ_TOOL = ToolSpec("read", "Read a file", {"type": "object",
                                             "properties": {"path": {"type": "string"}}})


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAWD_HOME", str(tmp_path / ".clawd"))
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_AUTH_TOKEN", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with FakeServer() as srv:
        yield srv


class Sleeps(list):
    """Records the waits the retry loop asked for instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def anthropic(server, **kw) -> AnthropicProvider:
    kw.setdefault("sleep", Sleeps())
    return AnthropicProvider("claude-test-1", api_key="test-key", base_url=server.url,
                             retry_base_delay=0.0, rng=lambda: 0.0, **kw)


def openai(server, **kw) -> OpenAIProvider:
    kw.setdefault("sleep", Sleeps())
    return OpenAIProvider("gpt-test", api_key="test-key", base_url=server.url + "/v1",
                          retry_base_delay=0.0, rng=lambda: 0.0, **kw)


def request(*messages: Message, cache: bool = False, tools=()) -> ModelRequest:
    return ModelRequest(system=["You are a test.", "## AGENTS.md\nbe brief"],
                        messages=list(messages) or [Message.user("hi")], tools=list(tools),
                        max_tokens=321, cache=cache)


def run(provider, req: ModelRequest) -> tuple[list[str], ModelResponse]:
    deltas, final = [], []
    for event in provider.stream(req):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            final.append(event)
    assert len(final) == 1 and isinstance(final[0], ModelResponse)
    return deltas, final[0]


def history_with_tool_results() -> list[Message]:
    first = ToolCall("call_1", "read", {"path": "a.md"})
    second = ToolCall("call_2", "read", {"path": "missing.md"})
    return [Message.user("read both"),
            Message.assistant("Reading.", [first, second]),
            Message.tool_result(first, "alpha"),
            Message.tool_result(second, "no such file", is_error=True)]


# --- Anthropic ---------------------------------------------------------------------------------

def test_anthropic_streams_text_deltas_then_one_response(server):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("Hello there, world!"))
    deltas, final = run(anthropic(server), request())
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, world!"
    message = final.message
    assert message.role == "assistant" and message.text == "Hello there, world!"
    assert message.stop_reason == "stop" and message.model == "claude-test-1"
    sent = server.requests[0]
    assert sent.json()["stream"] is True and sent.json()["max_tokens"] == 321
    assert sent.json()["system"][0] == {"type": "text", "text": "You are a test."}
    auth = sent.headers.get("x-api-key", "") + sent.headers.get("authorization", "")
    assert "test-key" in auth


def test_anthropic_tool_call_round_trip(server):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream(
        "Reading.", [{"id": "toolu_1", "name": "read", "arguments": {"path": "a.md"}},
                     {"id": "toolu_2", "name": "read", "arguments": {"path": "b.md"}}]))
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("Done."))
    provider = anthropic(server)
    _, final = run(provider, request(Message.user("read"), tools=[READ_TOOL]))
    calls = final.message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("toolu_1", "read", {"path": "a.md"}), ("toolu_2", "read", {"path": "b.md"})]
    assert final.message.stop_reason == "toolUse"
    assert server.requests[0].json()["tools"] == [
        {"name": "read", "description": "Read a file", "input_schema": READ_TOOL.parameters}]

    run(provider, request(*history_with_tool_results()))
    wire = server.requests[1].json()["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"][1] == {"type": "tool_use", "id": "call_1", "name": "read",
                                     "input": {"path": "a.md"}}
    results = wire[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "call_1",
                          "content": [{"type": "text", "text": "alpha"}]}
    assert results[1]["tool_use_id"] == "call_2" and results[1]["is_error"] is True


def test_anthropic_usage_includes_cache_tokens(server):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("ok", usage={
        "input_tokens": 12, "output_tokens": 34, "cache_read_input_tokens": 5000,
        "cache_creation_input_tokens": 700}))
    _, final = run(anthropic(server), request())
    usage = final.message.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.cache_write_tokens) == (12, 34, 5000, 700)
    assert usage.prompt_tokens == 5712


def test_anthropic_cache_control_only_when_asked(server):
    server.default("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("ok"))
    history = history_with_tool_results()
    provider = anthropic(server)
    run(provider, request(*history, cache=True))
    run(provider, request(*history, cache=False))
    cached, plain = server.requests[0].json(), server.requests[1].json()
    assert cached["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in cached["system"][0]
    assert cached["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(cached).count("cache_control") == 2
    assert "cache_control" not in json.dumps(plain)


@pytest.mark.parametrize("status", [429, 500, 529])
def test_anthropic_retries_transient_errors_then_succeeds(server, status):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_error(status, "slow down"),
                 lambda r: anthropic_stream("recovered"))
    provider = anthropic(server)
    deltas, final = run(provider, request())
    assert final.message.text == "recovered" and len(server.requests) == 2
    assert provider._sleep == [0.0]


def test_anthropic_honours_retry_after(server):
    server.queue("POST", ANTHROPIC_PATH,
                 lambda r: anthropic_error(429, "rate limited", headers={"retry-after": "7"}),
                 lambda r: anthropic_stream("ok"))
    heard = []
    provider = anthropic(server, on_retry=lambda err, n, delay: heard.append((err.status, n,
                                                                              delay)))
    run(provider, request())
    assert provider._sleep == [7.0] and heard == [(429, 1, 7.0)]


def test_anthropic_gives_up_after_max_retries(server):
    server.default("POST", ANTHROPIC_PATH, lambda r: anthropic_error(529, "Overloaded"))
    provider = anthropic(server, max_retries=2)
    with pytest.raises(ProviderError) as info:
        list(provider.stream(request()))
    assert len(server.requests) == 3 and info.value.retryable and info.value.status == 529
    assert "overloaded_error" in str(info.value) and "\n" not in str(info.value)
    assert provider._sleep == [0.0, 0.0]


@pytest.mark.parametrize("status,message", [
    (400, "prompt is too long: 208310 tokens > 200000 maximum"),
    (413, "Request exceeds the maximum allowed number of bytes."),
])
def test_anthropic_overflow_becomes_context_overflow(server, status, message):
    server.default("POST", ANTHROPIC_PATH, lambda r: anthropic_error(status, message))
    with pytest.raises(ContextOverflowError) as info:
        list(anthropic(server).stream(request()))
    assert info.value.overflow and info.value.status == status
    assert len(server.requests) == 1


def test_anthropic_client_errors_are_not_retried_and_stay_ours(server):
    server.default("POST", ANTHROPIC_PATH,
                   lambda r: anthropic_error(401, "invalid x-api-key"))
    with pytest.raises(ProviderError) as info:
        list(anthropic(server).stream(request()))
    assert type(info.value) is ProviderError and not info.value.retryable
    assert "401" in str(info.value) and "API key" in str(info.value)
    assert len(server.requests) == 1


def test_anthropic_stream_cut_mid_reply_raises_after_deltas(server):
    server.default("POST", ANTHROPIC_PATH,
                   lambda r: anthropic_stream("Hello there, world!", cut_after=5))
    seen = []
    with pytest.raises(ProviderError) as info:
        for event in anthropic(server).stream(request()):
            seen.append(event)
    assert seen and all(isinstance(e, TextDelta) for e in seen)
    assert "mid-stream" in str(info.value) and not info.value.retryable
    assert len(server.requests) == 1  # text was shown: no silent second attempt


def test_anthropic_stream_cut_before_text_is_retried(server):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("lost", cut_after=1),
                 lambda r: anthropic_stream("second try"))
    _, final = run(anthropic(server), request())
    assert final.message.text == "second try" and len(server.requests) == 2


def test_anthropic_error_event_inside_stream_is_retried(server):
    events = anthropic_events("never")[:1] + [anthropic_stream_error()]
    server.queue("POST", ANTHROPIC_PATH, lambda r: stream_response(events),
                 lambda r: anthropic_stream("fine"))
    _, final = run(anthropic(server), request())
    assert final.message.text == "fine" and len(server.requests) == 2


def test_anthropic_sends_configured_headers(server):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("ok"))
    run(anthropic(server, headers={"X-Proxy-Team": "blue"}), request())
    assert server.requests[0].headers["x-proxy-team"] == "blue"


def test_unreachable_server_is_a_retryable_provider_error():
    with FakeServer() as srv:
        url = srv.url
    provider = AnthropicProvider("m", api_key="k", base_url=url, retry_base_delay=0.0,
                                 max_retries=1, sleep=Sleeps())
    with pytest.raises(ProviderError) as info:
        list(provider.stream(request()))
    assert info.value.retryable and "cannot connect" in str(info.value)



@pytest.mark.parametrize("make", [anthropic, openai])
def test_a_check_of_an_unreachable_server_names_the_url_it_tried(make):
    with FakeServer() as srv:
        closed = srv  # its port is closed once the server stops
    ok, said = make(closed).check(timeout=5)
    url = closed.url + ("/v1/" if make is openai else "")
    assert not ok and said.startswith(f"unreachable at {url}"), said
    assert "Connection error." not in said and "\n" not in said

# --- OpenAI ------------------------------------------------------------------------------------

def test_openai_streams_text_and_usage_with_cached_tokens(server):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("Hello there, world!", usage={
        "prompt_tokens": 1200, "completion_tokens": 9, "cached_tokens": 1000}))
    deltas, final = run(openai(server), request())
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, world!"
    message = final.message
    assert message.text == "Hello there, world!" and message.stop_reason == "stop"
    assert message.model == "gpt-test"
    usage = message.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (200, 9, 1000)
    sent = server.requests[0].json()
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] == 321
    assert sent["messages"][0] == {"role": "system",
                                   "content": "You are a test.\n\n## AGENTS.md\nbe brief"}
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


def test_openai_tool_call_round_trip(server):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("Reading.", [
        {"id": "call_a", "name": "read", "arguments": {"path": "a.md"}},
        {"id": "call_b", "name": "read", "arguments": {"path": "b/ü.md"}}]))
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("Done."))
    provider = openai(server)
    _, final = run(provider, request(tools=[READ_TOOL]))
    assert [(c.id, c.name, c.arguments) for c in final.message.tool_calls] == [
        ("call_a", "read", {"path": "a.md"}), ("call_b", "read", {"path": "b/ü.md"})]
    assert final.message.stop_reason == "toolUse"
    assert server.requests[0].json()["tools"][0] == {"type": "function", "function": {
        "name": "read", "description": "Read a file", "parameters": READ_TOOL.parameters}}

    run(provider, request(*history_with_tool_results()))
    wire = server.requests[1].json()["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool"]
    call = wire[2]["tool_calls"][0]
    assert call["id"] == "call_1" and call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"path": "a.md"}
    assert wire[3] == {"role": "tool", "tool_call_id": "call_1", "content": "alpha"}
    assert wire[4]["tool_call_id"] == "call_2" and "no such file" in wire[4]["content"]
    assert wire[4]["content"].startswith("ERROR")


def test_openai_invalid_tool_arguments_are_kept_raw(server):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "", [{"id": "call_x", "name": "read", "arguments": '{"path": "a.md"'}]))
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    provider = openai(server)
    _, final = run(provider, request())
    call = final.message.tool_calls[0]
    assert call.arguments == {"_raw": '{"path": "a.md"'}
    run(provider, request(Message.user("go"), final.message,
                          Message.tool_result(call, "bad arguments", is_error=True)))
    sent = server.requests[1].json()["messages"][2]["tool_calls"][0]
    assert sent["function"]["arguments"] == '{"path": "a.md"'


@pytest.mark.parametrize("status", [429, 500, 503])
def test_openai_retries_transient_errors_then_succeeds(server, status):
    server.queue("POST", OPENAI_PATH,
                 lambda r: openai_error(status, "try later", "rate_limit_exceeded"
                                        if status == 429 else None),
                 lambda r: openai_stream("recovered"))
    _, final = run(openai(server), request())
    assert final.message.text == "recovered" and len(server.requests) == 2


def test_openai_gives_up_after_max_retries(server):
    server.default("POST", OPENAI_PATH, lambda r: openai_error(500, "boom"))
    provider = openai(server, max_retries=3)
    with pytest.raises(ProviderError) as info:
        list(provider.stream(request()))
    assert len(server.requests) == 4 and info.value.retryable and info.value.status == 500
    assert "gave up after 4 attempts" in str(info.value)


@pytest.mark.parametrize("message,code", [
    ("This model's maximum context length is 128000 tokens. However, your messages "
     "resulted in 130000 tokens.", "context_length_exceeded"),
    ("Request too large: too many tokens in the prompt", None),
    ("the request exceeds the available context size, try increasing it", None),
])
def test_openai_overflow_becomes_context_overflow(server, message, code):
    server.default("POST", OPENAI_PATH, lambda r: openai_error(400, message, code))
    with pytest.raises(ContextOverflowError):
        list(openai(server).stream(request()))
    assert len(server.requests) == 1


def test_openai_stream_cut_mid_reply_raises_after_deltas(server):
    server.default("POST", OPENAI_PATH,
                   lambda r: openai_stream("Hello there, world!", cut_after=3))
    seen = []
    with pytest.raises(ProviderError) as info:
        for event in openai(server).stream(request()):
            seen.append(event)
    assert [e.text for e in seen] == ["Hello", " ther"]
    assert "mid-stream" in str(info.value) and "\n" not in str(info.value)
    assert len(server.requests) == 1


def test_openai_stream_without_finish_is_an_error(server):
    # The stream ends cleanly but the reply never finished: not a reply to keep.
    from fakeserver import openai_chunks
    chunks = openai_chunks("partial")
    server.default("POST", OPENAI_PATH, lambda r: stream_response(chunks[:1] + chunks[-1:]))
    with pytest.raises(ProviderError):
        list(openai(server, max_retries=0).stream(request()))


def test_complete_helper_returns_final_response(server):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("whole"))
    assert complete(openai(server), request()).message.text == "whole"


# --- pure policies ---------------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "toolUse"),
    ("max_tokens", "length"), ("stop", "stop"), ("tool_calls", "toolUse"),
    ("length", "length"), ("content_filter", "content_filter"), ("refusal", "refusal"),
    (None, None),
])
def test_stop_reason_normalised(raw, expected):
    assert common.stop_reason(raw) == expected


@pytest.mark.parametrize("text,expected", [
    ("prompt is too long: 208310 tokens > 200000 maximum", True),
    ("This model's maximum context length is 8192 tokens", True),
    ("context_length_exceeded", True),
    ("Too many tokens in request", True),
    ("input length and `max_tokens` exceed context limit: 199000 + 4096 > 200000", True),
    ("Rate limit reached for requests", False),
    ("Overloaded", False),
])
def test_overflow_phrases(text, expected):
    assert common.is_overflow_text(text) is expected


@pytest.mark.parametrize("status,kind,message,overflow,retryable", [
    (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000", True, False),
    (413, "request_too_large", "Request exceeds the maximum size", True, False),
    (400, "context_length_exceeded", "Please reduce the length of the messages.", True, False),
    (429, "rate_limit_error", "Too many tokens per minute, slow down", False, True),
    (429, "rate_limit_exceeded", "Request too large for gpt-4o on tokens per min", False, True),
    (529, "overloaded_error", "Overloaded", False, True),
    (400, "invalid_request_error", "messages: text content blocks must be non-empty",
     False, False),
    (None, "overloaded_error", "Overloaded", False, False),
])
def test_status_error_classification(status, kind, message, overflow, retryable):
    error = common.status_error("p", status, message, kind=kind)
    assert isinstance(error, ContextOverflowError) is overflow
    assert error.retryable is retryable and error.status == status
    assert str(error).startswith("p: ") and "\n" not in str(error)


@pytest.mark.parametrize("attempt,base,retry_after,jitter,expected", [
    (0, 1.0, None, 0.0, 1.0), (1, 1.0, None, 0.0, 2.0), (3, 1.0, None, 0.0, 8.0),
    (1, 1.0, None, 0.5, 2.25), (10, 1.0, None, 0.0, common.MAX_BACKOFF),
    (0, 1.0, 7.0, 0.9, 7.0), (0, 1.0, 10_000.0, 0.0, common.MAX_RETRY_AFTER),
    (2, 0.0, None, 0.9, 0.0),
])
def test_backoff_delay(attempt, base, retry_after, jitter, expected):
    assert common.backoff_delay(attempt, base, retry_after, jitter) == pytest.approx(expected)


@pytest.mark.parametrize("headers,expected", [
    ({}, None), ({"retry-after": "3"}, 3.0), ({"retry-after": "1.5"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25), ({"retry-after": "soon"}, None),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
])
def test_parse_retry_after(headers, expected):
    now = 1445412480.0  # 07:28:00 GMT that day
    assert common.parse_retry_after(headers, now=now) == expected


def test_pair_tool_calls_answers_orphans_both_ways():
    call = ToolCall("c1", "exec", {"cmd": "ls"})
    stray = Message.tool_result(ToolCall("gone", "read", {}), "old output")
    fixed = common.pair_tool_calls([stray, Message.user("go"), Message.assistant("", [call]),
                                    Message.user("never mind")])
    assert [m.role for m in fixed] == ["user", "user", "assistant", "toolResult", "user"]
    assert "old output" in fixed[0].text
    assert fixed[3].tool_call_id == "c1" and fixed[3].is_error


@pytest.mark.parametrize("raw,expected", [
    ('{"a": 1}', {"a": 1}), ("", {}), ("  ", {}), ("{bad", {"_raw": "{bad"}),
    ("[1, 2]", {"_raw": "[1, 2]"}),
])
def test_parse_arguments(raw, expected):
    assert common.parse_arguments(raw) == expected


@pytest.mark.slow  # starts a fresh interpreter
def test_adapters_do_not_import_the_sdks_at_module_import():
    code = ("import sys, clawd.providers.anthropic, clawd.providers.openai, "
            "clawd.providers.registry; "
            "print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"



def test_caller_can_stop_a_stream_early(server):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("a long reply " * 20))
    provider = openai(server)
    stream = provider.stream(request())
    assert isinstance(next(stream), TextDelta)
    stream.close()  # an abort: no error, no retry, the next call still works
    assert complete(provider, request()).message.text == "a long reply " * 20
    assert len(server.requests) == 2
