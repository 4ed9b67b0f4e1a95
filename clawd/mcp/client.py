"""The connections to the configured MCP servers, and their tools as clawd's (``McpClients``).

One event loop in a background thread holds every connection of the process (the SDK is
async; the loop and its tools are not). ``start`` connects to all servers side by side, each
bounded by its ``connectionTimeoutMs`` (``connection``); a server that does not start is one
line in ``problems`` and the others work. Its tools become ``Tool``s named
``<server>__<tool>`` (``shapes``), unique across the servers (``shapes.unique_names``),
offered in group sessions only when the server says ``groups``; an agent is handed the
tools of the servers it is given (``tools(servers)``, ``Mcp.for_agent``), while the
connections are the process's.

``start(lazy=True)`` (a chat, the gateway) starts only the servers whose tools it does not
know: the others' tools come from their last listing (``listing.cached``), and each starts
at its first call, so servers a run does not use cost it nothing. Every listing is kept for
the next process.

A call is an error result for the model, never an exception for the turn. A tool that asks
first (``approval``) is put to ``ToolContext.confirm`` (the web page), else
``ToolContext.approve`` (the REPL), or refused where there is neither. A server's question
during a call (``elicit`` for a form, ``elicit_url`` for a web page to open; set by the
REPL and the gateway) is put to the person by the thread that waits for the call
(``asking``); with none set it is declined. A repeat, a rename, a tool the SDK cannot read
and an allowed name a server lacks are each a line in ``problems``. ``prompts`` and
``prompt`` serve ``/mcp prompt``; ``listen`` hears every new listing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Collection, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from clawd.config.mcp import McpServer
from clawd.core.cancel import CancelToken
from clawd.core.messages import ToolSpec
from clawd.mcp import approval
from clawd.mcp.asking import Asking
from clawd.mcp.connection import Connection, ServerState
from clawd.mcp.elicit import Link
from clawd.mcp.listing import cached, keep
from clawd.mcp.prompts import Prompt
from clawd.mcp.quiet import quiet
from clawd.mcp.shapes import Output, description, unique_names, wire_schema
from clawd.tools.base import Tool, ToolContext

__all__ = ["Connection", "McpClients", "ServerState"]

T = TypeVar("T")


def _key(config: McpServer) -> str:
    """A key of a server's settings: its kept listing is for these settings only."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(config.model_dump(), sort_keys=True).encode()).hexdigest()


class McpClients:
    """The process's MCP servers (see the module docstring)."""

    def __init__(self, servers: dict[str, McpServer], *, logs: Path | None = None,
                 cache: Path | None = None, roots: list[Path] | None = None,
                 auth: Path | None = None):
        self.cache = cache
        self._listeners: list[Callable[[], None]] = []
        # a server's questions during a call, put to the person by the thread that waits for
        # the call (``_run``; ``elicit``, ``elicit_url``)
        self.asking = Asking()
        self.connections = {name: Connection(name, cfg, logs, self._kept, roots, self.asking)
                            for name, cfg in servers.items() if cfg.enabled}
        for connection in self.connections.values():
            connection.auth = auth  # OAuth tokens (``oauth``), where a server asks for them
        self.disabled = [name for name, cfg in servers.items() if not cfg.enabled]
        quiet(logs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="clawd-mcp",
                                        daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self, coroutine: Coroutine[Any, Any, T],
             cancel: CancelToken | None = None) -> T:
        """Run ``coroutine`` in the background loop and wait for it. Ctrl-C, and the turn's
        ``cancel`` set from another thread (a stop over HTTP), are seen within a quarter
        second: the call is cancelled and the stop raised (``Cancelled``)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            while True:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    return future.result(timeout=0.25)
                self.asking.answer()
                if cancel is not None:
                    cancel.check()
        except BaseException:
            future.cancel()
            raise

    @property
    def elicit(self) -> Callable[[str, Any], dict[str, Any] | None] | None:
        """A server's form (message, requested schema) to the values typed, None to
        decline; None: nobody can answer here (``-m``)."""
        return self.asking.form

    @elicit.setter
    def elicit(self, ask: Callable[[str, Any], dict[str, Any] | None] | None) -> None:
        self.asking.form = ask

    @property
    def elicit_url(self) -> Callable[[Link], str] | None:
        """A web page a server asks the person to open (``elicit.Link``) to "accept",
        "decline" or "cancel"; None: nobody can answer here, and it is declined."""
        return self.asking.link

    @elicit_url.setter
    def elicit_url(self, ask: Callable[[Link], str] | None) -> None:
        self.asking.link = ask

    def start(self, lazy: bool = False) -> list[str]:
        """Connect to every server side by side (``lazy``: only those whose last listing is
        not kept; the others are ``idle``, their tools known); one line per server that did
        not start."""
        starting = []
        for connection in self.connections.values():
            known = cached(self.cache, connection.name, _key(connection.config)) if (
                lazy and connection.state == "stopped") else None
            if known is None:
                starting.append(connection)
            else:
                (connection.tools, connection.instructions), connection.state = known, "idle"

        async def all_of() -> None:
            await asyncio.gather(*(c.start() for c in starting))
        if starting:
            self._run(all_of())
        return self.problems()

    def _kept(self, connection: Connection) -> None:
        """A server has listed its tools (at its start, or after it said they changed)."""
        keep(self.cache, connection.name, _key(connection.config), connection.tools,
             connection.instructions)
        for listener in list(self._listeners):
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the MCP loop's thread) whenever a server has listed its
        tools anew: a runtime then takes the new ones (``frontends.compose``)."""
        self._listeners.append(listener)

    def instructions(self, servers: Collection[str]) -> dict[str, str]:
        """What each of ``servers`` says of itself (its ``instructions``), capped and
        cleaned as a description is: untrusted text for the system prompt."""
        return {c.name: description(c.instructions) for c in self.connections.values()
                if c.name in servers and c.instructions and c.instructions.strip()}

    def problems(self) -> list[str]:
        """A line per server that did not start, then per note on the tools: left out,
        renamed, or named in an allow-list and missing."""
        failed = [f"mcp: {c.name} did not start: {c.error}"
                  for c in self.connections.values() if c.state == "failed"]
        notes = [note for c in self.connections.values() for note in c.notes]
        return failed + notes + self._names()[1]

    def _names(self) -> tuple[list[tuple[Connection, Any, str]], list[str]]:
        """Every started server's tools with the model's name for each (unique across the
        servers; ``shapes.unique_names``), and the lines on repeats and renames."""
        listed = [(c, t) for c in self.connections.values() for t in c.tools]
        names, notes = unique_names([(c.name, t.name) for c, t in listed])
        return [(c, t, n) for (c, t), n in zip(listed, names, strict=True)
                if n is not None], notes

    def states(self) -> list[ServerState]:
        renamed = self._names()[1]
        found = [ServerState(c.name, "sse" if c.sse else c.config.transport, c.state,
                             len(c.tools), c.error,
                             tuple(c.notes) + tuple(n for n in renamed if n.startswith(
                                 (f"mcp: {c.name} ", f"mcp: {c.name}'s "))),
                             tuple(c.missing))
                 for c in self.connections.values()]
        return found + [ServerState(name, "", "disabled", 0) for name in self.disabled]

    def tools(self, servers: Collection[str] | None = None) -> list[Tool]:
        """The started servers' tools as clawd's: of every server, or of ``servers`` (the
        ones an agent is given, ``Mcp.for_agent``)."""
        return [self._tool(connection, listed, name)
                for connection, listed, name in self._names()[0]
                if servers is None or connection.name in servers]

    def _tool(self, connection: Connection, listed: Any, name: str) -> Tool:
        said = description(listed.description or listed.title or listed.name)
        spec = ToolSpec(name, said, wire_schema(listed.input_schema), origin=connection.name)
        cfg = connection.config

        def run(args: dict[str, Any], ctx: ToolContext) -> Output:
            if approval.asks(cfg.approval, listed.annotations, listed.name, cfg.auto_approve):
                ask = ctx.confirm if ctx.confirm is not None else ctx.approve
                if ask is None:
                    return Output(approval.refusal(name, connection.name), is_error=True)
                if not ask(approval.request(name, args)):
                    return Output(approval.declined(name), is_error=True)
            if listed.kind == "resources":
                return self._run(connection.read(str(args.get("uri", ""))), ctx.cancel)
            return self._run(connection.call(listed.name, args), ctx.cancel)

        return Tool(spec, run, shared=cfg.groups)

    def prompts(self, servers: Collection[str]) -> list[Prompt]:
        """The prompts of ``servers`` (those not started yet are started, side by side)."""
        chosen = [c for c in self.connections.values() if c.name in servers]

        async def all_of() -> None:
            await asyncio.gather(*(c.start() for c in chosen if c.state != "ready"))
        self._run(all_of())
        return [p for c in chosen for p in c.prompts]

    def prompt(self, server: str, name: str, arguments: dict[str, str]) -> str:
        """Prompt ``name`` of ``server`` filled with ``arguments``, as one message's text."""
        return self._run(self.connections[server].prompt(name, arguments))

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Output:
        return self._run(self.connections[server].call(tool, arguments))

    def close(self) -> None:
        """Stop every server (children end with their stdin) and the background loop."""
        if self._closed:
            return
        self._closed = True

        async def all_of() -> None:
            await asyncio.gather(*(c.close() for c in self.connections.values()))
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(all_of(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
