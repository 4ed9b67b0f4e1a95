"""One configured server's connection (``Connection``): its client session, alive in the
process's MCP event loop, its tools, and its calls.

``start`` connects and lists the tools within ``connectionTimeoutMs`` (the session's own
limit is only the longer of the two time-outs, so a slow start is not cut by a short
``requestTimeoutMs``); a failure is its ``state`` and ``error``, one line, its stderr's last
line in it for a child (``<state>/logs/mcp-<name>.log``), a remote server's plain answer
(``diagnose``) for a URL. A call is bounded by ``requestTimeoutMs``, a question open to the
person not counted (``asking.within``); a time-out, a tool's error, a server that exits
during the call: each is an error result, never an exception. A connection that is not
running is started at its next call (one quiet for a while is pinged first, so a server
that died between calls costs no failed call). Every message is scrubbed of the server's
secrets (``launch``).

A URL that speaks only the legacy SSE transport (``diagnose``) is tried again with it. The
client declares roots (the folders it was given: the operator's agent's workspace) and
honours ``notifications/tools/list_changed``: the tools are listed again and ``on_ready``
told. The server's ``instructions`` are kept, as the server sent them (``instructions``). Its
questions to the person (elicitation, form and URL mode, and a call refused until the person
has been to a page, -32042) go through ``asking``; ``notifications/elicitation/complete`` is
only logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from clawd.config.mcp import McpServer
from clawd.core.errors import ClawdError
from clawd.core.textcut import shorten
from clawd.mcp.asking import URL_ELICITATION_REQUIRED, Asking, within
from clawd.mcp.launch import Launch, child_env, resolve, scrub
from clawd.mcp.listing import Listed, list_tools
from clawd.mcp.prompts import Prompt, as_message, list_prompts
from clawd.mcp.resources import READER, list_resources, read_contents, reader
from clawd.mcp.shapes import Output, framed, read_result

IDLE_PING_SECONDS = 2.0  # a connection quiet this long is pinged before a call
PING_SECONDS = 2.0
log = logging.getLogger(__name__)


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


def _found(exc: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``exc``, its groups, causes and contexts."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        found = todo.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, kind):
            return found
        if isinstance(found, BaseExceptionGroup):
            todo += list(found.exceptions)
        todo += [found.__cause__, found.__context__]
    return None


class Connection:
    """One server: its client session (alive in the background loop) and its tools."""

    def __init__(self, name: str, config: McpServer, logs: Path | None,
                 on_ready: Callable[[Connection], None] | None = None,
                 roots: list[Path] | None = None,
                 asking: Asking | None = None):
        self.name, self.config, self.logs = name, config, logs
        self.on_ready = on_ready  # called with the connection each time it has listed its tools
        self.roots = roots or []
        self.asking = asking  # puts a server's questions to the person
        self.auth: Path | None = None  # where OAuth tokens are kept (``oauth``)
        self.login: dict[str, Any] = {}  # ``clawd mcp login``: how to get new tokens
        self.sse = False  # the URL speaks the legacy SSE transport only
        self._speaks_sse = False
        self.instructions: str | None = None
        self.prompts: list[Prompt] = []
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
            await self._attempt()
            if self.state == "failed" and self._speaks_sse and not self.sse:
                self.sse = True  # the transport this URL speaks
                await self._attempt()

    async def _attempt(self) -> None:
        """One start (``start``)."""
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
                asked = partial(self.asking.elicited, self.name) if self.asking else None
                client = await stack.enter_async_context(
                    Client(await self._transport(stack, self.launch), mode="legacy",
                           read_timeout_seconds=backstop, list_roots_callback=self._roots,
                           message_handler=self._heard, elicitation_callback=asked))
                tools, notes, missing = await list_tools(client, cfg.tools, self.name,
                                                         backstop)
                read = reader(self.name, await self._resources(client, notes))
                if self._stop is not stop:
                    return
                self.tools = [Listed.of(t) for t in tools] + ([read] if read else [])
                self._client, self.state, self.error = client, "ready", ""
                self.notes = [scrub(note, self.secrets) for note in notes]
                self.missing = missing
                self.instructions = client.instructions
                self.prompts = await self._prompts(client, notes)
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

    async def _resources(self, client: Any, notes: list[str]) -> list[dict[str, str]]:
        """Its resources, when the allow-list lets the reader in; a failure costs them only
        (a line in ``notes``)."""
        if self.config.tools is not None and READER not in self.config.tools:
            return []
        try:
            return await list_resources(client)
        except Exception as exc:  # noqa: BLE001 - the tools work without them
            notes.append(f"mcp: {self.name}'s resources are left out: {_one_line(exc)}")
            return []

    async def _prompts(self, client: Any, notes: list[str]) -> list[Prompt]:
        try:
            return await list_prompts(client, self.name)
        except Exception as exc:  # noqa: BLE001 - the tools work without them
            notes.append(f"mcp: {self.name}'s prompts are left out: {_one_line(exc)}")
            return []

    async def prompt(self, name: str, arguments: dict[str, str]) -> str:
        """The text of prompt ``name`` filled with ``arguments`` (``prompts.as_message``); a
        failure is a ``ClawdError`` in one line."""
        if self.state != "ready" or not await self._alive():
            self.state = "stopped"
            await self.start()
        if self.state != "ready":
            raise ClawdError(f"the MCP server {self.name} is not running: {self.error}")
        seconds = self.config.request_timeout_ms / 1000
        try:
            got = await asyncio.wait_for(self._client.get_prompt(name, arguments), seconds)
        except Exception as exc:  # noqa: BLE001 - said in one line
            raise ClawdError(f"{self.name}: prompt {name} failed: "
                             f"{scrub(_one_line(exc), self.secrets)}") from None
        finally:
            self._last = time.monotonic()
        return as_message(got)

    async def read(self, uri: str) -> Output:
        """Read the resource ``uri`` (as ``call`` calls a tool)."""
        return await self.call(READER, {"uri": uri}, resource=True)

    async def _roots(self, context: Any) -> Any:
        from mcp_types import ListRootsResult, Root

        return ListRootsResult(roots=[Root(uri=path.resolve().as_uri(), name=path.name)
                                      for path in self.roots])

    async def _heard(self, message: Any) -> None:
        """A notification of the server: its tool list changed, so it is listed again; a
        page it sent the person to is done with (logged only)."""
        from mcp_types import ElicitCompleteNotification, ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification) and self._client is not None:
            asyncio.get_running_loop().create_task(self._relist(self._client))
        elif isinstance(message, ElicitCompleteNotification):
            log.debug("mcp: %s: elicitation %s complete", self.name,
                      message.params.elicitation_id)

    async def _relist(self, client: Any) -> None:
        seconds = self.config.connection_timeout_ms / 1000
        try:
            tools, notes, self.missing = await asyncio.wait_for(
                list_tools(client, self.config.tools, self.name, seconds), seconds)
        except Exception:  # noqa: BLE001 - the tools listed before stay
            return
        if client is self._client:  # the resources' reader stays
            self.tools = [Listed.of(t) for t in tools] + [
                t for t in self.tools if t.kind == "resources"]
            self.notes = [scrub(note, self.secrets) for note in notes]
            if self.on_ready is not None:
                self.on_ready(self)

    async def _transport(self, stack: contextlib.AsyncExitStack, launch: Launch) -> Any:
        if launch.url is not None and self.sse:
            from mcp.client.sse import sse_client

            return sse_client(launch.url, headers=dict(launch.headers))
        if launch.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            auth = None
            if self.auth is not None and not any(k.lower() == "authorization"
                                                 for k in launch.headers):
                from clawd.mcp.oauth import provider

                auth = provider(self.name, launch.url, self.auth, **self.login)
            http = await stack.enter_async_context(create_mcp_http_client(
                headers=dict(launch.headers), auth=auth))
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
        from clawd.mcp.oauth import NeedsLogin

        login = _found(exc, NeedsLogin)
        if login is not None:
            return str(login)
        launch = self.launch
        if launch is None or launch.url is None:
            return self._why(exc)
        from clawd.mcp.diagnose import LEGACY_SSE, probe

        try:
            said = await asyncio.wait_for(probe(launch.url, launch.headers, self.name), 8)
        except Exception:  # noqa: BLE001 - the probe only adds words
            said = None
        self._speaks_sse = said == LEGACY_SSE
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

    async def call(self, tool: str, arguments: dict[str, Any], resource: bool = False
                   ) -> Output:
        if self.state != "ready" or not await self._alive():
            self.state = "stopped"
            await self.start()
            if self.state != "ready":
                return Output(f"the MCP server {self.name} is not running: {self.error}",
                              is_error=True)
        client, seconds = self._client, self.config.request_timeout_ms / 1000
        try:
            if resource:
                read = await within(self.asking, client.read_resource(str(arguments.get(
                    "uri", ""))), seconds)
                return framed(read_contents(read), self.name)
            result = await within(self.asking, client.call_tool(tool, arguments), seconds)
        except TimeoutError:
            return Output(f"{self.name}: {tool} did not answer within {seconds:g} s "
                          f"(requestTimeoutMs)", is_error=True)
        except Exception as exc:  # noqa: BLE001 - a failed call is the model's to act on
            if getattr(exc, "code", None) == URL_ELICITATION_REQUIRED and self.asking:
                return await self.asking.required(self.name, tool, getattr(exc, "data", None))
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
