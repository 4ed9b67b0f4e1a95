"""What every route shares: the gateway's state, errors as responses, picking the session.

``GatewayState`` is the one object the routes reach (``request.app.state.gateway``): the
config, the served ``ServedAgents``, the ``Hub``. ``session_of`` turns a key as a client gives it
(a short name such as ``work`` or a full ``agent:<id>:<name>``) and an optional agent into
the agent's id and the full key, refusing an agent the bearer token does not reach.
``failure`` maps the one-line ``ClawdError``s to HTTP statuses, in their HTTP words
(``http_message``); it is the app's exception handler, so a route simply raises;
``no_route`` answers a path or method no route takes in the same shape. ``header_key``
and ``key_from_header`` carry a session key in a header (percent-encoded UTF-8);
``idempotency_of`` checks an idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from clawd.config import Config
from clawd.core.errors import (
    ClawdError,
    ConfigError,
    SandboxError,
    StoreUnavailable,
    http_message,
)
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.bodies import B, BadRequest, parse
from clawd.frontends.gateway.gatekeeper import error_body
from clawd.frontends.gateway.quotas import TooLarge
from clawd.frontends.gateway.workspace import NotFound, Refused
from clawd.frontends.hub.agents import UnknownAgent
from clawd.frontends.hub.hub import Hub
from clawd.frontends.hub.quotas import OverQuota, TooManySessions
from clawd.frontends.hub.turns import IdempotencyConflict, QueueFull, Stopping
from clawd.sessions.lock import SessionBusyError
from clawd.sessions.store import key_problem

T = TypeVar("T")


class Busy(ClawdError):
    """Too much work of one kind at once (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Bounded:
    """Blocking work of one kind on a pool of its own: ``threads`` at once, ``waiting`` more
    queued, and past that ``Busy`` at once, so a flood of it never takes the threads other
    routes need (those share Starlette's pool)."""

    def __init__(self, what: str, threads: int, waiting: int):
        self.what, self.limit = what, threads + waiting
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix=f"clawd-{what}")
        self.pending = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.pending >= self.limit:
            raise Busy(f"{self.pending} {self.what} requests are already under way; try "
                       f"again shortly", retry_after=2)
        self.pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        finally:
            self.pending -= 1

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class GatewayState:
    config: Config
    agents: ServedAgents
    hub: Hub
    aside: Bounded = field(default_factory=lambda: Bounded("bookkeeping", 4, 8))
    # ``channels.service.TelegramService`` while it runs (its ``deliver``: the outbox's way
    # to a ``telegram:<chatId>``), else None
    channels: Any = None
    background: Any = None  # ``automation.Background`` while it runs (automation.enabled)


class Forbidden(ClawdError):
    """The token does not reach this agent."""


def state(request: Request) -> GatewayState:
    found: GatewayState = request.app.state.gateway
    return found


def allowed(request: Request, agent_id: str) -> bool:
    """Whether the request's token reaches ``agent_id``."""
    scoped = request.scope.get("state", {}).get("agents")
    return scoped is None or agent_id.lower() in scoped


def agent_of(request: Request, name: str | None) -> str:
    """The served agent ``name`` names (None: the default, or for a token that does not
    reach it, the first agent the token does: a person's own), if the token reaches it."""
    agents = state(request).agents
    agent_id = agents.find(name)
    if name is None and not allowed(request, agent_id):
        agent_id = next(iter(agents.reaches(request.scope.get("state", {}).get("agents"))),
                        agent_id)
    if not allowed(request, agent_id):
        raise Forbidden(f"this token does not reach the agent {agent_id!r}")
    return agent_id


def session_of(request: Request, key: str | None, agent: str | None = None
               ) -> tuple[str, str]:
    """(agent id, full session key) for a client's key (default ``main``) and agent; a key
    that can never work (``key_problem``) is a ``BadRequest`` before anything runs."""
    from clawd.frontends.compose import chat_agent, session_key

    if key is not None and (problem := key_problem(key)):
        raise BadRequest(problem)
    config = state(request).config
    try:
        named = chat_agent(config, agent, key)
    except ConfigError:  # another agent's key: 403 if the token does not reach that agent
        agent_of(request, chat_agent(config, None, key))
        raise
    agent_id = agent_of(request, named)
    return agent_id, session_key(agent_id, key)


KEY_SAFE = ":@!$&'()*+,;=-._~"  # kept as they are in a header; the rest percent-encoded


def header_key(key: str) -> str:
    """A session key as a header value: UTF-8, percent-encoded (``%`` itself is ``%25``),
    so any key fits the ASCII a header holds; ``unquote`` (``decodeURIComponent``) gives
    it back."""
    return quote(key, safe=KEY_SAFE)


def key_from_header(value: str) -> str:
    """A session key a client sent in a header: percent-encoded UTF-8 (``header_key``); raw
    UTF-8 bytes, which arrive read as Latin-1, are taken too."""
    with contextlib.suppress(UnicodeEncodeError, UnicodeDecodeError):
        value = value.encode("latin-1").decode("utf-8")
    try:
        key = unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("the session key header is not percent-encoded UTF-8") from None
    if problem := key_problem(key):
        raise BadRequest(problem)
    return key


def idempotency_of(value: str | None) -> str | None:
    """An idempotency key a client sent (header or body), or None; one holding a control
    character (a NUL no database text holds) is a ``BadRequest``."""
    if value is not None and not value.isprintable():
        raise BadRequest("the idempotency key holds a control character, which no key may hold")
    return value or None


def failure(exc: Exception) -> Response:
    """A ``ClawdError`` as the response its kind calls for (the app's exception handler:
    a route raises, this answers)."""
    status, kind, headers = 400, "invalid_request_error", {}
    if isinstance(exc, (Forbidden, Refused, SandboxError)):
        status, kind = 403, "forbidden"
    elif isinstance(exc, (UnknownAgent, NotFound)):
        status, kind = 404, "not_found"
    elif isinstance(exc, QueueFull):
        status, kind = 429, "session_queue_full"
        headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, OverQuota):
        status, kind = 429, "quota_exceeded"
        headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, TooLarge):
        status, kind = 413, "too_large"
    elif isinstance(exc, TooManySessions):
        status, kind = 409, "session_limit"
    elif isinstance(exc, Busy):
        status, kind = 429, "busy"
        headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, (IdempotencyConflict, SessionBusyError)):
        status, kind = 409, "conflict"
    elif isinstance(exc, Stopping):
        status, kind = 503, "stopping"
    elif isinstance(exc, StoreUnavailable):
        status, kind = 503, "unavailable"
        headers["Retry-After"] = str(exc.retry_after)
    elif not isinstance(exc, (BadRequest, ConfigError)):
        status, kind = 500 if not isinstance(exc, ClawdError) else 400, "error"
    return Response(error_body(status, http_message(exc), kind), status, headers,
                    media_type="application/json")


async def read_body(request: Request, model: type[B]) -> B:
    """The request's body as ``model`` (``bodies``), or a one-line ``BadRequest``."""
    return parse(model, await request.body())


async def on_error(request: Request, exc: Exception) -> Response:
    """The app's handler for ``ClawdError`` (and ``MappingError``): ``failure``."""
    return failure(BadRequest(str(exc)) if isinstance(exc, ValueError) else exc)


async def no_route(request: Request, exc: Exception) -> Response:
    """The app's handler for Starlette's ``HTTPException`` (no route: 404; a route without
    the method: 405, with ``Allow``): the error shape, not plain text."""
    assert isinstance(exc, HTTPException)
    method, path = request.method, request.scope["path"]
    if exc.status_code == 404:
        kind, message = "not_found", f"no route {method} {path}"
    elif exc.status_code == 405:
        allow = (exc.headers or {}).get("Allow", "")
        kind, message = "method_not_allowed", f"{path} takes {allow}, not {method}"
    else:
        kind, message = "error", str(exc.detail)
    return Response(error_body(exc.status_code, message, kind), exc.status_code, exc.headers,
                    media_type="application/json")


def ok(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status, headers)
