"""The runtime the front ends build (``compose.build_runtime``): one provider per model for
every session of the agent (its SDK client and connections made once, on a local
OpenAI-compatible server), one that cannot be made tried again next time, and ``warm``
making it before the first turn needs it."""

from __future__ import annotations

import pytest

from clawd.config import Config
from clawd.core.errors import ProviderSetupError
from clawd.frontends.commands import Chat
from clawd.frontends.compose import build_runtime

from fakeserver import FakeServer, openai_stream


def _config(tmp_path, url: str, model: str = "local/qwen") -> Config:
    provider = {"api": "openai-completions", "baseUrl": url + "/v1", "maxRetries": 0,
                "models": [{"id": "qwen", "contextWindow": 32000}]}
    return Config.model_validate({
        "models": {"providers": {"local": provider}},
        "agents": {"defaults": {"workspace": str(tmp_path / "ws"), "model": model,
                                "memorySearch": {"enabled": False}}}})


def test_every_session_of_an_agent_shares_its_model_s_provider(tmp_path):
    with FakeServer() as server:
        server.default("POST", "/v1/chat/completions", lambda r: openai_stream("Hi."))
        runtime = build_runtime(_config(tmp_path, server.url), None)
        with Chat.open(runtime, "agent:main:one") as one, \
                Chat.open(runtime, "agent:main:two") as two:
            for chat in (one, two):
                list(chat.handle("hello"))
            assert one.session.in_use.provider is two.session.in_use.provider
        assert len(server.requests) == 2


def test_a_provider_that_cannot_be_made_is_tried_again(tmp_path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    runtime = build_runtime(_config(tmp_path, "http://127.0.0.1:9", "anthropic/claude-x"),
                            None)
    handle = runtime.models("anthropic/claude-x")
    with pytest.raises(ProviderSetupError):
        handle.connect()
    runtime.warm()  # says nothing: the turn reports it
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert handle.connect() is runtime.models("anthropic/claude-x").connect()


def test_warm_makes_the_provider_before_the_first_turn(tmp_path):
    runtime = build_runtime(_config(tmp_path, "http://127.0.0.1:9"), None)
    runtime.warm()
    made = runtime.models("local/qwen").connect()
    with Chat.open(runtime, "agent:main:main") as chat:
        assert chat.session.in_use.provider is made
