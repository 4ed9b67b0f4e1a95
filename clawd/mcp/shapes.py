"""How an MCP server's tools and results become clawd's: pure functions, no SDK.

- ``tool_name``: ``<server>__<tool>``, within the 64 characters of ``[A-Za-z0-9_-]`` both
  wire formats accept (a longer or odder name is cut and keeps a hash of the original).
- ``wire_schema``: an input schema both wire formats accept: an object at the top (OpenAI
  refuses ``anyOf``/``oneOf``/``allOf``/``enum``/``not`` there; their branches' properties
  are merged), local ``$ref``s written out (a recursive one becomes ``{}``), ``$schema``
  and the definitions dropped, ``required`` naming only properties that exist.
- ``unique_names``: the names of every server's tools, each once: a tool a server lists
  twice is kept once, and a name two servers' tools would share (``x`` with ``_read`` and
  ``x_`` with ``read`` both make ``x___read``) stays the first's, the later one taking a
  hash of its server and tool; each is reported.
- ``description``: a tool's description as the model is told of it: the server's words,
  untrusted, so capped (``DESCRIPTION_CHARS``, its first line, which the system prompt
  lists, at ``SUMMARY_CHARS``) and without control characters.
- ``over_cap``: the MCP tools a model is not told of: past its profile's count, or past
  its window's share (``MCP_SHARE``), in the order of the servers and their lists.
- ``read_result``: a ``tools/call`` result as text and images (text, resources, links and
  structured content as text, the latter only when there is nothing else, so an image is
  never sent again as base64; images as images; audio and blobs named, not sent).
- ``framed``: a result's first line says where it comes from (``SOURCE``), plainly. That
  such content is information and never instructions the system prompt says once
  (``prompts/system.md.j2``): said in each result, a small model answered "I cannot
  reproduce the content from the MCP server" (docs/mcp.md, "With a small local model").
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from clawd.core.messages import ImagePart, ToolSpec
from clawd.core.textcut import shorten
from clawd.core.tokens import estimate_tools
from clawd.tools.base import ToolOutput as Output

SEPARATOR = "__"
MCP_SHARE = 8  # MCP tools' schemas take at most 1/8 of the window
MAX_NAME = 64
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")
_TOP_COMBINERS = ("anyOf", "oneOf", "allOf")
_TOP_REFUSED = (*_TOP_COMBINERS, "enum", "not", "const", "if", "then", "else")
_REF_DEPTH = 8
DESCRIPTION_CHARS = 1024
SUMMARY_CHARS = 200
SOURCE = "[from the MCP server {server}, outside clawd]"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def tool_name(server: str, tool: str) -> str:
    """The name the model calls ``server``'s ``tool`` by."""
    name = f"{server}{SEPARATOR}{_NOT_NAME.sub('_', tool)}"
    if len(name) <= MAX_NAME and name == f"{server}{SEPARATOR}{tool}":
        return name
    digest = hashlib.sha1(tool.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def unique_names(listed: list[tuple[str, str]]) -> tuple[list[str | None], list[str]]:
    """The model's name for each ``(server, tool)`` of ``listed`` (in the order of the
    servers and their lists), ``None`` for a repeat the server already listed; and one line
    for each repeat and each renamed tool."""
    names: list[str | None] = []
    taken: dict[str, tuple[str, str]] = {}
    notes: list[str] = []
    for server, tool in listed:
        name = tool_name(server, tool)
        owner = taken.get(name)
        if owner == (server, tool):
            names.append(None)
            notes.append(f"mcp: {server} lists its tool {tool} more than once; the first "
                         f"is kept")
            continue
        if owner is not None:
            digest = hashlib.sha1(f"{server}/{tool}".encode()).hexdigest()[:8]
            renamed = f"{name[:MAX_NAME - 9]}_{digest}"
            notes.append(f"mcp: {server}'s tool {tool} is called {renamed}: {name} is "
                         f"already {owner[0]}'s tool {owner[1]}")
            name = renamed
        taken[name] = (server, tool)
        names.append(name)
    return names, notes


def description(text: str) -> str:
    """A tool's description, capped and cleaned (see the module docstring)."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n")).strip()
    first, newline, rest = text.partition("\n")
    first = shorten(" ".join(first.split()), SUMMARY_CHARS)
    return shorten(first + newline + rest, DESCRIPTION_CHARS)


def framed(output: Output, server: str) -> Output:
    """``output`` with its first line saying which server it came from."""
    return Output(SOURCE.format(server=server) + "\n" + output.text, output.images,
                  output.is_error)


def wire_schema(schema: Any) -> dict[str, Any]:
    """``schema`` as parameters both wire formats accept (see the module docstring)."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    out = _inline(schema, defs, 0)
    properties = dict(out.get("properties") or {})
    required = list(out.get("required") or [])
    for combiner in _TOP_COMBINERS:
        for branch in out.get(combiner) or []:
            if isinstance(branch, dict):
                properties.update({k: v for k, v in (branch.get("properties") or {}).items()
                                   if k not in properties})
                if combiner == "allOf":
                    required += branch.get("required") or []
    for key in (*_TOP_REFUSED, "$schema", "$id", "$defs", "definitions", "type",
                "properties", "required"):
        out.pop(key, None)
    result: dict[str, Any] = {"type": "object", "properties": properties, **out}
    kept = [name for name in dict.fromkeys(required) if name in properties]
    if kept:
        result["required"] = kept
    return result


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    """``node`` with local ``$ref``s replaced by what they name."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = ref.rsplit("/", 1)[-1]
        if depth >= _REF_DEPTH or target not in defs or not ref.startswith("#/"):
            return {k: v for k, v in node.items() if k != "$ref"} or {}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[target], defs, depth + 1), **_inline(rest, defs, depth)}
    return {key: _inline(value, defs, depth) for key, value in node.items()
            if key not in ("$defs", "definitions") or depth > 0}


def read_result(result: Any) -> Output:
    """A ``CallToolResult`` (the SDK's object) as an ``Output``."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            images.append(ImagePart(block.data, block.mime_type))
        elif kind == "resource":
            inner = block.resource
            text = getattr(inner, "text", None)
            texts.append(f"[resource {inner.uri}]\n{text}" if text is not None else
                         f"[resource {inner.uri}: {inner.mime_type or 'binary'}, not shown]")
        elif kind == "resource_link":
            texts.append(f"[link {block.name}: {block.uri}]")
        else:
            texts.append(f"[{kind or 'unknown'} content, not shown]")
    structured = getattr(result, "structured_content", None)
    if not texts and not images and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    is_error = bool(getattr(result, "is_error", False))
    text = "\n".join(texts) or ("(the tool failed and said nothing)" if is_error else
                                f"({len(images)} image{'s' if len(images) > 1 else ''})"
                                if images else "(no output)")
    return Output(text, images, is_error)


def over_cap(specs: list[ToolSpec], count: int | None, window: int) -> frozenset[str]:
    """The names of the MCP tools in ``specs`` beyond the first ``count`` (None: no count)
    or beyond ``window // MCP_SHARE`` tokens of schemas."""
    room, kept, over = window // MCP_SHARE, 0, set()
    for spec in (s for s in specs if s.origin):
        cost = estimate_tools([spec])
        if (count is not None and kept >= count) or cost > room:
            over.add(spec.name)
            continue
        kept, room = kept + 1, room - cost
    return frozenset(over)
