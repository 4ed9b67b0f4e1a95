"""The connections to the configured MCP servers, and their tools as clawd's (``McpClients``).

One event loop in a background thread holds every connection of the process (the SDK is
async; the loop and its tools are not). ``start`` connects to all servers side by side, each
bounded by its ``connectionTimeoutMs``; a server that does not start is one line in
``problems`` and the others work (``requestTimeoutMs`` does not bound a start). Its tools
become ``Tool``s named ``<server>__<tool>`` (``shapes``), offered in group sessions only when
the server says ``groups``; an agent is handed the tools of the servers it is given
(``tools(servers)``, ``Mcp.for_agent``), while the connections are the process's.

``start(lazy=True)`` (a chat, the gateway) starts only the servers whose tools it does not
know: the others' tools come from their last listing (``listing.cached``), and each starts
at its first call, so servers a run does not use cost it nothing. Every listing is kept for
the next process.

A call is bounded by ``requestTimeoutMs``; a time-out, a tool's error, a server that exits
during the call: each is an error result for the model, never an exception for the turn. A
stdio server that has exited is started again at its next call (a connection idle for a
while is pinged first, so a server that died between calls costs no failed call). A child's
stderr goes to ``<state>/logs/mcp-<name>.log``; its last line explains a failed start.
Values of ``env`` and ``headers``, and of the ``${NAME}`` put in, are scrubbed from every
message (``launch``). A tool that asks first (``approval``) is put to ``ToolContext.approve``,
or refused where there is none. Names are made unique across the servers
(``shapes.unique_names``); a repeat, a rename, a tool the SDK cannot read and an allowed
name a server lacks are each a line in ``problems``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
import warnings
from collections.abc import Collection, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from clawd.config.mcp import McpServer
from clawd.core.cancel import CancelToken
from clawd.core.messages import ToolSpec
from clawd.core.textcut import shorten
from clawd.mcp import approval
from clawd.mcp.launch import Launch, child_env, resolve, scrub
from clawd.mcp.listing import Listed, cached, keep, list_tools
from clawd.mcp.quiet import quiet
from clawd.mcp.shapes import Output, description, framed, read_result, unique_names, wire_schema
from clawd.tools.base import Tool, ToolContext

T = TypeVar("T")
IDLE_PING_SECONDS = 2.0  # a connection quiet this long is pinged before a call
PING_SECONDS = 2.0


@dataclass(frozen=True)
class ServerState:
    """What ``clawd mcp list`` shows of one server."""

    name: str
    transport: str
    state: str  # ready | failed | stopped | idle (its tools known, not started) | disabled
    tools: int
    error: str = ""
    notes: tuple[str, ...] = ()  # tools left out or renamed, allowed names it lacks
    missing: tuple[str, ...] = ()  # names of its allow-list it does not have


def _one_line(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return shorten(" ".join(str(exc).split()) or type(exc).__name__, 300)


class Connection:
    """One server: its client session (alive in the background loop) and its tools."""

    def __init__(self, name: str, config: McpServer, logs: Path | None,
                 on_ready: Any = None):
        self.name, self.config, self.logs = name, config, logs
        self.on_ready = on_ready  # called with the connection once it has listed its tools
        self.state, self.error = "stopped", ""
        self.tools: list[Listed] = []  # allow-list applied
        self.notes: list[str] = []  # tools left out, allowed names it lacks
        self.missing: list[str] = []  # allowed names it lacks
        self.launch: Launch | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0
        self._starting: asyncio.Lock | None = None

    @property
    def log_path(self) -> Path | None:
        return self.logs / f"mcp-{self.name}.log" if self.logs else None

    async def start(self) -> None:
        """Connect and list the tools, within ``connectionTimeoutMs``; failure is recorded."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.state == "ready":
                return
            await self._stop_task()
            ready, self._stop = asyncio.Event(), asyncio.Event()
            self._task = asyncio.create_task(self._run(ready, self._stop))
            seconds = self.config.connection_timeout_ms / 1000
            try:
                await asyncio.wait_for(ready.wait(), seconds)
            except TimeoutError:  # let it go: its clean-up may take seconds more
                task, self._task = self._task, None
                if task is not None:
                    task.cancel()
                self._fail(f"no answer within {seconds:g} s (connectionTimeoutMs)")

    @property
    def secrets(self) -> list[str]:
        return self.launch.secrets if self.launch is not None else self.config.secrets()

    def _fail(self, error: str) -> None:
        self.state, self._client = "failed", None
        self.error = scrub(error, self.secrets)

    async def _run(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        from mcp import Client

        cfg = self.config
        # The start (initialize, the tool list) is bounded by connectionTimeoutMs and a call by
        # requestTimeoutMs, each by its own wait: the session's own limit is only the longer
        # of the two, so a slow start is not cut by a short requestTimeoutMs.
        backstop = max(cfg.connection_timeout_ms, cfg.request_timeout_ms) / 1000
        try:
            self.launch = resolve(cfg, os.environ)
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(await self._transport(stack, self.launch), mode="legacy",
                           read_timeout_seconds=backstop))
                tools, notes, missing = await list_tools(client, cfg.tools, self.name,
                                                         backstop)
                if self._stop is not stop:
                    return
                self.tools = [Listed.of(t) for t in tools]
                self._client, self.state, self.error = client, "ready", ""
                self.notes = [scrub(note, self.secrets) for note in notes]
                self.missing = missing
                self._last = time.monotonic()
                ready.set()
                if self.on_ready is not None:
                    self.on_ready(self)
                await stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - any failure of a server is its state
            if self._stop is stop:
                self._fail(await self._explained(exc))
        finally:
            if self._stop is stop:  # not a connection given up on and since replaced
                self._client = None
                if self.state == "ready":
                    self.state = "stopped"
            ready.set()

    async def _transport(self, stack: contextlib.AsyncExitStack, launch: Launch) -> Any:
        if launch.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(
                headers=dict(launch.headers)))
            return streamable_http_client(launch.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog: TextIO = stack.enter_context(self._errlog())
        # the whole environment is given, so the SDK adds nothing of clawd's to it
        params = StdioServerParameters(command=launch.command or "", args=launch.args,
                                       env=child_env(launch.env, os.environ),
                                       cwd=self.config.cwd)
        return stdio_client(params, errlog=errlog)

    def _errlog(self) -> TextIO:
        path = self.log_path
        if path is None:
            return open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the stack closes it
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a", encoding="utf-8")  # noqa: SIM115 - the stack closes it

    async def _explained(self, exc: BaseException) -> str:
        """``_why``, or for a remote server what its URL answers when asked plainly
        (``diagnose``)."""
        launch = self.launch
        if launch is None or launch.url is None:
            return self._why(exc)
        from clawd.mcp.diagnose import probe

        try:
            said = await asyncio.wait_for(probe(launch.url, launch.headers, self.name), 8)
        except Exception:  # noqa: BLE001 - the probe only adds words
            said = None
        return said or self._why(exc)

    def _why(self, exc: BaseException) -> str:
        """One line on why the server stopped: the error, and its stderr's last line."""
        why = _one_line(exc)
        path = self.log_path
        if self.config.command is not None and path is not None and path.exists():
            with contextlib.suppress(OSError):
                lines = [line.strip() for line in
                         path.read_text(encoding="utf-8", errors="replace").splitlines()]
                last = next((line for line in reversed(lines) if line), "")
                if last and last not in why:
                    why += f" (its stderr: {last[:200]})"
        return why

    async def _stop_task(self) -> None:
        """End the connection: asked to within five seconds, else cancelled."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 5)
        except (TimeoutError, Exception):  # noqa: BLE001 - a stuck server is let go
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def call(self, tool: str, arguments: dict[str, Any]) -> Output:
        if self.state != "ready" or not await self._alive():
            self.state = "stopped"
            await self.start()
            if self.state != "ready":
                return Output(f"the MCP server {self.name} is not running: {self.error}",
                              is_error=True)
        client, seconds = self._client, self.config.request_timeout_ms / 1000
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments), seconds)
        except TimeoutError:
            return Output(f"{self.name}: {tool} did not answer within {seconds:g} s "
                          f"(requestTimeoutMs)", is_error=True)
        except Exception as exc:  # noqa: BLE001 - a failed call is the model's to act on
            why = scrub(_one_line(exc), self.secrets)
            if not await self._alive(ping=True):
                self.state = "stopped"
                return Output(f"the MCP server {self.name} stopped during the call ({why}); "
                              f"it is started again at the next call", is_error=True)
            return Output(f"{self.name}: {tool} failed: {why}", is_error=True)
        finally:
            self._last = time.monotonic()
        return framed(read_result(result), self.name)

    async def _alive(self, ping: bool = False) -> bool:
        """Whether the session still answers (pinged when quiet for a while, or ``ping``)."""
        client = self._client
        if client is None or self._task is None or self._task.done():
            return False
        if not ping and time.monotonic() - self._last < IDLE_PING_SECONDS:
            return True
        try:
            with warnings.catch_warnings():  # ping is deprecated, but legacy servers answer it
                warnings.simplefilter("ignore")
                await asyncio.wait_for(client.send_ping(), PING_SECONDS)
        except Exception:  # noqa: BLE001 - no answer: not alive
            return False
        return True

    async def close(self) -> None:
        await self._stop_task()
        self.state = "stopped"


def _key(config: McpServer) -> str:
    """A key of a server's settings: its kept listing is for these settings only."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(config.model_dump(), sort_keys=True).encode()).hexdigest()


class McpClients:
    """The process's MCP servers (see the module docstring)."""

    def __init__(self, servers: dict[str, McpServer], *, logs: Path | None = None,
                 cache: Path | None = None):
        self.cache = cache
        self.connections = {name: Connection(name, cfg, logs, self._kept)
                            for name, cfg in servers.items() if cfg.enabled}
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
                if cancel is not None:
                    cancel.check()
        except BaseException:
            future.cancel()
            raise

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
                connection.tools, connection.state = known, "idle"

        async def all_of() -> None:
            await asyncio.gather(*(c.start() for c in starting))
        if starting:
            self._run(all_of())
        return self.problems()

    def _kept(self, connection: Connection) -> None:
        keep(self.cache, connection.name, _key(connection.config), connection.tools)

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
        found = [ServerState(c.name, c.config.transport, c.state, len(c.tools), c.error,
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
            return self._run(connection.call(listed.name, args), ctx.cancel)

        return Tool(spec, run, shared=cfg.groups)

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
