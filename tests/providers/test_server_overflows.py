"""What real OpenAI-compatible servers answer when a request does not fit, through the real
``openai`` SDK against the local fake server; and llama.cpp's tool calls with ``""`` content.

The bodies are the servers' own shapes: llama.cpp's server puts the HTTP status in ``code``
and ``exceed_context_size_error`` in ``type``; vLLM answers a top-level error object; LM
Studio and Ollama put a plain string in ``error``.
"""

from __future__ import annotations

import json

import pytest

from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.messages import Message, ModelRequest, ToolCall, ToolSpec
from clawd.providers.openai import OpenAIProvider

from fakeserver import FakeServer, Response, openai_chunks, stream_response

PATH = "/v1/chat/completions"

SERVERS = {
    "llama.cpp": (400, {"error": {
        "code": 400, "message": "request (9030 tokens) exceeds the available context size "
        "(8192 tokens), try increasing it", "type": "exceed_context_size_error",
        "n_prompt_tokens": 9030, "n_ctx": 8192}}),
    "llama.cpp (older)": (400, {"error": {
        "code": 400, "message": "the request exceeds the available context size, try "
        "increasing it", "type": "exceed_context_size_error"}}),
    "ollama": (500, {"error": {"message": "input length exceeds the context length",
                               "type": "api_error", "param": None, "code": None}}),
    "ollama (prompt too long)": (400, {"error": "prompt too long; exceeded max context "
                                                "length by 812 tokens"}),
    "vllm": (400, {"object": "error", "message": "This model's maximum context length is "
                   "8192 tokens. However, you requested 9100 tokens (8588 in the messages, "
                   "512 in the completion). Please reduce the length of the messages or "
                   "completion.", "type": "BadRequestError", "param": None, "code": 400}),
    "vllm (newer)": (400, {"object": "error", "message": "The prompt (total length 9030) is "
                           "too long to fit into the model (context length 8192).",
                           "type": "BadRequestError", "param": None, "code": 400}),
    "vllm (input prompt)": (400, {"object": "error", "message": "Input prompt (9030 tokens) "
                                  "is too long and exceeds limit of 8192",
                                  "type": "BadRequestError", "code": 400}),
    "lm studio": (400, {"error": "Trying to keep the first 9030 tokens when context the "
                        "overflows. However, the model is loaded with context length of only "
                        "8192 tokens, which is not enough. Try to load the model with a larger "
                        "context length, or provide a shorter input"}),
    "lm studio (keep)": (400, {"error": "The number of tokens to keep from the initial "
                               "prompt is greater than the context length."}),
    "proxy (maximum size)": (413, {"error": {"message": "Request exceeds the maximum size",
                                             "type": "request_too_large"}}),
    "proxy (context overflow)": (400, {"error": {"message": "Context overflow: prompt has "
                                                 "9030 tokens", "type": "invalid_request"}}),
    # a gateway in front of the model server passes its proxy's 413 on as a 502
    "proxy (413 behind a gateway)": (502, {"error": {"message": "upstream said: 413 Request "
                                                     "Entity Too Large", "type": "bad_gateway"}}),
    "proxy (payload too large)": (400, {"error": "Payload Too Large"}),
}


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def provider(server) -> OpenAIProvider:
    return OpenAIProvider("qwen", api_key="none", base_url=server.url + "/v1", name="local",
                          max_retries=2, max_tokens_field="max_tokens", sleep=lambda s: None)


def request(*messages: Message, tools=()) -> ModelRequest:
    return ModelRequest(system=["be brief"], messages=list(messages) or [Message.user("hi")],
                        tools=list(tools), max_tokens=64)


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_each_servers_overflow_answer_is_an_overflow(server, name):
    status, body = SERVERS[name]
    server.default("POST", PATH, lambda r: Response.json(body, status))
    with pytest.raises(ContextOverflowError) as info:
        list(provider(server).stream(request()))
    assert len(server.requests) == 1  # an overflow is compacted, never retried as is
    assert "context overflow" in str(info.value) and "\n" not in str(info.value)


def test_a_rate_limit_that_speaks_of_tokens_is_not_an_overflow(server):
    server.default("POST", PATH, lambda r: Response.json(
        {"error": {"message": "Too many tokens per minute", "type": "rate_limit"}}, 429))
    with pytest.raises(ProviderError) as info:
        list(provider(server).stream(request()))
    assert not isinstance(info.value, ContextOverflowError) and len(server.requests) == 3


def test_a_server_error_without_overflow_words_is_retried(server):
    server.default("POST", PATH, lambda r: Response.json(
        {"error": {"code": 500, "message": "slot unavailable", "type": "server_error"}}, 500))
    with pytest.raises(ProviderError) as info:
        list(provider(server).stream(request()))
    assert not isinstance(info.value, ContextOverflowError) and len(server.requests) == 3


def test_tool_calls_with_empty_content_round_trip(server):
    """llama.cpp streams ``"content": ""`` next to its tool calls."""
    chunks = openai_chunks("", [{"id": "c1", "name": "read", "arguments": {"path": "a.md"}}])
    patched = []
    for chunk in chunks:  # every delta carries content "", as llama.cpp sends it
        text = chunk.decode()
        if text.startswith("data: {"):
            data = json.loads(text[6:])
            for choice in data.get("choices", []):
                choice.setdefault("delta", {})["content"] = ""
            text = "data: " + json.dumps(data) + "\n\n"
        patched.append(text.encode())
    server.queue("POST", PATH, lambda r: stream_response(patched))
    server.queue("POST", PATH, lambda r: stream_response(openai_chunks("It says hello.")))
    read = ToolSpec("read", "read a file", {"type": "object", "properties": {
        "path": {"type": "string"}}, "required": ["path"]})
    llm = provider(server)
    first = [e for e in llm.stream(request(tools=[read]))][-1].message
    assert first.text == "" and [c.name for c in first.tool_calls] == ["read"]
    assert first.tool_calls[0].arguments == {"path": "a.md"}
    assert first.content == [ToolCall("c1", "read", {"path": "a.md"})]  # no empty text part
    result = Message.tool_result(first.tool_calls[0], "hello")
    second = [e for e in llm.stream(request(Message.user("hi"), first, result,
                                            tools=[read]))][-1].message
    assert second.text == "It says hello."
    sent = server.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "read",
                                                    "arguments": '{"path": "a.md"}'}
    assert sent[2]["content"] in ("", None) and sent[3]["tool_call_id"] == "c1"
