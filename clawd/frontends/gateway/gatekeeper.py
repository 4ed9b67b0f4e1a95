"""The ASGI middleware every request passes before a route: the checks of ``policy``.

In order: the ``Host`` header (DNS rebinding: 403); the client's address (the peer, or a
trusted proxy's ``X-Forwarded-For``); ``/health`` (503 while shutting down) and the web
chat's files let through (``GET`` only); the ``Origin`` of a state-changing request (403);
a client locked out after wrong tokens (429 with ``Retry-After``; only a presented token is
checked against the lockout, so a request refused for Host or Origin, or sent with no token,
counts for nothing; a right token clears nothing, so a person with a token of their own
cannot guess at another's between sign-ins); the bearer token (401; the agents it reaches
are put in ``scope["state"]["agents"]``, a person's name in ``["person"]``); and the
body's size: past ``gateway.maxBodyBytes`` the request is answered 413 before any route
reads it, so nothing is written. Errors have OpenAI's shape, ``{"error": {"message",
"type", "code"}}``, on every route; an exception no route handled is answered 500 in that
shape and logged in one line. Each request is logged in one line when it ends
(``clawd.access``, ``access_line``: when, pid, client, person, method, path, status, time;
never the query or a header); the path as ``loggable`` writes it, so no request can write a
line of its own (``%0A``) or a NUL into the log. Each is counted too (``core.metrics``: by
status class, and its time).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool

from clawd.config.gateway import Gateway
from clawd.core.errors import StoreUnavailable
from clawd.core.metrics import METRICS
from clawd.frontends.gateway.policy import (
    AcceptedTokens,
    bearer,
    client_address,
    forwarded_scheme,
    host_allowed,
    needs_no_token,
    networks,
    origin_allowed,
)
from clawd.frontends.hub.sign_ins import rate_key

log = logging.getLogger(__name__)
access = logging.getLogger("clawd.access")  # a line per request; ``clawd serve`` shows it

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def loggable(text: str) -> str:
    """``text`` (a path as the server decoded it) fit for one log line: what is not printable
    (line breaks, NUL, other controls, bidi overrides), a space and ``%`` percent-encoded as
    UTF-8, the rest as it is."""
    return "".join(ch if ch.isprintable() and ch not in " %"
                   else quote(ch, safe="", errors="surrogatepass") for ch in text)


def access_line(arrived: float, scope: Scope, status: int, took: float) -> str:
    """A request's line in the log: when it arrived (ISO 8601, local time with its
    offset), this worker's pid, the client's address, the person whose token it bore (``-``:
    none, or not a person's), the method, the path (``loggable``), the status (``-``: none
    was sent) and how long it took, in ms. Space-separated, none of the fields holds a
    space."""
    stamp = datetime.fromtimestamp(arrived).astimezone().isoformat(timespec="milliseconds")
    client = loggable(str((scope.get("client") or ("-", 0))[0]))
    person = (scope.get("state") or {}).get("person") or "-"
    return (f"{stamp} {os.getpid()} {client} {person} {loggable(scope['method'])} "
            f"{loggable(scope['path'])} {status or '-'} {took * 1000:.0f}ms")


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


class Gatekeeper:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, gateway: Gateway, tokens: AcceptedTokens,
                 failed: Any,  # counts the failed sign-ins: the hub's ``Coordination``
                 stopping: Callable[[], bool] = lambda: False):
        self.app, self.gateway, self.tokens, self.failed = app, gateway, tokens, failed
        self.trusted = networks(gateway.trusted_proxies)
        self.stopping = stopping

    async def _failed(self, what: str, key: str) -> Any:
        """The coordination's ``what`` (``retry_after``, ``failed``) for ``key``: off the
        event loop when the counts are shared through a database."""
        return await getattr(self.failed, what)(key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.monotonic(), 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        arrived = time.time()
        try:
            await self._guard(scope, receive, watched)
        except StoreUnavailable as exc:  # the token or lockout check could not be made
            if not status:
                await _unavailable(watched, exc)
        finally:  # one line a request, when it ends (a stream: when the turn has); no query
            took = time.monotonic() - started
            METRICS.request(status, took)
            if access.isEnabledFor(logging.INFO):
                access.info("%s", access_line(arrived, scope, status, took))

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if not host_allowed(host, self.gateway.allowed_hosts):
            await send_error(send, 403, f"this gateway does not serve the host {host!r}; add "
                             f"it to gateway.allowedHosts if it is yours", "host_not_allowed")
            return
        peer = (scope.get("client") or ("?", 0))[0]
        client = client_address(peer, headers.get("x-forwarded-for"), self.trusted)
        scheme = forwarded_scheme(peer, headers.get("x-forwarded-proto"),
                                  scope.get("scheme", "http"), self.trusted)
        scope["client"], scope["scheme"] = (client, 0), scheme
        method = scope["method"]
        if scope["path"] == "/health" and self.stopping():
            await send_error(send, 503, "the gateway is shutting down", "stopping")
            return
        if needs_no_token(scope["path"]) and method in ("GET", "HEAD"):
            await self._app(scope, receive, send)
            return
        if not origin_allowed(method, headers.get("origin"), host, scheme,
                              self.gateway.cors.origins):
            await send_error(send, 403, f"requests from the page at {headers.get('origin')} "
                             f"may not change anything here (gateway.cors.origins)",
                             "origin_not_allowed")
            return
        header = headers.get("authorization")
        presented = bearer(header) is not None
        key = rate_key(client)
        if presented and (wait := await self._failed("retry_after", key)) is not None:
            await _locked_out(send, wait)
            return
        agents, person = (await run_in_threadpool(self.tokens.who, header)
                          if self.tokens.people is not None else self.tokens.who(header))
        if agents is False:
            # only a token presented and wrong is a guess; a request with none is not
            wait = await self._failed("failed", key) if presented else None
            if wait is not None:
                await _locked_out(send, wait)
            else:
                await send_error(send, 401, "a valid bearer token is required (Authorization: "
                                 "Bearer TOKEN)", "unauthorized",
                                 {"WWW-Authenticate": "Bearer"})
            return
        scope.setdefault("state", {}).update(agents=agents, person=person)
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
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        await self._app(scope, counted, send, limit)

    async def _app(self, scope: Scope, receive: Receive, send: Send, limit: int = 0) -> None:
        """The app, with what escapes it answered in the error shape (one log line, never a
        traceback on the console) when nothing was sent yet."""
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except BodyTooLarge:
            if not started:
                await send_error(send, 413, f"the request body is over {limit:,} bytes "
                                 f"(gateway.maxBodyBytes); nothing was sent",
                                 "request_too_large")
        except StoreUnavailable as exc:
            log.warning("%s %s: %s", scope["method"], loggable(scope["path"]), exc)
            if not started:
                await _unavailable(send, exc)
        except Exception as exc:  # noqa: BLE001 - a bug answers 500, the server goes on
            log.warning("%s %s failed: %s: %s", scope["method"], loggable(scope["path"]),
                        type(exc).__name__, " ".join(str(exc).split()))
            log.debug("the traceback", exc_info=True)
            METRICS.error("request")
            if not started:
                await send_error(send, 500, f"the gateway failed on this request "
                                 f"({type(exc).__name__}); nothing more was done",
                                 "server_error")


async def _locked_out(send: Send, wait: int) -> None:
    await send_error(send, 429, f"too many wrong tokens from this address; try again in "
                     f"{wait} s", "rate_limited", {"Retry-After": str(wait)})


async def _unavailable(send: Send, exc: StoreUnavailable) -> None:
    await send_error(send, 503, str(exc), "unavailable", {"Retry-After": str(exc.retry_after)})
