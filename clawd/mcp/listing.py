"""A server's tool list, tool by tool: one tool the SDK cannot read costs that tool only.

The SDK reads a ``tools/list`` answer as a whole: one tool whose schema lacks its top-level
``"type"`` fails the page, and with it every tool of the server. When a page fails so, it is
asked for again as plain JSON and each tool is read alone; the ones that cannot be read are
left out, one line each. The allow-list (``tools``) is applied, and a name in it that the
server does not list is one line too (a typo would otherwise be a server "ready" with 0
tools).

What is kept of each tool is a ``Listed``; the last listing of each server is kept on disk
(``cached``, ``keep``: ``<state>/cache/mcp-tools.json``, under a key of the server's
settings), so a later process can offer its tools before starting it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MAX_PAGES = 100


@dataclass(frozen=True)
class Listed:
    """What clawd keeps of one listed tool (the SDK's ``Tool`` read once, or the cache)."""

    name: str
    description: str | None
    title: str | None
    input_schema: Any
    annotations: dict[str, Any] | None  # camelCase keys, as on the wire
    kind: str = "tool"  # or "resources": the server's resources as one read tool (resources)

    @classmethod
    def of(cls, tool: Any) -> Listed:
        notes = tool.annotations
        return cls(tool.name, tool.description, tool.title, tool.input_schema,
                   notes.model_dump(by_alias=True, exclude_none=True) if notes else None)


def cached(path: Path | None, name: str, key: str
           ) -> tuple[list[Listed], str | None] | None:
    """The listing of server ``name`` kept in ``path`` for its settings ``key``, and its
    instructions; or None."""
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8")).get(name) or {}
        if entry.get("key") != key:
            return None
        said = entry.get("instructions")
        return [Listed(**tool) for tool in entry["tools"]], said if isinstance(
            said, str) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def keep(path: Path | None, name: str, key: str, tools: list[Listed],
         instructions: str | None = None) -> None:
    """Keep the listing of server ``name`` (and its instructions) in ``path`` (the others'
    entries kept)."""
    if path is None:
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        data = data if isinstance(data, dict) else {}
        data[name] = {"key": key, "tools": [asdict(t) for t in tools],
                      "instructions": instructions}
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = path.with_name(f".{path.name}.new")
        fresh.write_text(json.dumps(data), encoding="utf-8")
        fresh.replace(path)
    except (OSError, ValueError):
        pass


async def list_tools(client: Any, allowed: list[str] | None, server: str,
                     timeout: float) -> tuple[list[Any], list[str], list[str]]:
    """The SDK's ``Tool``s of ``client``'s server (``allowed`` applied), a line per tool
    left out, and the allowed names it does not have."""
    from pydantic import ValidationError

    tools: list[Any] = []
    notes: list[str] = []
    cursor = None
    for _ in range(MAX_PAGES):
        try:
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            cursor = page.next_cursor
        except ValidationError:
            found, cursor, bad = await _raw_page(client, cursor, timeout)
            tools += found
            notes += [f"mcp: {server}'s tool {name} is left out: the SDK cannot read its "
                      f"listing ({why})" for name, why in bad]
        if cursor is None:
            break
    missing: list[str] = []
    if allowed is not None:
        names = {t.name for t in tools}
        missing = [name for name in allowed if name not in names]
        if missing:
            notes.append(f"mcp: {server} has no tool " + ", ".join(missing) + " (its tools: "
                         + (", ".join(sorted(names)) or "none") + "); fix mcp.servers."
                         f"{server}.tools")
        tools = [t for t in tools if t.name in allowed]
    return tools, notes, missing


async def _raw_page(client: Any, cursor: str | None, timeout: float
                    ) -> tuple[list[Any], str | None, list[tuple[str, str]]]:
    """One page of ``tools/list`` read tool by tool: the tools, the next cursor, and
    ``(name, why)`` of each tool that could not be read."""
    from mcp_types import ListToolsResult
    from mcp_types import methods as checks
    from pydantic import ValidationError

    session = client.session
    version = session._negotiated_version or "2025-11-25"  # noqa: SLF001
    params = {"cursor": cursor} if cursor is not None else None
    # the session's own sender, below its whole-answer check (no public way past it)
    raw = await session._dispatcher.send_raw_request(  # noqa: SLF001
        "tools/list", params, {"timeout": timeout})
    found, bad = [], []
    for item in raw.get("tools") or []:
        try:
            checks.validate_server_result("tools/list", version, {"tools": [item]})
            found.append(ListToolsResult.model_validate({"tools": [item]},
                                                        by_name=False).tools[0])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())[2:]) or "its entry"
            name = item.get("name") if isinstance(item, dict) else None
            bad.append((str(name or "?"), f"{where}: {first.get('msg', 'invalid')}"))
    next_cursor = raw.get("nextCursor")
    page = ListToolsResult(tools=found, next_cursor=next_cursor if isinstance(
        next_cursor, str) else None)
    # what the SDK keeps of a listing (each tool's output schema) for the calls to come
    session._absorb_tool_listing(page, complete=False)  # noqa: SLF001
    return found, page.next_cursor, bad
