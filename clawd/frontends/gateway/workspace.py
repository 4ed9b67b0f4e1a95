"""Workspace files and memory search for the native API, under the tools' own rules.

Each request names a session key, and gets exactly the reach the model has in that session
(``context.access``): a path outside the workspace is refused (``WorkspaceFiles.canonical``);
a group or channel key never reads MEMORY.md or other private notes; ``workspaceAccess``
``ro`` refuses writes and ``none`` refuses everything. Writing goes through the ``write``
tool itself (daily logs append-only, earlier versions of MEMORY.md and the bootstrap files
kept, ``.clawd/`` untouchable) and searching through ``memory_search`` (a group key sees
only shareable notes). Errors are ``ClawdError``s with the tools' one-line messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from clawd.context.access import MEMORY_TOOLS, Access
from clawd.core.errors import ClawdError, ToolError
from clawd.loop.runtime import Runtime
from clawd.tools.base import ToolContext
from clawd.tools.files import text_of, write
from clawd.tools.memory import visible_search

MAX_READ_BYTES = 2_000_000


class Refused(ClawdError):
    """The session may not do this (HTTP 403)."""


class NotFound(ClawdError):
    """No such file (HTTP 404)."""


def context(runtime: Runtime, key: str) -> ToolContext:
    """What a tool call in session ``key`` would get."""
    access = Access.of(key, runtime.settings, runtime.workspace)
    return ToolContext(runtime.workspace, runtime.settings, memory=runtime.memory,
                       today=lambda: runtime.clock().date(), access=access,
                       files=runtime.files, backups=runtime.backups)


def read_file(runtime: Runtime, key: str, path: str) -> dict[str, Any]:
    """A workspace file's text (or a folder's entries) as session ``key`` may read it."""
    ctx = context(runtime, key)
    if not ctx.access.workspace_files:
        raise Refused("this agent has no workspace access (workspaceAccess: \"none\")")
    rel = ctx.files.canonical(path)
    try:
        ctx.access.check_read(rel)
    except ToolError as exc:
        raise Refused(str(exc)) from None
    try:
        stat = ctx.files.stat(rel)
        if stat is not None and stat.kind == "folder":
            return {"path": rel, "type": "directory", "entries": ctx.files.entries(rel)}
        if stat is not None and stat.size > MAX_READ_BYTES:
            raise ClawdError(f"{rel} is {stat.size:,} bytes; files up to {MAX_READ_BYTES:,} "
                             f"bytes are read here")
    except OSError as exc:
        raise ClawdError(f"cannot read {rel}: {exc.strerror}") from None
    content = text_of(ctx.files, rel, rel)
    if content is None:
        raise NotFound(f"file not found: {rel}")
    return {"path": rel, "type": "file", "content": content}


def write_file(runtime: Runtime, key: str, path: str, content: str, append: bool,
               check: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Write (or append to) a workspace file as the ``write`` tool would in session
    ``key``; what the tool said. ``check(path, content)``: raises when the writer may not
    write that much there (``quotas.write_limit``)."""
    ctx = context(runtime, key)
    if not ctx.access.workspace_files:
        raise Refused("this agent has no workspace access (workspaceAccess: \"none\")")
    if check is not None:
        check(ctx.files.canonical(path), content)
    try:
        said = write.run({"path": path, "content": content, "append": append}, ctx)
    except ToolError as exc:
        raise Refused(str(exc)) from None
    if runtime.memory is not None:
        runtime.memory.mark_dirty()
    return {"path": ctx.files.canonical(path), "result": said}


def search(runtime: Runtime, key: str, query: str, max_results: int | None
           ) -> dict[str, Any]:
    """``memory_search`` as session ``key`` sees it."""
    ctx = context(runtime, key)
    if ctx.memory is None:
        raise Refused("memory search is off for this agent (memorySearch.enabled)")
    if MEMORY_TOOLS & ctx.access.withheld():
        raise Refused(f"session {key} is not offered memory search (a group or channel "
                      f"session with no memorySearch.shareablePaths, or no workspace access)")
    if not query.strip():
        raise ClawdError("the query is empty")
    ctx.memory.catch_up(2.0)  # a note just written is found
    return json.loads(json.dumps(visible_search(ctx.memory, ctx.access, query, max_results)))
