"""The ASGI middleware every request passes before a route: the checks of ``policy``.

In order: the ``Host`` header (DNS rebinding: 403), ``/health`` and the web chat's files let
through (``GET`` only), the ``Origin`` of a state-changing request (403), a client address
locked out after failed authentications (429 with ``Retry-After``), the bearer token (401;
the agents it reaches are put in ``scope["state"]["agents"]``), and the body's size: past
``gateway.maxBodyBytes`` the request is answered 413 before any route reads it, so nothing
is written. Errors have
OpenAI's shape, ``{"error": {"message", "type", "code"}}``, on every route.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from clawd.config.gateway import Gateway
from clawd.frontends.gateway.policy import (
    FailedAuth,
    Tokens,
    host_allowed,
    needs_no_token,
    origin_allowed,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_body(status: int, message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


async def send_error(send: Send, status: int, message: str, kind: str,
                     headers: dict[str, str] | None = None) -> None:
    body = error_body(status, message, kind)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class BodyTooLarge(Exception):
    pass


class Guard:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, gateway: Gateway, tokens: Tokens, failed: FailedAuth):
        self.app, self.gateway, self.tokens, self.failed = app, gateway, tokens, failed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not host_allowed(host, self.gateway.allowed_hosts):
            await send_error(send, 403, f"this gateway does not serve the host {host!r}; add "
                             f"it to gateway.allowedHosts if it is yours", "host_not_allowed")
            return
        if needs_no_token(scope["path"]) and scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if not origin_allowed(method, headers.get("origin"), host, scope.get("scheme", "http"),
                              self.gateway.cors.origins):
            await send_error(send, 403, f"requests from the page at {headers.get('origin')} "
                             f"may not change anything here (gateway.cors.origins)",
                             "origin_not_allowed")
            return
        client = (scope.get("client") or ("?", 0))[0]
        if (wait := self.failed.retry_after(client)) is not None:
            await send_error(send, 429, f"too many failed authentications; try again in "
                             f"{wait} s", "rate_limited", {"Retry-After": str(wait)})
            return
        agents = self.tokens.agents(headers.get("authorization"))
        if agents is False:
            wait = self.failed.failed(client)
            if wait is not None:
                await send_error(send, 429, f"too many failed authentications; try again in "
                                 f"{wait} s", "rate_limited", {"Retry-After": str(wait)})
            else:
                await send_error(send, 401, "a valid bearer token is required (Authorization: "
                                 "Bearer TOKEN)", "unauthorized",
                                 {"WWW-Authenticate": "Bearer"})
            return
        self.failed.succeeded(client)
        scope.setdefault("state", {})["agents"] = agents
        limit = self.gateway.max_body_bytes
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await send_error(send, 413, f"the request body is {int(length):,} bytes; at most "
                             f"{limit:,} are accepted (gateway.maxBodyBytes); nothing was "
                             f"sent", "request_too_large")
            return
        await self._bounded(scope, receive, send, limit)

    async def _bounded(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """The app with a body of unannounced length cut at ``limit`` (413)."""
        seen, started = 0, False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if not started:
                await send_error(send, 413, f"the request body is over {limit:,} bytes "
                                 f"(gateway.maxBodyBytes); nothing was sent",
                                 "request_too_large")
