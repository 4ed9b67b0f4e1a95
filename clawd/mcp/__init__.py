"""MCP servers' tools for the model: their connections (``client``), and how their names,
schemas and results become clawd's (``shapes``). The ``mcp`` SDK is imported only when a
server is configured, so a start-up without one pays nothing for it."""
