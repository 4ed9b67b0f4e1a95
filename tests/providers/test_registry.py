"""The provider registry: references, keys, custom providers, context windows."""

from __future__ import annotations

import json

import pytest

from clawd.config import AgentDefaults, parse_config
from clawd.core.errors import ProviderSetupError
from clawd.core.messages import Message, ModelRequest, ModelResponse
from clawd.providers.anthropic import AnthropicProvider
from clawd.providers.base import Provider, complete
from clawd.providers.openai import OpenAIProvider
from clawd.providers.registry import (
    PLACEHOLDER_KEY,
    context_window,
    key_variable,
    make_provider,
    max_output_tokens,
    resolve,
    split_ref,
    uses_anthropic_format,
    wire_api,
)

from fakeserver import FakeServer, anthropic_stream, openai_stream


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAWD_HOME", str(tmp_path / ".clawd"))
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def config(providers: dict | None = None, path: str = "/etc/clawd/clawd.json"):
    return parse_config(json.dumps({"models": {"providers": providers or {}}}), path)


def hello() -> ModelRequest:
    return ModelRequest(system=["sys"], messages=[Message.user("hi")], max_tokens=99)


@pytest.mark.parametrize("ref,expected", [
    ("anthropic/claude-sonnet-4-6", ("anthropic", "claude-sonnet-4-6")),
    ("openrouter/meta-llama/llama-3.1-70b", ("openrouter", "meta-llama/llama-3.1-70b")),
    (" openai/gpt-4o ", ("openai", "gpt-4o")),
])
def test_split_ref(ref, expected):
    assert split_ref(ref) == expected


@pytest.mark.parametrize("ref", ["claude-sonnet", "/gpt-4o", "openai/", ""])
def test_split_ref_rejects_bad_references(ref):
    with pytest.raises(ProviderSetupError, match="PROVIDER/MODEL"):
        split_ref(ref)


@pytest.mark.parametrize("ref,variable", [
    ("anthropic/claude-sonnet-4-6", "ANTHROPIC_API_KEY"), ("openai/gpt-4o", "OPENAI_API_KEY")])
def test_missing_key_names_the_variable_and_the_config_file(ref, variable):
    with pytest.raises(ProviderSetupError) as info:
        make_provider(config(), ref, env={})
    text = str(info.value)
    assert variable in text and "apiKey" in text and "/etc/clawd/clawd.json" in text
    assert "\n" not in text


def test_builtin_keys_from_env_or_config():
    built = make_provider(config(), "anthropic/claude-x", env={"ANTHROPIC_API_KEY": "sk-env"})
    assert isinstance(built, AnthropicProvider) and isinstance(built, Provider)
    assert (built.name, built.model) == ("anthropic", "claude-x")
    target = resolve(config({"openai": {"apiKey": "sk-conf"}}), "openai/gpt-4o",
                     env={"OPENAI_API_KEY": "sk-env"})
    assert target.api_key == "sk-conf" and target.api == "openai-completions"
    assert isinstance(make_provider(config(), "openai/gpt-4o", env={"OPENAI_API_KEY": "k"}),
                      OpenAIProvider)


def test_unknown_provider_names_the_config_key():
    with pytest.raises(ProviderSetupError) as info:
        make_provider(config(), "mistral/large", env={})
    assert "models.providers.mistral" in str(info.value) and "\n" not in str(info.value)
    assert "did you mean" not in str(info.value)  # nothing close to guess


@pytest.mark.parametrize("ref, guess", [("opneai/gpt-4o", "openai"),
                                        ("antropic/claude-x", "anthropic"),
                                        ("olama/llama3", "ollama")])
def test_a_provider_typo_gets_a_guess(ref, guess):
    declared = config({"ollama": {"api": "openai-completions",
                                  "baseUrl": "http://127.0.0.1:11434/v1"}})
    with pytest.raises(ProviderSetupError, match=f"did you mean '{guess}'"):
        make_provider(declared, ref, env={})


def test_a_server_that_refuses_the_connection_points_to_doctor():
    import httpx

    from clawd.providers.common import transport_error

    error = transport_error("local", httpx.ConnectError("[Errno 111] Connection refused"),
                            "http://127.0.0.1:9/v1")
    assert "cannot connect to http://127.0.0.1:9/v1" in str(error)
    assert "clawd doctor" in str(error) and error.retryable


@pytest.mark.parametrize("declared,needle", [
    ({"baseUrl": "http://127.0.0.1:1/v1"}, "models.providers.local.api"),
    ({"api": "openai-completions"}, "models.providers.local.baseUrl"),
])
def test_custom_provider_must_declare_api_and_base_url(declared, needle):
    with pytest.raises(ProviderSetupError, match=needle.replace(".", r"\.")):
        make_provider(config({"local": declared}), "local/llama3", env={})


def test_custom_provider_unknown_model():
    cfg = config({"ollama": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:1/v1",
                             "models": [{"id": "llama3.1"}, {"id": "qwen2.5"}]}})
    with pytest.raises(ProviderSetupError) as info:
        make_provider(cfg, "ollama/mistral", env={})
    text = str(info.value)
    assert "'mistral'" in text and "llama3.1, qwen2.5" in text
    assert "models.providers.ollama" in text
    assert resolve(cfg, "ollama/qwen2.5", env={}).model == "qwen2.5"


def test_custom_openai_provider_without_key_works_against_a_local_server():
    with FakeServer() as server:
        server.queue("POST", "/v1/chat/completions", lambda r: openai_stream("local hello"))
        cfg = config({"ollama": {"api": "openai-completions", "baseUrl": server.url + "/v1",
                                 "headers": {"X-Team": "ops"}, "maxRetries": 0}})
        provider = make_provider(cfg, "ollama/llama3.1:8b", env={})
        assert provider.name == "ollama" and provider.model == "llama3.1:8b"
        response = complete(provider, hello())
        assert isinstance(response, ModelResponse) and response.message.text == "local hello"
        sent = server.requests[0]
        assert sent.headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
        assert sent.headers["x-team"] == "ops"
        body = sent.json()
        assert body["model"] == "llama3.1:8b" and body["max_tokens"] == 99
        assert "max_completion_tokens" not in body


def test_custom_provider_key_from_its_own_variable():
    cfg = config({"openrouter": {"api": "openai-completions",
                                 "baseUrl": "https://openrouter.invalid/api/v1"}})
    assert key_variable("openrouter") == "OPENROUTER_API_KEY"
    assert resolve(cfg, "openrouter/x/y", env={"OPENROUTER_API_KEY": "or-1"}).api_key == "or-1"


def test_builtin_anthropic_override_of_base_url_key_and_headers():
    with FakeServer() as server:
        server.queue("POST", "/v1/messages", lambda r: anthropic_stream("proxied"))
        cfg = config({"anthropic": {"baseUrl": server.url, "apiKey": "sk-proxy",
                                    "headers": {"X-Route": "eu"}}})
        provider = make_provider(cfg, "anthropic/claude-test-1", env={})
        assert complete(provider, hello()).message.text == "proxied"
        sent = server.requests[0]
        assert sent.headers["x-route"] == "eu"
        assert "sk-proxy" in sent.headers.get("x-api-key", "") + sent.headers.get(
            "authorization", "")


def test_custom_anthropic_messages_provider():
    with FakeServer() as server:
        server.queue("POST", "/v1/messages", lambda r: anthropic_stream("via gateway"))
        cfg = config({"gateway": {"api": "anthropic-messages", "baseUrl": server.url}})
        provider = make_provider(cfg, "gateway/claude-haiku", env={})
        assert isinstance(provider, AnthropicProvider)
        assert complete(provider, hello()).message.text == "via gateway"


def test_make_provider_passes_adapter_options():
    waits = []
    provider = make_provider(config(), "openai/gpt-4o", env={"OPENAI_API_KEY": "k"},
                             retry_base_delay=0.0, sleep=waits.append)
    assert provider.retry_base_delay == 0.0 and provider.max_retries == 3


@pytest.mark.parametrize("ref,expected", [
    ("anthropic/claude-sonnet-4-6", True), ("openai/gpt-4o", False),
    ("gateway/claude", True), ("ollama/llama3", False), ("nobody/knows", False),
])
def test_uses_anthropic_format(ref, expected):
    cfg = config({"gateway": {"api": "anthropic-messages", "baseUrl": "http://x"},
                  "ollama": {"api": "openai-completions", "baseUrl": "http://y"}})
    assert uses_anthropic_format(cfg, ref) is expected


def test_wire_api_of_unknown_provider_raises():
    with pytest.raises(ProviderSetupError):
        wire_api(config(), "nobody/knows")


WINDOWS = config({"ollama": {"api": "openai-completions", "baseUrl": "http://y",
                             "models": [{"id": "llama3.1", "contextWindow": 32000,
                                         "maxTokens": 2048}, {"id": "qwen"}]},
                  "anthropic": {"models": [{"id": "claude-big", "contextWindow": 1000000}]}})


@pytest.mark.parametrize("ref,context_tokens,expected", [
    ("ollama/llama3.1", None, 32000),          # models[].contextWindow
    ("ollama/llama3.1", 50000, 32000),         # ...wins over contextTokens
    ("ollama/qwen", 50000, 50000),             # listed without a window: contextTokens
    ("anthropic/claude-big", None, 1000000),   # a built-in's override
    ("openai/gpt-4o", None, 128000),           # the known window
    ("openai/gpt-4o", 64000, 64000),           # contextTokens wins over known
    ("openrouter/openai/gpt-4o", None, 128000),  # router prefix stripped for lookup
    ("ollama/qwen", None, 200000),             # nothing known: the default
])
def test_context_window(ref, context_tokens, expected):
    settings = AgentDefaults(context_tokens=context_tokens)
    assert context_window(WINDOWS, settings, ref) == expected


@pytest.mark.parametrize("ref,expected", [
    ("ollama/llama3.1", 2048), ("ollama/qwen", 4096), ("openai/gpt-4o", 4096)])
def test_max_output_tokens(ref, expected):
    assert max_output_tokens(WINDOWS, AgentDefaults(), ref) == expected


def test_a_declared_server_s_replies_are_capped_by_its_window():
    """A 1.5B model copying its notes over and over ran 2,800 tokens under the 4,096
    default; a declared server's model with no maxTokens gets an eighth of its window."""
    from clawd.providers.registry import max_output_tokens

    declared = {"local": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:8080/v1",
                          "models": [{"id": "small", "contextWindow": 8192},
                                     {"id": "tiny", "contextWindow": 2048},
                                     {"id": "large", "contextWindow": 131072},
                                     {"id": "own", "contextWindow": 8192, "maxTokens": 3000}]}}
    cfg = config(declared)
    settings = cfg.agents.defaults
    assert [max_output_tokens(cfg, settings, f"local/{m}")
            for m in ("small", "tiny", "large", "own")] == [1024, 512, 4096, 3000]
    assert max_output_tokens(cfg, settings, "anthropic/claude-x") == 4096  # built in: as set
    chosen = parse_config(json.dumps({"agents": {"defaults": {"maxTokens": 2000}},
                                      "models": {"providers": declared}}))
    assert max_output_tokens(chosen, chosen.agents.defaults, "local/small") == 2000
