"""``/mcp``: the MCP servers a chat's agent is given, switched off and on for the session,
their prompts, and one sent as the person's message, in the REPL and on the web page alike.

``/mcp`` shows each server (transport, state, tools, on or off here); ``/mcp off NAME`` and
``/mcp on NAME`` stop and start offering its tools in this session (``Session.switch_mcp``,
kept in the session's entry); ``/mcp prompts`` lists the servers' prompts (a server not
started yet is started for it); ``/mcp prompt SERVER/NAME KEY=VALUE ...`` fills that prompt
and sends what it gives as the person's next message (a missing required argument, or an
unknown prompt, is one line and nothing is sent). ``servers`` is what the web page shows.
"""

from __future__ import annotations

import shlex
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError
from clawd.core.events import CommandOutput, Event, Notice

if TYPE_CHECKING:
    from clawd.loop.runtime import Runtime
    from clawd.loop.session import Session
    from clawd.sessions.entry import SessionEntry


def mcp_command(session: Session, args: str, token: CancelToken | None = None
                ) -> Generator[Event, None, None]:
    """``/mcp ARGS`` in ``session`` (a chat's current one)."""
    from clawd.frontends.compose import servers_of

    runtime = session.rt
    servers = servers_of(runtime.config, runtime.agent_id)
    clients = runtime.mcp
    if clients is None or not servers:
        yield CommandOutput("mcp", "no MCP server is given to this agent (mcp.servers; "
                                   "see docs/mcp.md)")
        return
    word, _, rest = args.strip().partition(" ")
    off = set(session.entry.get("mcpOff") or [])
    if not word:
        lines = [f"{s.name:<16} {s.transport or '-':<6} {s.state:<8} {s.tools:>3} tools"
                 + ("  (off in this session)" if s.name in off else "")
                 + (f"  {s.error}" if s.error else "") for s in clients.states()
                 if s.name in servers]
        yield CommandOutput("mcp", "\n".join(lines))
    elif word in ("on", "off"):
        name = rest.strip()
        if name not in servers:
            raise ClawdError(f"no MCP server {name!r} here; the servers are "
                             f"{', '.join(servers)}")
        session.switch_mcp(name, word == "on")
        said = "offered again" if word == "on" else "no more offered"
        yield CommandOutput("mcp", f"the tools of {name} are {said} in this session")
    elif word == "prompts":
        found = clients.prompts(servers)
        yield CommandOutput("mcp", "\n".join(
            f"{p.usage()}" + (f"  — {p.description}" if p.description else "")
            for p in found) or "the servers offer no prompts")
    elif word == "prompt":
        yield from _send(session, servers, rest, token)
    else:
        raise ClawdError("usage: /mcp [on NAME | off NAME | prompts | prompt SERVER/NAME "
                         "[KEY=VALUE ...]]")


def server_rows(runtime: Runtime, entry: SessionEntry | None) -> list[dict[str, Any]]:
    """The agent's MCP servers as the web page lists them: name, transport, state, whether
    on in the session (``entry``'s ``mcpOff``), and their tools (name, first line)."""
    from clawd.frontends.compose import servers_of

    given = servers_of(runtime.config, runtime.agent_id)
    if runtime.mcp is None or not given:
        return []
    off = set((entry or {}).get("mcpOff") or [])
    tools: dict[str, list[dict[str, str]]] = {}
    for tool in runtime.mcp.tools(given):
        first = (tool.spec.description.strip().splitlines() or [""])[0]
        tools.setdefault(tool.spec.origin or "", []).append({"name": tool.spec.name,
                                                             "description": first})
    return [{"name": s.name, "transport": s.transport, "state": s.state,
             "on": s.name not in off, "error": s.error, "tools": tools.get(s.name, [])}
            for s in runtime.mcp.states() if s.name in given]


def _send(session: Session, servers: list[str], rest: str, token: CancelToken | None
          ) -> Generator[Event, None, None]:
    clients = session.rt.mcp
    assert clients is not None
    words = shlex.split(rest)
    if not words or "/" not in words[0]:
        raise ClawdError("usage: /mcp prompt SERVER/NAME [KEY=VALUE ...] (see /mcp prompts)")
    server, _, name = words[0].partition("/")
    arguments = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            raise ClawdError(f"{word!r}: give arguments as KEY=VALUE")
        arguments[key] = value
    if server not in servers:
        raise ClawdError(f"no MCP server {server!r} here; the servers are {', '.join(servers)}")
    prompt = next((p for p in clients.prompts([server]) if p.name == name), None)
    if prompt is None:
        raise ClawdError(f"{server} has no prompt {name!r} (see /mcp prompts)")
    missing = [n for n, required in prompt.arguments if required and n not in arguments]
    if missing:
        raise ClawdError(f"{prompt.usage()}: give {', '.join(missing)}")
    text = clients.prompt(server, name, arguments)
    if not text.strip():
        raise ClawdError(f"{server}/{name} gave nothing to send")
    yield Notice(f"sending the prompt {server}/{name} of the MCP server {server} as your "
                 f"message")
    yield from session.run_turn(text, token=token)
