"""A server's resources as one read tool, ``<server>__read_resource {uri}``: pure functions
and the SDK calls, nothing else.

A server that offers resources (its capabilities say so) has them listed at its start
(``list_resources``, ``MAX_LISTED`` at most); they become one more ``Listed`` tool
(``reader``), read-only, whose description names them (``uri`` and name, cut as any
description is), so the model reads one by its URI. A read's text contents are text, an
image an image, other binary contents named, not sent (``read_contents``).
"""

from __future__ import annotations

from typing import Any

from clawd.core.messages import ImagePart
from clawd.mcp.listing import Listed
from clawd.mcp.shapes import Output

READER = "read_resource"
MAX_LISTED = 200
MAX_PAGES = 20


async def list_resources(client: Any) -> list[dict[str, str]]:
    """The server's resources (``uri``, ``name``, ``description``), or none when it offers
    none."""
    if getattr(client.server_capabilities, "resources", None) is None:
        return []
    found: list[dict[str, str]] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_resources(cursor=cursor)
        found += [{"uri": str(r.uri), "name": r.name or "", "description": r.description or ""}
                  for r in page.resources]
        cursor = page.next_cursor
        if cursor is None or len(found) >= MAX_LISTED:
            break
    return found[:MAX_LISTED]


def reader(server: str, resources: list[dict[str, str]]) -> Listed | None:
    """The read tool of ``server``'s ``resources`` (None when it has none)."""
    if not resources:
        return None
    named = "; ".join(f"{r['uri']}" + (f" ({r['name']})" if r["name"] and r["name"] not in
                                        r["uri"] else "") for r in resources)
    return Listed(READER, f"Read one of the resources of {server} by its uri. They are: "
                  f"{named}", None, {
                      "type": "object", "required": ["uri"], "properties": {
                          "uri": {"type": "string", "description": "the resource's uri"}}},
                  {"readOnlyHint": True}, kind="resources")


def read_contents(result: Any) -> Output:
    """A ``ReadResourceResult`` as an ``Output``."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for item in getattr(result, "contents", None) or []:
        text = getattr(item, "text", None)
        mime = getattr(item, "mime_type", None) or ""
        if text is not None:
            texts.append(text)
        elif mime.startswith("image/") and getattr(item, "blob", None):
            images.append(ImagePart(item.blob, mime))
        else:
            texts.append(f"[{item.uri}: {mime or 'binary'}, not shown]")
    return Output("\n".join(texts) or (f"({len(images)} image)" if images else "(empty)"),
                  images)
