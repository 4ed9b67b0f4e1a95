"""The memory tools the model gets: ``memory_search`` and ``memory_get``.

``memory_search {query, maxResults?, minScore?}`` runs the agent's hybrid memory search and
returns its JSON answer (snippets with path and line range, never whole files:
docs/memory.md). The query must not be empty, ``maxResults`` is 1..50 (more is capped at
50) and ``minScore`` 0..1.
``memory_get {path, from?, lines?}`` reads lines of a memory file, and only of one:
``MEMORY.md``, ``memory/**.md`` inside the workspace, read through the agent's files
(``WorkspaceFiles``: a folder or a database; ``..``, absolute paths and symlinks out are
refused), or a ``.md`` file under one of ``memorySearch.extraPaths``, read from the disk.
Extra paths are explicit user configuration and may lie outside the workspace; a path is
accepted there only when its real location is under one of them, so a symlink cannot widen
what the model can read. A file that is not UTF-8 text (NUL bytes, invalid UTF-8) is an
error result, as it is skipped by the index, never its bytes. A citation passed as the path
(``memory/2026-11-20.md#L12-L14``, as search results and recall name lines) reads those
lines. Note lines that consolidation replaced are struck through with their replacement
(``memory.superseded``; ``marked``), in ``memory_get`` as in search, for a session that may
read MEMORY.md; a group session's search results lose those marks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated

from clawd.context.access import Access
from clawd.core.errors import SandboxError, ToolError
from clawd.memory.interface import Memory, SearchResults, cited
from clawd.memory.sources import NotText, decode_text, extra_roots, is_under, stored_text
from clawd.memory.superseded import Superseded, unmark
from clawd.tools.base import Param, Tool, ToolContext, tool
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

DEFAULT_LINES = 200
MAX_RESULTS = 50
SHARED_WIDEN = 10  # a group session's search looks this much deeper, then keeps shareable hits

SEARCH_DESCRIPTION = (
    "Search your memory files (MEMORY.md, memory/*.md) by meaning and by exact words. "
    "Use it before answering about past work, decisions, dates, people, preferences or "
    "todos. Returns snippets with path and line range; read more with memory_get.")
GET_DESCRIPTION = (
    "Read lines of a memory file (MEMORY.md, memory/**/*.md, or a configured extra path), "
    "e.g. around lines a note or search result names. 'from' is the 1-based first line, "
    "'lines' how many.")


def _refuse(path: str) -> ToolError:
    return ToolError(f"memory_get reads only MEMORY.md, memory/**/*.md and "
                     f"memorySearch.extraPaths: {path}")


def memory_path(ctx: ToolContext, path: str) -> tuple[str, Callable[[], str | None]]:
    """The display key of the note ``path`` names and how to read its exact text (None:
    no such file), or an error saying why it may not be read. A note of the workspace is
    read through the agent's files (``ctx.files``: a folder or a database alike); one under
    an ``extraPaths`` folder outside it, from the disk."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("missing required argument 'path'")
    root = ctx.workspace.resolve()
    extras = extra_roots(root, ctx.settings.memory_search)
    try:
        key = ctx.files.canonical(path)
    except SandboxError:
        # Outside the workspace: only a place the user listed in extraPaths will do.
        candidate = Path(path).expanduser()
        real = (candidate if candidate.is_absolute() else root / candidate).resolve()
        if not any(is_under(extra, real) for extra in extras):
            raise _refuse(path) from None
        key, read = str(real), partial(_disk_text, real)
    else:
        in_memory = key == MEMORY_FILE or (key.startswith(f"{MEMORY_DIR}/")
                                           and key.lower().endswith(".md"))
        if not in_memory and not any(is_under(extra, (root / key).resolve())
                                     for extra in extras):
            raise _refuse(path)
        read = partial(_stored_text, ctx, key)
    if not key.lower().endswith(".md"):
        raise _refuse(path)
    if not ctx.access.may_read(key):
        raise ToolError(f"{path} is private memory: group and channel sessions read only "
                        f"memorySearch.shareablePaths")
    return key, read


def _stored_text(ctx: ToolContext, key: str) -> str | None:
    found = ctx.files.stat(key)
    return ctx.files.read(key, exact=True) if found and found.kind == "file" else None


def _disk_text(real: Path) -> str | None:
    return decode_text(real.read_bytes()) if real.is_file() else None


@tool("memory_get", GET_DESCRIPTION)
def memory_get(ctx: ToolContext, *,
               path: Annotated[str, Param("e.g. MEMORY.md or memory/2025-01-31.md")],
               start: Annotated[int, Param("first line (1-based)", name="from", minimum=1)] = 1,
               count: Annotated[int, Param(f"how many lines (default {DEFAULT_LINES})",
                                           name="lines", minimum=1)] = DEFAULT_LINES) -> str:
    if start < 1:
        raise ToolError("argument 'from' must be 1 or more")
    if count < 1:
        raise ToolError("argument 'lines' must be 1 or more")
    path, start, count = citation_path(path, start, count, DEFAULT_LINES)
    key, read = memory_path(ctx, path)
    try:
        text = stored_text(read)
    except OSError as exc:
        raise ToolError(f"cannot read {key}: {exc.strerror}") from None
    except NotText as exc:
        raise ToolError(f"{key} is {exc}; it is not a memory note and is not "
                        f"indexed") from None
    if text is None:
        raise ToolError(f"no such memory file: {path}")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # past the end: said in words, as ``read`` does (an error here left a 1.5B model with
    # nothing to say)
    if start > len(lines) and lines:
        return f"[{key} has {len(lines)} lines; there is nothing after line {len(lines)}]"
    chosen = lines[start - 1:start - 1 + count]
    text = marked(ctx, key, start, "\n".join(chosen))
    limit = ctx.settings.tools.max_output_chars
    if len(text) > limit:
        text = text[:limit]
        shown = text.count("\n") + 1
        return (f"{text}\n[... {key}: output capped at {limit} characters; continue with "
                f"from={start + shown - 1}]")
    end = start + len(chosen) - 1
    if end < len(lines):
        text += f"\n[... {key}: lines {start}-{end} of {len(lines)}; continue with from={end + 1}]"
    return text


@tool("memory_search", SEARCH_DESCRIPTION)
def memory_search(ctx: ToolContext, *, query: Annotated[str, Param("what to look for")],
                  max_results: Annotated[int | None, Param(
                      "default 6", name="maxResults", minimum=1, maximum=MAX_RESULTS,
                      clamp=True)] = None,
                  min_score: Annotated[float | None, Param(
                      "default 0.35", name="minScore", minimum=0, maximum=1)] = None) -> str:
    if not query.strip():
        raise ToolError("argument 'query' must not be empty")
    if ctx.memory is None:
        raise ToolError("memory search is not available for this agent "
                        "(memorySearch.enabled is false)")
    return json.dumps(visible_search(ctx.memory, ctx.access, query, max_results, min_score),
                      ensure_ascii=False)


def citation_path(path: str, start: int, count: int, default: int) -> tuple[str, int, int]:
    """``(path, first line, how many)`` for a tool's arguments: a citation passed as the path
    names its file, and its lines unless others were asked for."""
    found = cited(path) if isinstance(path, str) else None
    if not found:
        return path, start, count
    if (start, count) == (1, default):
        return found[0], found[1], found[2] - found[1] + 1
    return found[0], start, count


def marked(ctx: ToolContext, key: str, start: int, text: str) -> str:
    """``text``, lines of the note ``key`` from line ``start``, with the lines consolidation
    replaced struck through and their replacement beside them; unchanged for a session that
    may not read MEMORY.md (the replacements come from it)."""
    if not key.startswith(f"{MEMORY_DIR}/") or not ctx.access.may_read(MEMORY_FILE):
        return text
    return Superseded(ctx.files).marker()(key, start, text)


def visible_search(memory: Memory, access: Access, query: str, max_results: int | None = None,
                   min_score: float | None = None) -> SearchResults:
    """``memory.search`` as a session with ``access`` may see it: a group session gets
    shareable notes only (searched wider, kept, cut to size), without the replacements
    MEMORY.md gave replaced lines."""
    if not access.group:
        return memory.search(query, max_results=max_results, min_score=min_score)
    limit = max_results or memory.settings.query.max_results
    result = memory.search(query, max_results=max(limit * SHARED_WIDEN, MAX_RESULTS),
                           min_score=min_score)
    result["results"] = [r for r in result["results"]
                         if r.get("source") == "memory" and access.may_read(r["path"])
                         ][:limit]
    for hit in result["results"]:
        hit["snippet"] = unmark(hit["snippet"])
    return result


def memory_tools() -> list[Tool]:
    """The memory tools, for agents with ``memorySearch.enabled``."""
    return [memory_search, memory_get]
