"""clawd's memory for any MCP client: ``clawd mcp serve`` (stdio) and ``/mcp`` of the gateway.

Three tools, with the schemas clawd's own model is given: ``memory_search`` and
``memory_get`` (the agent's hybrid search and its line reader, as ``clawd.tools.memory``
runs them: a private session's reach), and ``memory_add`` (one note, a bullet in today's
daily log through the same writer as ``/memory add``, refused when the junk-note rules say
it is no note or the workspace is not writable; absent with ``--read-only``). A tool's
failure is an error result with its reason, never a protocol error. Each tool says what it
does to the memory in its annotations: search and get ``readOnlyHint``, add neither read-only
nor destructive (a client that asks before writes asks for it alone). The notes themselves
(MEMORY.md and the daily logs, ``memory/**.md``) are resources too, ``memory:///<path>``,
read as they are on disk (``notes``; ``RESOURCE_CHARS`` at most each).

The server is the SDK's low-level ``Server``: its tools are listed from clawd's
``ToolSpec``s (``memory_get`` takes ``from``, which no Python parameter can be called). Over
HTTP the agent is the one the gateway's guard let through: the request carries it
(``scope["clawd.agent"]``), so a person's token reaches their own agent's memory only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from clawd.context.access import Access
from clawd.core.errors import ClawdError, ToolError
from clawd.core.messages import ToolSpec
from clawd.guards.junk_notes import junk
from clawd.loop.runtime import Runtime
from clawd.memory.notes import append_to_daily_log
from clawd.tools.base import Param, Tool, ToolContext, tool
from clawd.workspace.interface import notes

AGENT_SCOPE_KEY = "clawd.agent"
NOTE_LIMIT_SCOPE_KEY = "clawd.noteBytes"  # the largest note the request's person may add
RESOURCE_SCHEME = "memory:///"
RESOURCE_CHARS = 1_000_000
INSTRUCTIONS = ("The memory of a clawd assistant: Markdown notes (MEMORY.md, daily logs in "
                "memory/). Search before answering about the user's past work, decisions, "
                "people or preferences; read around a hit with memory_get.")


@tool("memory_add", "Add one note to today's daily log (memory/YYYY-MM-DD.md) of the "
      "user's clawd memory: a fact, decision or preference worth keeping, in one line.")
def memory_add(ctx: ToolContext, *, text: Annotated[str, Param("the note")]) -> str:
    if ctx.access.workspace != "rw" or not ctx.files.writable():
        raise ToolError("this memory is read-only; the note was not saved")
    why = junk(f"- {' '.join(text.split())}")
    if why:
        raise ToolError(f"not a note ({why}); nothing was saved")
    rel = append_to_daily_log(ctx.files, text, ctx.today())
    if ctx.memory is not None:
        ctx.memory.mark_dirty()
    return f"added to {rel}"


def memory_tools_for_clients(read_only: bool) -> list[Tool]:
    """The tools an MCP client gets."""
    from clawd.tools.memory import memory_tools

    tools = memory_tools()
    if not read_only:
        tools.append(memory_add)
    return tools


def tool_context(runtime: Runtime, read_only: bool) -> ToolContext:
    workspace = "ro" if read_only and runtime.settings.workspace_access == "rw" else (
        runtime.settings.workspace_access)
    return ToolContext(runtime.workspace, runtime.settings, memory=runtime.memory,
                       today=lambda: runtime.clock().date(), access=Access(workspace),
                       files=runtime.files, backups=runtime.backups)


def run_tool(tools: list[Tool], runtime: Runtime, name: str, args: dict[str, Any],
             read_only: bool, note_bytes: int | None = None) -> tuple[str, bool]:
    """A tool's result text and whether it is an error; ``note_bytes``: the largest note
    ``memory_add`` takes (``gateway.quotas.noteBytes``)."""
    found = next((t for t in tools if t.spec.name == name), None)
    if found is None:
        return f"unknown tool: {name}; the tools are " + ", ".join(
            t.spec.name for t in tools), True
    size = len(str(args.get("text") or "").encode("utf-8", "surrogatepass"))
    if name == "memory_add" and note_bytes is not None and size > note_bytes:
        return (f"error: the note is {size:,} bytes; a note may be {note_bytes:,} bytes at "
                f"most (gateway.quotas.noteBytes); nothing was saved"), True
    if runtime.memory is None and name != "memory_add":
        return "memory search is off for this agent (memorySearch.enabled)", True
    try:
        out = found.run(args, tool_context(runtime, read_only))
    except ClawdError as exc:
        return f"error: {exc}", True
    return (out if isinstance(out, str) else out.text), False


def build_server(runtime_of: Callable[[Any], Runtime], *, read_only: bool,
                 note_limit: Callable[[Any], int | None] = lambda ctx: None) -> Any:
    """The SDK's server over the tools; ``runtime_of(request_context)`` picks the agent,
    ``note_limit(request_context)`` the largest note it takes."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from clawd import __version__

    tools = memory_tools_for_clients(read_only)

    def as_mcp_tool(spec: ToolSpec) -> Any:
        reads = spec.name != "memory_add"  # search and get change nothing
        return types.Tool(name=spec.name, description=spec.description,
                          input_schema=spec.parameters,
                          annotations=types.ToolAnnotations(
                              read_only_hint=reads, destructive_hint=False,
                              idempotent_hint=reads, open_world_hint=False))

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[as_mcp_tool(t.spec) for t in tools])

    async def call_tool(ctx: Any, params: Any) -> Any:
        runtime = runtime_of(ctx)
        text, is_error = await anyio.to_thread.run_sync(
            run_tool, tools, runtime, params.name, dict(params.arguments or {}), read_only,
            note_limit(ctx))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    is_error=is_error)

    async def list_resources(ctx: Any, params: Any) -> Any:
        runtime = runtime_of(ctx)
        paths = await anyio.to_thread.run_sync(notes, runtime.files)
        return types.ListResourcesResult(resources=[types.Resource(
            uri=RESOURCE_SCHEME + path, name=path, mime_type="text/markdown",
            description="the agent's long-term memory" if path == "MEMORY.md" else
            "a daily log of the agent's memory") for path in paths])

    async def read_resource(ctx: Any, params: Any) -> Any:
        runtime = runtime_of(ctx)
        text = await anyio.to_thread.run_sync(read_note, runtime, str(params.uri))
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="text/markdown", text=text)])

    return Server("clawd-memory", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


def read_note(runtime: Runtime, uri: str) -> str:
    """The text of the note ``uri`` names (one of ``notes``), else a ``ClawdError``."""
    path = uri.removeprefix(RESOURCE_SCHEME) if uri.startswith(RESOURCE_SCHEME) else None
    if path is None or path not in notes(runtime.files):
        raise ClawdError(f"{uri}: not one of this memory's notes (MEMORY.md, memory/**.md)")
    return (runtime.files.read(path) or "")[:RESOURCE_CHARS]


def serve_stdio(runtime: Runtime, *, read_only: bool) -> None:
    """Serve ``runtime``'s memory on stdin/stdout until the client goes."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(lambda ctx: runtime, read_only=read_only)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


class HttpMemory:
    """``/mcp`` of the gateway: streamable HTTP over the agents the guard lets through."""

    def __init__(self, runtime: Callable[[str], Runtime], *, read_only: bool = False):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        def runtime_of(ctx: Any) -> Runtime:
            request = getattr(ctx, "request", None)
            agent = request.scope.get(AGENT_SCOPE_KEY) if request is not None else None
            if agent is None:
                raise ClawdError("no agent for this request")
            return runtime(agent)

        def note_limit(ctx: Any) -> int | None:
            request = getattr(ctx, "request", None)
            return request.scope.get(NOTE_LIMIT_SCOPE_KEY) if request is not None else None

        server = build_server(runtime_of, read_only=read_only, note_limit=note_limit)
        # the gateway's guard checks Host and Origin itself, for every route alike
        self.manager = StreamableHTTPSessionManager(
            app=server, security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=False))

    def run(self) -> Any:
        """The context the manager's sessions live in (the gateway's lifespan)."""
        return self.manager.run()

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)
