"""The composition root: from the config and the command line's choices to a ``Runtime``
(settings, workspace, providers, tools, memory) and a session key. Heavy modules are
imported inside the functions, so importing this module costs nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawd.config import Config
    from clawd.loop.runtime import Runtime
    from clawd.mcp.client import McpClients
    from clawd.storage.interface import AgentStorage

# one set of MCP connections per process and servers' config: a gateway's agents share them
_MCP: dict[str, McpClients] = {}


def agent_storage(config: Config, agent_id: str) -> AgentStorage:
    """The storage of agent ``agent_id`` (files, or the database ``storage.url`` names)."""
    from clawd.config import resolve_agent
    from clawd.storage import open_storage

    config = config_for_agent(config, agent_id)
    return open_storage(config, agent_id, resolve_agent(config, agent_id)[1])


def config_for_agent(config: Config, agent: str | None) -> Config:
    """``config``, with its people's agents (``with_people``) when ``agent`` is none of its
    own: a person's agent is found without reading the people for every other."""
    if agent is None or agent.lower() in {a.lower() for a in config.agent_ids()}:
        return config
    return with_people(config)


def with_people(config: Config) -> Config:
    """``config`` with the agents of its people (``clawd users``) that it does not list
    itself, each as an ``agents.list`` entry of its own (the default agent kept first) and
    named in ``people_agents`` (they get nothing that reaches the host, ``for_a_person``)."""
    from clawd.config import DEFAULT_AGENT_ID, AgentEntry
    from clawd.storage import open_people

    known = {agent.lower() for agent in config.agent_ids()}
    missing = [agent for person in open_people(config).all() for agent in person.agents
               if agent.lower() not in known]
    if not missing:
        return config
    grown = config.model_copy(deep=True)
    entries = list(config.agents.entries) or [AgentEntry(id=DEFAULT_AGENT_ID, default=True)]
    grown.agents.entries = entries + [AgentEntry(id=a) for a in dict.fromkeys(missing)]
    grown.source = config.source
    grown.people_agents = frozenset(missing)
    return grown


def mcp_clients(config: Config) -> McpClients | None:
    """The process's connections to ``mcp.servers`` (made on first use; a server whose last
    listing is kept starts at its first call, the others at once, side by side, each within
    its time-out; closed when the process exits); None with no server."""
    if not config.mcp.servers:
        return None
    import atexit
    import json

    from clawd.core.paths import state_dir
    from clawd.mcp.client import McpClients

    key = json.dumps(config.mcp.model_dump(), sort_keys=True)
    if key not in _MCP:
        from clawd.config import resolve_agent

        # the servers are the operator's: its agent's workspace is their root
        workspace = Path(resolve_agent(config, None)[1].workspace).expanduser()
        clients = McpClients(config.mcp.servers, logs=state_dir() / "logs",
                             cache=state_dir() / "cache" / "mcp-tools.json", roots=[workspace],
                             auth=state_dir() / "mcp-auth")
        clients.start(lazy=True)  # a server whose tools are known starts at its first call
        atexit.register(clients.close)
        _MCP[key] = clients
    return _MCP[key]


def servers_of(config: Config, agent_id: str) -> list[str]:
    """The MCP servers agent ``agent_id`` is given (``Mcp.for_agent``: its ``agents.list``
    entry's ``mcp``, else the servers' ``agents``)."""
    entry = next((e for e in config.agents.entries if e.id == agent_id), None)
    return config.mcp.for_agent(agent_id, config.default_agent_id(),
                                entry.mcp if entry is not None else None)


def build_runtime(config: Config, agent: str | None, *, allow_exec: bool = False,
                  approve: Callable[[str], bool] | None = None,
                  with_memory: bool = True, deliver: str = "cli") -> Runtime:
    """Everything one agent needs: settings, workspace, providers, tools, memory.
    ``deliver``: where a reminder the model sets is delivered (``web`` in the gateway)."""
    from clawd.config import resolve_agent
    from clawd.guards.profile import make_profile
    from clawd.loop.runtime import ModelHandle, Runtime
    from clawd.providers import registry
    from clawd.storage import open_storage
    from clawd.tools.exec import exec_tool
    from clawd.tools.files import file_tools

    config = config_for_agent(config, agent)  # a person's own agent too
    agent_id, settings = resolve_agent(config, agent)
    workspace = Path(settings.workspace).expanduser().resolve()
    storage = open_storage(config, agent_id, settings)
    tools = file_tools() + ([exec_tool()] if settings.tools.exec.enabled else [])
    memory = None
    if with_memory and settings.memory_search.enabled:
        from clawd.memory import open_index
        from clawd.tools.memory import memory_tools

        openai = config.models.providers.get("openai")
        memory = open_index(agent_id, workspace, settings.memory_search, storage.index_home,
                            sources=storage.memory_sources, files=storage.files,
                            openai_base_url=openai.base_url if openai else None,
                            open_store=storage.memory_index)
        tools += memory_tools()
    if config.automation.enabled and agent_id.lower() not in config.people_agents:
        from clawd.storage import open_jobs
        from clawd.tools.schedule import schedule_tool

        tools.append(schedule_tool(lambda: open_jobs(config), deliver))
    servers = servers_of(config, agent_id)
    mcp = mcp_clients(config) if servers else None  # none given: none started for it
    if mcp is not None:
        tools += mcp.tools(servers)

    connected: dict[str, Any] = {}  # a provider per model, shared by the agent's sessions

    def connect(ref: str) -> Any:
        """The model's provider, made once (its client, connections and SDK kept for every
        session); one that cannot be made is tried again next time."""
        found = connected.get(ref)
        if found is None:
            found = connected.setdefault(ref, registry.make_provider(config, ref))
        return found

    def models(ref: str) -> ModelHandle:
        return ModelHandle(ref, registry.context_window(config, settings, ref),
                           registry.max_output_tokens(config, settings, ref),
                           registry.uses_anthropic_format(config, ref),
                           lambda: connect(ref),
                           make_profile(*registry.profile_settings(config, ref)))

    extra: dict[str, Any] = {}
    if settings.user_timezone:  # the date in the prompt and the daily log's: the user's
        from datetime import datetime
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(settings.user_timezone)
        extra["clock"] = lambda: datetime.now(zone)
    runtime = Runtime(
        config=config, agent_id=agent_id, settings=settings, workspace=workspace,
        storage=storage, models=models, tools=tools, memory=memory, mcp=mcp,
        allow_exec=allow_exec or settings.tools.exec.allow_in_scripts, approve=approve,
        **extra)
    if mcp is not None:  # a server listed its tools anew: the next session has them
        def relisted(clients: McpClients = mcp) -> None:
            runtime.tools[:] = [t for t in runtime.tools if not t.spec.origin] + (
                clients.tools(servers))
        mcp.listen(relisted)
    return runtime


def check_provider(runtime: Runtime, key: str, model: str | None) -> None:
    """Fail in one line, before the session is created or touched, when its model cannot be
    used (without importing the SDK, which takes a second). A model pinned to the session is
    not checked here: the session opens, its first turn says the pin is the cause, and
    ``/model`` can switch away."""
    from clawd.core.errors import MissingKeyError
    from clawd.loop.runtime import session_model
    from clawd.providers import registry

    entry = runtime.store.get(key)
    if model is None and (entry or {}).get("modelOverride"):
        return
    try:
        registry.resolve(runtime.config, model or session_model(entry, runtime.settings))
    except MissingKeyError as exc:
        raise MissingKeyError(f"{exc}; or use a local OpenAI-compatible server (declare it "
                              f"under models.providers with api \"openai-completions\" and "
                              f"baseUrl, see the README)") from None


def session_key(agent_id: str, name: str | None) -> str:
    from clawd.sessions.store import main_key
    return main_key(agent_id, name or "main")


def chat_agent(config: Any, agent: str | None, session: str | None) -> str | None:
    """The agent a chat runs in: a full session key (``agent:<agentId>:<name>``) names its
    agent; ``--agent`` may repeat it but not contradict it. Unknown agents fail later, in
    ``resolve_agent``, with the list of known ones."""
    from clawd.core.errors import ConfigError
    from clawd.sessions.store import normalize_key

    key = normalize_key(session or "")
    if not key.startswith("agent:"):
        return agent
    _, named, rest = (key.split(":", 2) + ["", ""])[:3]
    if not named or not rest:
        raise ConfigError(f"--session {session}: a full session key is "
                          f"agent:<agentId>:<name> (or give a short name such as 'work')",
                          http=f"the session key {session} is not a full key, "
                          f"agent:<agentId>:<name>, nor a short name such as 'work'")
    if agent is not None and agent.lower() != named:
        raise ConfigError(f"--agent {agent} and --session {session} name different agents",
                          http=f"the session key {session} is of the agent {named}, not "
                          f"{agent} (?agent={agent})")
    return next((known for known in config.agent_ids() if known.lower() == named), named)
