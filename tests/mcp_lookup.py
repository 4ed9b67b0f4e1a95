"""A small MCP server for the tests, built with the SDK: ``python tests/mcp_lookup.py``
speaks stdio (``--fail``: exits at once; ``--hang``: never answers; ``--slow-start``:
answers 1.5 s late); ``build().streamable_http_app()`` is the same tools over streamable HTTP.

- ``capital(country)`` and ``order_status(order_id)`` answer from tables; ``broken()``
  fails; ``slow(seconds)`` hangs; ``die()`` exits the process in the middle of the call;
  ``picture()`` returns an image; ``whoami()`` says what ``LOOKUP_KEY`` it was given.
  Each says ``readOnlyHint: true``: none asks before it runs (``approval``).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations

ORDERS = {"A-1042": "shipped on 2026-11-20 by DHL, tracking number 7731-0042, due "
                    "on 2026-11-28", "B-7": "cancelled on 2026-11-02 at the user's request"}
CAPITALS = {"portugal": "Lisbon", "norway": "Oslo", "kenya": "Nairobi"}
# a 1x1 PNG
PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
         "AAAABJRU5ErkJggg==")


READ_ONLY = ToolAnnotations(read_only_hint=True)


def build() -> MCPServer:
    server = MCPServer("lookup")

    @server.tool(annotations=READ_ONLY, description="The capital city of a country.")
    def capital(country: str) -> str:
        found = CAPITALS.get(country.strip().lower())
        return f"The capital of {country} is {found}." if found else f"{country}: not known"

    @server.tool(annotations=READ_ONLY, description="The shipping status of one of the "
                 "user's orders, by its id (e.g. A-1042).")
    def order_status(order_id: str) -> str:
        found = ORDERS.get(order_id.strip().upper())
        return f"Order {order_id}: {found}" if found else f"No order {order_id}."

    @server.tool(annotations=READ_ONLY, description="Always fails.")
    def broken() -> str:
        raise RuntimeError("the lookup table is locked")

    @server.tool(annotations=READ_ONLY, description="Waits, then answers.")
    def slow(seconds: float = 30) -> str:
        time.sleep(seconds)
        return "finally"

    @server.tool(annotations=READ_ONLY, description="Exits in the middle of the call.")
    def die() -> str:
        os._exit(3)

    @server.tool(annotations=READ_ONLY, description="A picture.")
    def picture() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="one pixel"),
                                       ImageContent(type="image", data=PIXEL,
                                                    mime_type="image/png")])

    @server.tool(annotations=READ_ONLY, description="What the server was given.")
    def whoami() -> str:
        return f"env={os.environ.get('LOOKUP_KEY', '-')}"

    return server


if __name__ == "__main__":
    if "--fail" in sys.argv:
        print("lookup: cannot open the table", file=sys.stderr)
        sys.exit(1)
    if "--hang" in sys.argv:
        time.sleep(60)
    if "--slow-start" in sys.argv:  # slower to answer initialize than a short request
        time.sleep(1.5)
    build().run()
