"""``clawd mcp list | tools [NAME] | serve``: the MCP servers clawd uses, and clawd's memory
as an MCP server (``add``, ``remove``, ``enable``, ``disable``, ``import``: ``mcp_config``).

``list`` starts every configured server (each within its ``connectionTimeoutMs``) and shows
one line each: name, transport, state, tool count, what it runs or where it is (a URL
without its user and query values, an option or ``KEY=value`` named like a secret as
``***``; never a value of ``env`` or ``headers``), and the agents given it (``agents``; by
default the default agent), then what was said of its tools (left out, renamed, an allowed
name it lacks). ``tools [NAME]`` lists the tools by the names the model calls them, marking
those the default model is not told of. Both, ``doctor`` and a chat's start say when the
model's profile or window leaves MCP tools out (``told_of``). ``serve [--agent ID]
[--read-only]`` speaks MCP on stdin/stdout, offering the agent's memory
(``frontends.mcp_server``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


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
    from clawd.frontends.cli.mcp_config import add_parsers

    add_parsers(command, msub)
    login = command(msub, "login", "log in to a remote server that asks for OAuth (a browser "
                    "page; the tokens are kept)")
    login.add_argument("name", metavar="NAME")


def where(server: Any) -> str:
    """What a server runs, or where it is, with nothing secret in it."""
    from clawd.mcp.launch import scrub, shown_args, shown_url

    if server.url is not None:
        return shown_url(server.url)
    return scrub(" ".join([server.command, *shown_args(server.args)]), server.secrets())


def told_of(config: Any, tools: list[Any], agent: str | None = None,
            model: str | None = None) -> str | None:
    """One line when the model (``model``, else the agent's) is told of fewer MCP tools
    than ``tools`` holds: its profile's count or its window's share (``shapes.over_cap``)."""
    from clawd.config import resolve_agent
    from clawd.guards.profile import make_profile
    from clawd.mcp.shapes import MCP_SHARE, over_cap
    from clawd.providers import registry

    _, settings = resolve_agent(config, agent)
    ref = model or settings.model
    profile = make_profile(*registry.profile_settings(config, ref))
    specs = [t.spec for t in tools if t.spec.origin]
    window = registry.context_window(config, settings, ref)
    # a token is at least a character: when the schemas' characters fit the window's share
    # and the count is within the profile's, nothing is left out (and nothing is counted)
    if (profile.mcp_tools is None or len(specs) <= profile.mcp_tools) and sum(
            len(s.name) + len(s.description) + len(json.dumps(s.parameters))
            for s in specs) <= window // MCP_SHARE:
        return None
    over = over_cap(specs, profile.mcp_tools, window)
    if not over:
        return None
    why = (f"its profile, {profile.name}, allows {profile.mcp_tools}"
           if profile.mcp_tools is not None and len(specs) - len(over) == profile.mcp_tools
           else "the rest do not fit an eighth of its window")
    return (f"mcp: {ref} is told of {len(specs) - len(over)} of {len(specs)} MCP tools "
            f"({why}); left out: {', '.join(sorted(over)[:5])}{' …' if len(over) > 5 else ''}"
            f" (an allow-list, mcp.servers.<name>.tools, picks which; see docs/mcp.md)")


def whose(server: Any, default_agent: str, name: str = "", config: Any = None) -> str:
    """Which agents get a server's tools, as ``list`` says it (``Mcp.for_agent``: an
    ``agents.list`` entry's ``mcp`` first, else the server's ``agents``)."""
    agents = [default_agent] if server.agents is None else list(server.agents)
    chosen = {e.id: e.mcp for e in config.agents.entries if e.mcp is not None} if (
        config is not None) else {}
    if chosen:
        agents = [a for a in agents if a == "*" or a not in chosen] + [
            a for a, names in chosen.items() if name in names]
    if "*" in agents:
        return "for every agent" + (" but " + ", ".join(chosen) if chosen and any(
            name not in names for names in chosen.values()) else "")
    return "for " + (", ".join(dict.fromkeys(agents)) or "no agent")


def cmd_mcp(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.core.errors import ConfigError

    if args.mcp_command in ("add", "remove", "enable", "disable", "import"):
        from clawd.frontends.cli.mcp_config import cmd_edit

        return cmd_edit(args)
    config = load_config()
    if args.mcp_command == "serve":
        return _serve(config, args)
    if args.mcp_command == "login":
        from clawd.frontends.cli.mcp_login import login

        return login(config, args.name)
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
    clients.start()  # every server, to say how it is (and keep its listing)
    if args.mcp_command == "list":
        default = config.default_agent_id()
        for state in clients.states():
            server = servers[state.name]
            line = (f"{state.name:<16} {state.transport or '-':<6} {state.state:<8} "
                    f"{state.tools:>3} tools  {where(server)}  "
                    f"({whose(server, default, state.name, config)})")
            print(line + "".join(f"\n{'':<16} {said}" for said in (
                [state.error] if state.error else []) + list(state.notes)))
        if note := told_of(config, clients.tools()):
            print(f"· {note}")
        return 1 if any(s.state == "failed" or s.missing for s in clients.states()) else 0
    tools = clients.tools()
    hidden = _hidden(config, tools)
    for tool in tools:
        if args.name in (None, tool.spec.origin):
            first = tool.spec.description.strip().splitlines()[0] if (
                tool.spec.description.strip()) else ""
            mark = " (not told of)" if tool.spec.name in hidden else ""
            print(f"{tool.spec.name:<32} {first}{mark}")
    for problem in clients.problems():
        print(f"· {problem}")
    if note := told_of(config, tools):
        print(f"· {note}")
    return 0


def _hidden(config: Any, tools: list[Any]) -> frozenset[str]:
    """The tools the default agent's model is not told of."""
    from clawd.config import resolve_agent
    from clawd.guards.profile import make_profile
    from clawd.mcp.shapes import over_cap
    from clawd.providers import registry

    _, settings = resolve_agent(config, None)
    profile = make_profile(*registry.profile_settings(config, settings.model))
    return over_cap([t.spec for t in tools if t.spec.origin], profile.mcp_tools,
                    registry.context_window(config, settings, settings.model))


def _serve(config: Any, args: argparse.Namespace) -> int:
    """Serve the agent's memory on stdio; the memory files are watched all along (a note
    written meanwhile is found, as in the REPL). A workspace that does not exist is no
    memory to serve: one line on stderr, nothing created, exit 1."""
    import sys
    from pathlib import Path

    from clawd.config import resolve_agent
    from clawd.frontends.compose import build_runtime, config_for_agent
    from clawd.frontends.mcp_server import serve_stdio

    _, settings = resolve_agent(config_for_agent(config, args.agent), args.agent)
    workspace = Path(settings.workspace).expanduser()
    if config.storage.effective_url() is None and not workspace.is_dir():
        print(f"clawd mcp serve: there is no memory to serve: the workspace {workspace} does "
              f"not exist (run clawd init first)", file=sys.stderr)
        return 1
    serving = config.model_copy(deep=True)
    serving.mcp.servers = {}  # clawd's memory server does not start the servers it uses
    runtime = build_runtime(serving, args.agent)
    if runtime.memory is not None:
        runtime.memory.start_watcher()
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
    if clients is not None:
        clients.start()  # every server, to say how it is
    for state in clients.states() if clients else []:
        if state.state == "disabled":
            yield True, f"mcp {state.name}", "disabled"
        else:  # an allowed name the server lacks is a typo: the tool is never offered
            notes = "".join(f"; {note.removeprefix('mcp: ')}" for note in state.notes)
            yield state.state == "ready" and not state.missing, f"mcp {state.name}", (
                f"{state.transport}, {state.tools} tools{notes}" if state.state == "ready"
                else f"did not start: {state.error}")
    if clients is not None and (note := told_of(config, clients.tools())):
        yield True, "mcp tools", note.removeprefix("mcp: ")
