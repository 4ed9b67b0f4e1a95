"""``clawd mcp list | tools [NAME] | serve``: the MCP servers clawd uses, and clawd's memory
as an MCP server.

``list`` starts every configured server (each within its ``connectionTimeoutMs``) and shows
one line each: name, transport, state, tool count, what it runs or where it is (a URL
without its user and query; never a value of ``env`` or ``headers``), and the agents given
it (``agents``; by default the default agent). ``tools [NAME]`` lists
the tools by the names the model calls them. ``serve [--agent ID] [--read-only]`` speaks
MCP on stdin/stdout, offering the agent's memory (``frontends.mcp_server``).
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def add_parser(command: Any, sub: Any) -> None:
    mcp = command(sub, "mcp", "MCP: the servers whose tools the model uses (list, tools), "
                  "and the agent's memory as an MCP server (serve)")
    msub = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    mcp.set_defaults(mcp_command="list")
    command(msub, "list", "each configured server: transport, state, tool count")
    tools = command(msub, "tools", "the tools of every server, or of NAME")
    tools.add_argument("name", nargs="?", metavar="NAME")
    serve = command(msub, "serve", "serve the agent's memory over stdio (memory_search, "
                    "memory_get, memory_add)")
    serve.add_argument("--read-only", action="store_true",
                       help="offer memory_search and memory_get only")


def where(server: Any) -> str:
    """What a server runs, or where it is, with nothing secret in it."""
    if server.url is not None:
        parts = urlsplit(server.url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    from clawd.mcp.client import scrub

    return scrub(" ".join([server.command, *server.args]), server.secrets())


def whose(server: Any, default_agent: str) -> str:
    """Which agents get a server's tools, as ``list`` says it (``McpServer.given_to``)."""
    agents = [default_agent] if server.agents is None else server.agents
    if "*" in agents:
        return "for every agent"
    return "for " + (", ".join(agents) or "no agent")


def cmd_mcp(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.core.errors import ConfigError

    config = load_config()
    if args.mcp_command == "serve":
        return _serve(config, args)
    servers = config.mcp.servers
    if not servers:
        print("no MCP servers are configured (mcp.servers in the config; see docs/mcp.md)")
        return 0
    if args.mcp_command == "tools" and args.name and args.name not in servers:
        raise ConfigError(f"no MCP server {args.name!r}; the servers are "
                          + ", ".join(servers))
    from clawd.frontends.compose import mcp_clients

    clients = mcp_clients(config)
    assert clients is not None
    if args.mcp_command == "list":
        default = config.default_agent_id()
        for state in clients.states():
            server = servers[state.name]
            line = (f"{state.name:<16} {state.transport or '-':<6} {state.state:<8} "
                    f"{state.tools:>3} tools  {where(server)}  ({whose(server, default)})")
            print(line + (f"\n{'':<16} {state.error}" if state.error else ""))
        return 1 if any(s.state == "failed" for s in clients.states()) else 0
    for tool in clients.tools():
        if args.name in (None, tool.spec.origin):
            first = tool.spec.description.strip().splitlines()[0] if (
                tool.spec.description.strip()) else ""
            print(f"{tool.spec.name:<32} {first}")
    for problem in clients.problems():
        print(f"· {problem}")
    return 0


def _serve(config: Any, args: argparse.Namespace) -> int:
    from clawd.frontends.compose import build_runtime
    from clawd.frontends.mcp_server import serve_stdio

    serving = config.model_copy(deep=True)
    serving.mcp.servers = {}  # clawd's memory server does not start the servers it uses
    runtime = build_runtime(serving, args.agent)
    try:
        serve_stdio(runtime, read_only=args.read_only)
    finally:
        if runtime.memory is not None:
            runtime.memory.close()
    return 0


def doctor_checks(config: Any):
    """(ok, what, text) per configured MCP server."""
    from clawd.frontends.compose import mcp_clients

    clients = mcp_clients(config)
    for state in clients.states() if clients else []:
        if state.state == "disabled":
            yield True, f"mcp {state.name}", "disabled"
        else:
            yield state.state == "ready", f"mcp {state.name}", (
                f"{state.transport}, {state.tools} tools" if state.state == "ready"
                else f"did not start: {state.error}")
