"""``clawd mcp login NAME``: get OAuth tokens for a remote server that asks for them.

The server is started as a chat would start it, with the SDK's OAuth client able to ask a
person (``clawd.mcp.oauth``): the authorization page's address is printed and opened in a
browser where there is one (``open_url``), a one-time listener on ``127.0.0.1`` takes the
code the page sends back, and the tokens are kept for the chats to come. A server that
needs no login says so.
"""

from __future__ import annotations

import asyncio
import webbrowser
from collections.abc import Callable
from typing import Any


def login(config: Any, name: str, open_url: Callable[[str], Any] = webbrowser.open) -> int:
    from clawd.core.errors import ConfigError
    from clawd.core.paths import state_dir
    from clawd.mcp.client import McpClients
    from clawd.mcp.oauth import Callback, FileTokens, free_port

    server = config.mcp.servers.get(name)
    if server is None or server.url is None:
        raise ConfigError(f"no remote MCP server {name!r} (clawd mcp login is for a url "
                          f"server that asks for OAuth)")
    folder = state_dir() / "mcp-auth"
    storage = FileTokens(folder / f"{name}.json", server.url)
    port = storage.port or free_port()
    storage.keep_port(port)
    clients = McpClients({name: server}, logs=state_dir() / "logs", auth=folder)
    connection = clients.connections[name]

    async def show(url: str) -> None:
        print(f"to log in to {name}, open this address (a browser is opened where there is "
              f"one):\n{url}", flush=True)
        await asyncio.to_thread(open_url, url)

    async def flow() -> None:
        async with Callback(port) as callback:
            connection.login = {"login": show, "callback": callback.code, "port": port}
            await connection.start()

    try:
        clients._run(flow())  # noqa: SLF001 - the process's MCP loop, for this one start
        ready, error, tools = connection.state == "ready", connection.error, connection.tools
    finally:
        clients.close()
    if not ready:
        print(f"{name}: the login did not finish: {error}")
        return 1
    print(f"{name}: logged in ({len(tools)} tools); the tokens are kept in "
          f"{folder / (name + '.json')}")
    return 0
