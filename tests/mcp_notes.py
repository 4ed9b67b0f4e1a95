"""A small MCP server that changes things, built with the SDK: ``python tests/mcp_notes.py
FILE`` speaks stdio over a notes file.

- ``read_notes()`` says ``readOnlyHint: true``: it runs without asking (``approval:
  writes``);
- ``add_note(text)`` says nothing of itself, and appends a line to the file;
- ``clear_notes()`` says ``destructiveHint: true`` and empties it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def build(path: Path) -> MCPServer:
    server = MCPServer("notes")

    @server.tool(description="The notes, one a line.",
                 annotations=ToolAnnotations(read_only_hint=True))
    def read_notes() -> str:
        return path.read_text(encoding="utf-8") if path.exists() else "(no notes)"

    @server.tool(description="Add one note.")
    def add_note(text: str) -> str:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return f"added: {text}"

    @server.tool(description="Remove every note.",
                 annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def clear_notes() -> str:
        path.write_text("", encoding="utf-8")
        return "cleared"

    return server


if __name__ == "__main__":
    build(Path(sys.argv[1])).run()
