"""From a ``provider/model`` reference to a ready provider, and what the config says of models.

Two providers are built in: ``anthropic`` (Messages API) and ``openai`` (Chat Completions).
Any other name must be declared under ``models.providers.<name>`` with an ``api`` wire
format and a ``baseUrl``; that is how local servers (Ollama, vLLM, llama.cpp), OpenRouter
and proxies are reached. ``models.providers.anthropic|openai`` may override the built-ins'
``baseUrl``, ``apiKey`` and ``headers``. Keys come from the config, else the provider's
environment variable. Every failure is a one-line ``ProviderSetupError`` saying what to set.
The context window and output limit of a model come from the config, then the agent's
settings, then the known windows (docs/configuration.md, ``agents``). The SDKs are imported
only when a provider is built.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clawd.config import AgentDefaults, Config, ModelInfo, ProviderConfig, config_path
from clawd.core.errors import MissingKeyError, ProviderSetupError
from clawd.core.tokens import DEFAULT_CONTEXT_WINDOW, known_context_window
from clawd.providers.base import Provider

ANTHROPIC_API = "anthropic-messages"
OPENAI_API = "openai-completions"
# name -> (wire format, key variable, base-URL variable)
BUILTIN: dict[str, tuple[str, str, str]] = {
    "anthropic": (ANTHROPIC_API, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "openai": (OPENAI_API, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
}
# Local servers ignore the key, but both SDKs refuse to start without one.
PLACEHOLDER_KEY = "no-key"


@dataclass(frozen=True)
class ModelTarget:
    """Everything needed to build a provider for one ``provider/model`` reference."""

    provider: str
    model: str
    api: str
    api_key: str
    base_url: str | None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 3
    builtin: bool = True


def split_ref(ref: str) -> tuple[str, str]:
    """``provider/model`` split on the first ``/`` (model ids may contain more)."""
    provider, sep, model = (ref or "").strip().partition("/")
    if not sep or not provider or not model:
        raise ProviderSetupError(f"model {ref!r} must be PROVIDER/MODEL, e.g. "
                                 "anthropic/claude-sonnet-4-6 or openai/gpt-4o")
    return provider, model


def _where(config: Config) -> str:
    return str(config.source or config_path())


def _provider_config(config: Config, name: str) -> ProviderConfig | None:
    return config.models.providers.get(name)


def key_variable(name: str) -> str:
    """The environment variable holding a provider's key: ``OPENROUTER_API_KEY`` etc."""
    if name in BUILTIN:
        return BUILTIN[name][1]
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper() + "_API_KEY"


def wire_api(config: Config, ref: str) -> str:
    """The wire format of a reference: ``anthropic-messages`` or ``openai-completions``."""
    name, _ = split_ref(ref)
    declared = _provider_config(config, name)
    if declared is not None and declared.api:
        return declared.api
    if name in BUILTIN:
        return BUILTIN[name][0]
    if declared is None:
        known = sorted({*BUILTIN, *(config.models.providers or {})})
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise ProviderSetupError(
            f"unknown provider {name!r} in {ref!r}{guess}: built in are anthropic and "
            f"openai; declare others under models.providers.{name} (api, baseUrl) in "
            f"{_where(config)}")
    raise ProviderSetupError(
        f"models.providers.{name}.api is not set: use \"openai-completions\" or "
        f"\"anthropic-messages\" in {_where(config)}")


def uses_anthropic_format(config: Config, ref: str) -> bool:
    """Whether ``ref`` speaks the Anthropic Messages API (pruning defaults to ``cache-ttl``)."""
    try:
        return wire_api(config, ref) == ANTHROPIC_API
    except ProviderSetupError:
        return False


def model_info(config: Config, ref: str) -> ModelInfo | None:
    """The ``models.providers.<p>.models[]`` entry of a reference, if the config has one."""
    name, model = split_ref(ref)
    declared = _provider_config(config, name)
    if declared is None:
        return None
    return next((info for info in declared.models if info.id == model), None)


def context_window(config: Config, settings: AgentDefaults, ref: str) -> int:
    """Config ``contextWindow``, else ``contextTokens``, else the known window, else 200000."""
    info = model_info(config, ref)
    if info is not None and info.context_window:
        return info.context_window
    if settings.context_tokens:
        return settings.context_tokens
    _, model = split_ref(ref)
    # Routers name models "vendor/model"; the known-window table uses the bare id.
    return (known_context_window(model) or known_context_window(model.rsplit("/", 1)[-1])
            or DEFAULT_CONTEXT_WINDOW)


def profile_settings(config: Config, ref: str) -> tuple[str, dict[str, bool]]:
    """The model profile of a reference and its guard switches: the model's own, else its
    provider's, else ``strong`` for a built-in provider and ``weak`` for a declared one
    (``clawd.guards.profile``). Switches of the provider come first, the model's win."""
    name, _ = split_ref(ref)
    declared = _provider_config(config, name)
    info = model_info(config, ref)
    profile = ((info.profile if info else None) or (declared.profile if declared else None)
               or ("strong" if name in BUILTIN else "weak"))
    guards = {**(declared.guards if declared else {}), **(info.guards if info else {})}
    return profile, {str(k): v for k, v in guards.items()}


# a declared server's model with no ``maxTokens`` of its own, under the agent's default: its
# replies are capped at this share of its window (at least ``DECLARED_MIN_OUTPUT``); a small
# local model that runs away (a copy of its notes, over and over) stops in a minute, not ten
DECLARED_OUTPUT_SHARE = 8
DECLARED_MIN_OUTPUT = 512


def max_output_tokens(config: Config, settings: AgentDefaults, ref: str) -> int:
    """Config ``maxTokens`` of the model, else the agent's ``maxTokens``; for a declared
    (not built-in) provider without either set, an eighth of the model's window, 512 at
    least (1,024 for an 8k window), never more than the agent's default."""
    info = model_info(config, ref)
    if info is not None and info.max_tokens:
        return info.max_tokens
    name, _ = split_ref(ref)
    if name in BUILTIN or "max_tokens" in settings.model_fields_set:
        return settings.max_tokens
    window = context_window(config, settings, ref)
    return min(settings.max_tokens, max(DECLARED_MIN_OUTPUT, window // DECLARED_OUTPUT_SHARE))


def resolve(config: Config, ref: str, *, env: Mapping[str, str] = os.environ) -> ModelTarget:
    """Check a reference against the config and the environment; no SDK is loaded."""
    name, model = split_ref(ref)
    api = wire_api(config, ref)
    declared = _provider_config(config, name) or ProviderConfig()
    builtin = name in BUILTIN
    variable = key_variable(name)
    key = declared.api_key or env.get(variable) or None
    if builtin:
        base_url = declared.base_url or env.get(BUILTIN[name][2]) or None
        if not key:
            raise MissingKeyError(
                f"no API key for {name}: set {variable} or models.providers.{name}.apiKey "
                f"in {_where(config)}")
    else:
        base_url = declared.base_url
        if not base_url:
            raise ProviderSetupError(
                f"models.providers.{name}.baseUrl is not set: give the server's URL "
                f"in {_where(config)}")
        if declared.models and not any(info.id == model for info in declared.models):
            known = ", ".join(info.id for info in declared.models)
            raise ProviderSetupError(
                f"unknown model {model!r} for provider {name}: models.providers.{name}.models "
                f"lists {known}; add it there in {_where(config)}")
        key = key or PLACEHOLDER_KEY
    return ModelTarget(provider=name, model=model, api=api, api_key=key, base_url=base_url,
                       headers=dict(declared.headers), timeout=declared.timeout_seconds,
                       max_retries=declared.max_retries, builtin=builtin)


def make_provider(config: Config, ref: str, *, env: Mapping[str, str] = os.environ,
                  **options: Any) -> Provider:
    """A provider for ``provider/model``; ``options`` go to the adapter (e.g. test delays)."""
    target = resolve(config, ref, env=env)
    common = dict(api_key=target.api_key, base_url=target.base_url, headers=target.headers,
                  name=target.provider, max_retries=target.max_retries,
                  timeout=target.timeout)
    if target.api == ANTHROPIC_API:
        from clawd.providers.anthropic import AnthropicProvider
        return AnthropicProvider(target.model, **{**common, **options})
    from clawd.providers.openai import OpenAIProvider
    # OpenAI's own models want max_completion_tokens; compatible servers know max_tokens.
    field_name = "max_completion_tokens" if target.builtin else "max_tokens"
    return OpenAIProvider(target.model, **{**common, "max_tokens_field": field_name, **options})
