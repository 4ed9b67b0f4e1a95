"""OAuth for a remote server that asks for it, with the SDK's client (``OAuthClientProvider``).

A URL server without an ``Authorization`` header gets the SDK's OAuth client: it does
nothing until the server answers 401 with its authorization server's metadata, then uses
the tokens kept for that server (refreshing them when they expire). Getting them the first
time takes a person and a browser, so it is ``clawd mcp login NAME`` (``login``): the
authorization page's address is printed (and opened in a browser when there is one), and a
one-time listener on ``127.0.0.1`` takes the code the page sends back. Anywhere else a server
whose tokens are missing or refused does not start, and says to log in (``NeedsLogin``).

What is kept, per server and URL, in ``<state>/mcp-auth/<name>.json`` (0600): the tokens
and the client's registration, with the port of its redirect address (reused at the next
login, since the registration names it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

LOGIN_SECONDS = 300.0


class NeedsLogin(Exception):
    """A server asks for OAuth, and no person is here to log in."""


class FileTokens:
    """The SDK's ``TokenStorage`` over ``<dir>/<name>.json``: tokens and registration, for
    one URL (another URL starts afresh). A registration is kept at a login only (``port``:
    its redirect address's), and read back only for that address: one made where nobody can
    log in names no address anyone listens on."""

    def __init__(self, path: Path, url: str, port: int | None = None):
        self.path, self.url, self.login_port = path, url, port

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("url") == self.url else {}

    def _write(self, key: str, value: Any) -> None:
        data = self._read() or {"url": self.url}
        data[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = self.path.with_name(f".{self.path.name}.new")
        fresh.write_text(json.dumps(data), encoding="utf-8")
        os.chmod(fresh, 0o600)
        fresh.replace(self.path)

    @property
    def port(self) -> int | None:
        port = self._read().get("port")
        return port if isinstance(port, int) else None

    def keep_port(self, port: int) -> None:
        self._write("port", port)

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        found = self._read().get("tokens")
        return OAuthToken.model_validate(found) if found else None

    async def set_tokens(self, tokens: Any) -> None:
        self._write("tokens", tokens.model_dump(mode="json", exclude_none=True))

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        found = self._read().get("client")
        if not found:
            return None
        client = OAuthClientInformationFull.model_validate(found)
        if self.login_port is not None and redirect(self.login_port) not in [
                str(u) for u in client.redirect_uris or []]:
            return None  # registered for another address: register again
        return client

    async def set_client_info(self, client_info: Any) -> None:
        if self.login_port is not None:
            self._write("client", client_info.model_dump(mode="json", exclude_none=True))


def provider(name: str, url: str, folder: Path, *,
             login: Callable[[str], Awaitable[None]] | None = None,
             callback: Callable[[], Awaitable[Any]] | None = None,
             port: int | None = None) -> Any:
    """The SDK's OAuth client for server ``name`` at ``url``: with ``login`` and
    ``callback`` (``clawd mcp login``) it can get tokens; without, a server that wants new
    ones raises ``NeedsLogin``."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    storage = FileTokens(folder / f"{name}.json", url, port if login else None)
    port = port or storage.port or 0

    async def no_browser(_: str) -> None:
        raise NeedsLogin(f"{name} asks for an OAuth login: run clawd mcp login {name}")

    async def no_callback() -> Any:
        raise NeedsLogin(f"{name} asks for an OAuth login: run clawd mcp login {name}")

    metadata = OAuthClientMetadata(
        client_name="clawd", redirect_uris=[redirect(port or 1)],
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none")
    return OAuthClientProvider(url, metadata, storage, redirect_handler=login or no_browser,
                               callback_handler=callback or no_callback)


def redirect(port: int) -> str:
    """The redirect address of a login listening on ``port``."""
    return f"http://127.0.0.1:{port}/callback"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Callback:
    """The one-time listener on ``127.0.0.1:port`` that takes the code the authorization
    page sends the browser back with."""

    def __init__(self, port: int):
        self.port = port
        self._got: asyncio.Future[Any] | None = None
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Callback:
        self._got = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: Any) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode("latin-1").split()
        query = parse_qs(urlsplit(line[1]).query) if len(line) > 1 else {}
        said = ("clawd is logged in; you can close this page" if "code" in query else
                "no code came back: " + (query.get("error", ["?"])[0]))
        body = said.encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close"
                     b"\r\n\r\n" + body)
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()
        if self._got is not None and not self._got.done() and query:
            self._got.set_result(query)

    async def code(self) -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        assert self._got is not None
        query = await asyncio.wait_for(self._got, LOGIN_SECONDS)
        if "code" not in query:
            raise NeedsLogin(f"the login did not finish: {query.get('error', ['?'])[0]}")
        return AuthorizationCodeResult(code=query["code"][0],
                                       state=(query.get("state") or [None])[0],
                                       iss=(query.get("iss") or [None])[0])
