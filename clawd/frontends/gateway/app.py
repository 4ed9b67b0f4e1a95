"""The ASGI application of ``clawd serve``: routes (the native API, the web chat's page),
the gatekeeper, CORS when configured, and the lifespan that builds each served agent's runtime,
starts the channels (``channels.service``) and stops them and the ``Hub`` cleanly.

``create_app`` is what ``server`` runs on uvicorn and what tests drive in-process; the
OpenAI-compatible routes are mounted only with
``gateway.http.endpoints.chatCompletions.enabled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from clawd.config import Config
from clawd.core.errors import ClawdError
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.common import (
    GatewayState,
    agent_of,
    failure,
    no_route,
    on_error,
)
from clawd.frontends.gateway.gatekeeper import Gatekeeper, send_error
from clawd.frontends.gateway.openai_map import MappingError
from clawd.frontends.gateway.policy import AcceptedTokens
from clawd.frontends.gateway.quotas import note_limit
from clawd.frontends.hub import open_coordination
from clawd.frontends.hub.hub import Hub
from clawd.frontends.mcp_server import AGENT_SCOPE_KEY, NOTE_LIMIT_SCOPE_KEY

if TYPE_CHECKING:
    from clawd.frontends.mcp_server import HttpMemory

log = logging.getLogger(__name__)
ALLOWED_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID",
                   "X-Clawd-Session-Key"]


def create_app(config: Config, agents: ServedAgents, token: str | None) -> Starlette:
    """The gateway over ``agents``; ``token``: the unscoped bearer token (config or
    environment), besides ``gateway.auth.tokens``."""
    from clawd.frontends.gateway import native, openai_compat, openapi, ops, page

    gateway = config.gateway
    # one process's, or with storage.url what this worker shares with the others
    coordination = open_coordination(config)
    hub = Hub(agents, coordination, max_queued=gateway.max_queued_per_session,
              idle_seconds=gateway.idle_session_seconds,
              grace_seconds=gateway.shutdown_grace_seconds)
    from clawd.frontends.gateway import automation, jobs

    routes = list(native.ROUTES) + page.ROUTES + automation.ROUTES + jobs.ROUTES + ops.ROUTES
    readiness = ops.Readiness(config.storage.effective_url(), lambda: hub.stopping)
    compatible = gateway.http.endpoints.chat_completions.enabled
    if compatible:
        routes += openai_compat.ROUTES

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi.document(compatible))

    routes.append(Route("/openapi.json", openapi_json))
    memory = McpEndpoint(agents)
    routes.append(Route("/mcp", memory, methods=["GET", "POST", "DELETE"]))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.listen(asyncio.get_running_loop())
        problems: list[str] = []  # the MCP servers are the process's: one agent given
        for agent_id in agents.ids:  # any tells; built now, off the loop: no request waits
            runtime = await run_in_threadpool(agents.runtime, agent_id)
            await run_in_threadpool(runtime.warm)  # nor does the first turn
            problems = runtime.mcp.problems() if runtime.mcp else problems
        for problem in problems:
            log.warning("%s", problem)
        from clawd.channels.service import start_channels

        channels = start_channels(config, hub)  # channels.telegram.enabled: its poller
        app.state.gateway.channels = channels
        background = automation.Background(config, agents, hub) if (
            config.automation.enabled) else None
        app.state.gateway.background = background
        if background is not None:
            background.channels = channels  # a run delivered to telegram: goes through it
            background.start()
        try:
            async with memory.running():
                yield
        finally:
            if channels is not None:
                await channels.stop()
            if background is not None:
                await background.stop(gateway.shutdown_grace_seconds)
            await hub.stop()
            app.state.gateway.aside.close()
            readiness.close()
            coordination.close()

    middleware = []
    if gateway.cors.origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=gateway.cors.origins,
                                     allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                                     allow_headers=ALLOWED_HEADERS,
                                     expose_headers=["X-Clawd-Turn-Id", "Retry-After"]))
    middleware.append(Middleware(Gatekeeper, gateway=gateway,
                                 tokens=AcceptedTokens.of(gateway, token, agents.people),
                                 failed=coordination,
                                 stopping=lambda: hub.stopping))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={ClawdError: on_error, MappingError: on_error,
                                        HTTPException: no_route})
    app.state.gateway = GatewayState(config, agents, hub)
    app.state.readiness = readiness
    return app


class McpEndpoint:
    """``/mcp``: the memory of the agent the token reaches (``?agent=ID`` picks one of
    several; default: the token's own) as MCP tools over streamable HTTP
    (``frontends.mcp_server``)."""

    def __init__(self, agents: ServedAgents):
        self.agents = agents
        self.http: HttpMemory | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from clawd.frontends.mcp_server import HttpMemory  # the SDK: when serving only

        http = self.http = HttpMemory(self.agents.runtime)
        async with http.run():
            yield
        self.http = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.http is None:
            await send_error(send, 503, "the MCP endpoint is not running", "unavailable")
            return
        request = Request(scope, receive)
        try:
            scope[AGENT_SCOPE_KEY] = agent_of(request, request.query_params.get("agent"))
            scope[NOTE_LIMIT_SCOPE_KEY] = note_limit(request)
        except ClawdError as exc:
            await failure(exc)(scope, receive, send)
            return
        await self.http.handle(scope, receive, send)
