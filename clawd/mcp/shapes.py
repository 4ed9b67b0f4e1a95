"""How an MCP server's tools and results become clawd's: pure functions, no SDK.

- ``tool_name``: ``<server>__<tool>``, within the 64 characters of ``[A-Za-z0-9_-]`` both
  wire formats accept (a longer or odder name is cut and keeps a hash of the original).
- ``wire_schema``: an input schema both wire formats accept: an object at the top (OpenAI
  refuses ``anyOf``/``oneOf``/``allOf``/``enum``/``not`` there; their branches' properties
  are merged), local ``$ref``s written out (a recursive one becomes ``{}``), ``$schema``
  and the definitions dropped, ``required`` naming only properties that exist.
- ``over_cap``: the MCP tools a model is not told of: past its profile's count, or past
  its window's share (``MCP_SHARE``), in the order of the servers and their lists.
- ``read_result``: a ``tools/call`` result as text and images (text, resources, links and
  structured content as text; images as images; audio and blobs named, not sent). That it
  is content from outside, information and never instructions, the system prompt says once
  (``prompts/system.md.j2``): said in each result, a small model answered "I cannot
  reproduce the content from the MCP server" (docs/real-models.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from clawd.core.messages import ImagePart, ToolSpec
from clawd.core.tokens import estimate_tools
from clawd.tools.base import ToolOutput as Output

SEPARATOR = "__"
MCP_SHARE = 8  # MCP tools' schemas take at most 1/8 of the window
MAX_NAME = 64
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")
_TOP_COMBINERS = ("anyOf", "oneOf", "allOf")
_TOP_REFUSED = (*_TOP_COMBINERS, "enum", "not", "const", "if", "then", "else")
_REF_DEPTH = 8


def tool_name(server: str, tool: str) -> str:
    """The name the model calls ``server``'s ``tool`` by."""
    name = f"{server}{SEPARATOR}{_NOT_NAME.sub('_', tool)}"
    if len(name) <= MAX_NAME and name == f"{server}{SEPARATOR}{tool}":
        return name
    digest = hashlib.sha1(tool.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


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
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    is_error = bool(getattr(result, "is_error", False))
    text = "\n".join(texts) or ("(the tool failed and said nothing)" if is_error else
                                "(no output)")
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
