"""One agent's settings: ``agents.defaults`` deep-merged with its ``agents.list`` entry.

``resolve_agent`` returns the merged settings of an agent, checked again as a whole: a key
that one agent's settings would silently ignore is refused (a default and an agent's
override may each hold half of a pair). A non-default agent that names no workspace gets
its own (``own_workspace``), never the default agent's. An agent of a person that
``agents.list`` does not name takes ``agents.defaults`` less what reaches the host beyond
its workspace (``for_a_person``): the config gives those to an agent by listing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawd.config.errors import describe
from clawd.config.schema import DEFAULT_AGENT_ID, AgentDefaults, Config
from clawd.core.errors import ConfigError


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def resolve_agent(config: Config, agent_id: str | None = None) -> tuple[str, AgentDefaults]:
    """The id and merged settings of an agent (the default agent when ``agent_id`` is None)."""
    agent_id = agent_id or config.default_agent_id()
    entry = next((e for e in config.agents.entries if e.id == agent_id), None)
    if entry is None:
        if config.agents.entries or agent_id != DEFAULT_AGENT_ID:
            known = ", ".join(config.agent_ids())
            raise ConfigError(f"unknown agent {agent_id!r} (agents.list has: {known})")
        return agent_id, _checked(config, agent_id, config.agents.defaults)
    base = config.agents.defaults.model_dump()
    override = entry.model_dump(exclude_unset=True, exclude={"id", "name", "default", "mcp"})
    try:
        settings = AgentDefaults.model_validate(_deep_merge(base, override))
    except ValidationError as exc:
        raise ConfigError(describe(exc, f"{config.source or 'config'} (agent {agent_id})",
                                    AgentDefaults)) from None
    extra = override.get("memory_search", {}).get("extra_paths")
    if extra is not None:
        # An agent's extraPaths add to the defaults' list (as in OpenClaw), not replace it.
        settings.memory_search.extra_paths = list(dict.fromkeys(
            config.agents.defaults.memory_search.extra_paths + extra))
    if ("workspace" not in override and len(config.agents.entries) > 1
            and agent_id != config.default_agent_id()):
        settings.workspace = own_workspace(settings.workspace, agent_id)
    if agent_id.lower() in config.people_agents:
        settings = for_a_person(settings)
    return agent_id, _checked(config, agent_id, settings)


def for_a_person(settings: AgentDefaults) -> AgentDefaults:
    """``settings`` without what reaches the host beyond the agent's own workspace: ``exec``
    (a shell on the host, not a sandbox) and ``memorySearch.extraPaths`` (the operator's
    folders, read by ``memory_get`` and the index). The MCP servers follow their own
    rule (``Mcp.for_agent``)."""
    kept = settings.model_copy(deep=True)
    kept.tools.exec.enabled = False
    kept.tools.exec.allow_in_scripts = False
    kept.memory_search.extra_paths = []
    return kept


def own_workspace(workspace: str, agent_id: str) -> str:
    """The workspace of a non-default agent that names none: agents are isolated, so it is
    the default one plus ``-<id>`` (``~/clawd-work``), never the default agent's."""
    return str(Path(workspace).expanduser()) + f"-{agent_id}"


def _checked(config: Config, agent_id: str, settings: AgentDefaults) -> AgentDefaults:
    problem = _ignored(settings)
    if problem:
        where = "agents.defaults" if not config.agents.entries else f"agent {agent_id}"
        raise ConfigError(f"{config.source or 'config'}: {where}: {problem}")
    return settings


def _ignored(settings: AgentDefaults) -> str | None:
    """A key one agent's merged settings would silently ignore (checked after the merge,
    since a default and an agent's override may each hold half of the pair)."""
    memory = settings.memory_search
    remote = memory.remote
    if (memory.provider == "local" and memory.fallback not in ("openai", "gemini")
            and (remote.base_url or remote.api_key or remote.headers)):
        return ("memorySearch.remote is set but provider is \"local\" (and fallback is not "
                "a remote provider), so it would never be used: choose provider \"openai\" "
                "or \"gemini\", or remove remote")
    if ("sessions" in memory.sources) == memory.experimental.session_memory:
        return None
    half = ("memorySearch.experimental.sessionMemory is on but sources lacks \"sessions\""
            if memory.experimental.session_memory else
            "memorySearch.sources has \"sessions\" but experimental.sessionMemory is off")
    return f"{half}; transcripts are indexed only with both, so set both or neither"
