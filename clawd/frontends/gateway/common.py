"""What every route shares: the gateway's state, errors as responses, picking the session.

``GatewayState`` is the one object the routes reach (``request.app.state.gateway``): the
config, the served ``Agents``, the ``Hub``. ``session_of`` turns a key as a client gives it
(a short name such as ``work`` or a full ``agent:<id>:<name>``) and an optional agent into
the agent's id and the full key, refusing an agent the bearer token does not reach.
``failure`` maps the one-line ``ClawdError``s to HTTP statuses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from clawd.config import Config
from clawd.core.errors import ClawdError, ConfigError, SandboxError
from clawd.frontends.gateway.agents import Agents, UnknownAgent
from clawd.frontends.gateway.guard import error_body
from clawd.frontends.gateway.hub import Hub, IdempotencyConflict, QueueFull, Stopping
from clawd.frontends.gateway.workspace import NotFound, Refused
from clawd.sessions.lock import SessionBusyError


@dataclass
class GatewayState:
    config: Config
    agents: Agents
    hub: Hub


class Forbidden(ClawdError):
    """The token does not reach this agent."""


class BadRequest(ClawdError):
    pass


def state(request: Request) -> GatewayState:
    found: GatewayState = request.app.state.gateway
    return found


def allowed(request: Request, agent_id: str) -> bool:
    """Whether the request's token reaches ``agent_id``."""
    scoped = request.scope.get("state", {}).get("agents")
    return scoped is None or agent_id.lower() in scoped


def agent_of(request: Request, name: str | None) -> str:
    """The served agent ``name`` names (None: the default), if the token reaches it."""
    agent_id = state(request).agents.find(name)
    if not allowed(request, agent_id):
        raise Forbidden(f"this token does not reach the agent {agent_id!r}")
    return agent_id


def session_of(request: Request, key: str | None, agent: str | None = None
               ) -> tuple[str, str]:
    """(agent id, full session key) for a client's key (default ``main``) and agent."""
    from clawd.frontends.compose import chat_agent, session_key

    named = chat_agent(state(request).config, agent, key)
    agent_id = agent_of(request, named)
    return agent_id, session_key(agent_id, key)


def failure(exc: Exception) -> Response:
    """A ``ClawdError`` as the response its kind calls for."""
    status, kind, headers = 400, "invalid_request_error", {}
    if isinstance(exc, (Forbidden, Refused, SandboxError)):
        status, kind = 403, "forbidden"
    elif isinstance(exc, (UnknownAgent, NotFound)):
        status, kind = 404, "not_found"
    elif isinstance(exc, QueueFull):
        status, kind = 429, "session_queue_full"
        headers["Retry-After"] = str(exc.retry_after)
    elif isinstance(exc, (IdempotencyConflict, SessionBusyError)):
        status, kind = 409, "conflict"
    elif isinstance(exc, Stopping):
        status, kind = 503, "stopping"
    elif not isinstance(exc, (BadRequest, ConfigError)):
        status, kind = 500 if not isinstance(exc, ClawdError) else 400, "error"
    return Response(error_body(status, str(exc), kind), status, headers,
                    media_type="application/json")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or a one-line ``BadRequest``."""
    raw = await request.body()
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def ok(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status)
