"""The ``mcp`` section: the MCP servers whose tools the model may use (docs/mcp.md).

``mcp.servers.<name>`` is a child process spoken to over stdio (``command``, ``args``,
``env``, ``cwd``) or a remote server over streamable HTTP (``url``, ``headers``), never
both. ``enabled`` (default true), ``connectionTimeoutMs`` (how long its start may take),
``requestTimeoutMs`` (how long one call may take), ``tools`` (an allow-list of its tool
names; absent: all) and ``groups`` (offer its tools in group and channel sessions too;
default false: private sessions only). ``env`` and ``headers`` often hold keys: they are
never printed (``secrets``). ``approval`` (``writes``, the default: a tool not marked
read-only asks; ``always``; ``never``) and ``autoApprove`` (tools that never ask) say which
of its tools ask a person before they run (``clawd.mcp.approval``).

A server reaches the host (its files, its network, its accounts), so it belongs to the
operator's agent, the default one: ``agents`` lists the agents that get its tools instead
(ids, any case; ``"*"``: every agent, people's too). An agent of a person (``clawd users
add``) gets no server unless one names it. An ``agents.list`` entry's ``mcp`` is the whole
list of servers that agent gets instead (``[]``: none). ``Mcp.for_agent`` is that rule.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from clawd.config.sections import BaseUrl, Bool, Int, Model

# a server's name starts its tools' names (``<name>__<tool>``), which both wire formats
# limit to letters, digits, ``_`` and ``-``; ``__`` is the separator, so not in a name
SERVER_NAME = r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$"
AGENT_NAME = r"^(?:\*|[A-Za-z0-9][A-Za-z0-9_-]{0,63})$"  # an agent's id, or every agent
Approval = Literal["writes", "always", "never"]


class McpServer(Model):
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: BaseUrl | None = None
    headers: dict[str, str] = {}
    enabled: Bool = True
    connection_timeout_ms: Int = Field(15000, ge=100)
    request_timeout_ms: Int = Field(60000, ge=100)
    tools: list[str] | None = None
    groups: Bool = False
    agents: list[str] | None = None  # None: the default agent only
    approval: Approval = "writes"
    auto_approve: list[str] = []

    def given_to(self, agent_id: str, default_agent: str) -> bool:
        """Whether agent ``agent_id`` gets this server's tools (``default_agent``: the
        operator's agent, the config's default)."""
        allowed = [default_agent] if self.agents is None else self.agents
        return "*" in allowed or agent_id.lower() in {a.lower() for a in allowed}

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server is either a command (stdio) or a url "
                             "(streamable HTTP): give exactly one")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a command; a url server takes headers")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a url server; a command takes env")
        for agent in self.agents or []:
            if not re.match(AGENT_NAME, agent):
                raise ValueError(f"agents: {agent!r} is not an agent's id (or \"*\" for "
                                 f"every agent)")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secrets(self) -> list[str]:
        """The values never to print: everything in ``env`` and ``headers``."""
        return [v for v in (*self.env.values(), *self.headers.values()) if len(v) >= 4]


class Mcp(Model):
    servers: dict[str, McpServer] = {}

    @model_validator(mode="after")
    def _names(self) -> Mcp:
        for name in self.servers:
            if not re.match(SERVER_NAME, name):
                raise ValueError(f"mcp.servers: {name!r} is not a server name (letters, "
                                 f"digits, - and single _; at most 32; it starts the names "
                                 f"of its tools, <name>__<tool>)")
        return self

    def enabled(self) -> dict[str, McpServer]:
        return {name: s for name, s in self.servers.items() if s.enabled}

    def for_agent(self, agent_id: str, default_agent: str,
                  chosen: list[str] | None = None) -> list[str]:
        """The enabled servers whose tools agent ``agent_id`` gets: those its
        ``agents.list`` entry names (``chosen``, the whole list), else those whose ``agents``
        give it to it."""
        return [name for name, server in self.enabled().items()
                if (name in chosen if chosen is not None
                    else server.given_to(agent_id, default_agent))]
