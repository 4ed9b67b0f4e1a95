"""The native API's routes (docs/gateway.md): agents, sessions, history, the context meter,
sending, aborting, re-attaching to a turn, memory search and workspace files.

Sending a message (or a ``/command``: the REPL's registry, through ``Chat.handle``) queues
a turn in the session's ``Hub`` slot and answers with its events as server-sent events,
each the JSON object ``clawd chat --json --stream`` prints; with ``Accept:
application/json`` the events come as one JSON array when the turn ends. Blocking work
(reading transcripts, files, the index) runs on a thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from clawd import __version__
from clawd.core.errors import ClawdError
from clawd.frontends.commands import ESCAPE, REGISTRY
from clawd.frontends.gateway import history, quotas, session_pages, workspace
from clawd.frontends.gateway.bodies import (
    ApprovalBody,
    BadRequest,
    FileBody,
    SendBody,
    TitleBody,
)
from clawd.frontends.gateway.common import (
    agent_of,
    allowed,
    header_key,
    idempotency_of,
    ok,
    read_body,
    session_of,
    state,
)
from clawd.frontends.hub import feed
from clawd.frontends.hub.feed import KEEP_ALIVE, sse
from clawd.frontends.hub.turns import QueuedTurn, RemoteTurn
from clawd.loop.parts import fixed_context
from clawd.loop.runtime import Runtime, session_model
from clawd.sessions.interface import TranscriptLog

DEFAULT_PAGE = 50


class SessionKeyConvertor(PathConvertor):
    """``{key:session_key}``: a session key in a path, ``/`` included (sent as ``%2F``, it is
    decoded before routing), and CR, LF and the rest, so ``session_of`` can refuse them
    (400) rather than the router not finding them (404). The longest key that leaves a
    route its last word wins: ``/api/sessions/a/history/history`` is the key
    ``a/history``."""

    regex = "(?s:.+)"


register_url_convertor("session_key", SessionKeyConvertor())


async def health(request: Request) -> Response:
    return ok({"ok": True, "version": __version__})


async def list_agents(request: Request) -> Response:
    gw = state(request)

    def listed() -> list[dict[str, Any]]:  # a runtime is built on first use: off the loop
        return [{"id": agent_id, "model": gw.agents.runtime(agent_id).settings.model,
                 "default": agent_id == gw.agents.default}
                for agent_id in gw.agents.ids if allowed(request, agent_id)]

    return ok({"agents": await run_in_threadpool(listed)})


async def list_commands(request: Request) -> Response:
    return ok({"commands": [{"name": c.name, "usage": c.usage, "help": c.help,
                             "subcommands": list(c.subcommands)} for c in REGISTRY.values()],
               "escape": ESCAPE})


async def list_sessions(request: Request) -> Response:
    """A page of the sessions (``session_pages``): ``limit``, ``cursor``, ``nextCursor``."""
    params = request.query_params
    agent_id = agent_of(request, params.get("agent"))
    limit, after = session_pages.limit_of(params.get("limit")), \
        session_pages.cursor_of(params.get("cursor"))
    gw = state(request)
    runtime = gw.agents.runtime(agent_id)
    ended = params.get("all", "").lower() in ("1", "true", "yes")
    found, more = await run_in_threadpool(session_pages.page, runtime.storage, limit, after,
                                          ended)
    busy = await gw.hub.busy_of(agent_id, [row.key for row in found if row.key])
    out = []
    for row in found:
        item = row.to_json()
        if row.key:
            item["busy"] = busy[row.key]
        out.append(item)
    return ok({"agent": agent_id, "sessions": out, "nextCursor": more})


async def session_history(request: Request) -> Response:
    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    before = _int(request.query_params.get("before"), "before")
    limit = _int(request.query_params.get("limit"), "limit") or DEFAULT_PAGE
    runtime = state(request).agents.runtime(agent_id)
    entry, found = await run_in_threadpool(_history, runtime, key,
                                           request.query_params.get("sessionId"))
    return ok({"agent": agent_id, "sessionKey": key, "sessionId": entry.get("sessionId"),
               **history.page(found, before, limit),
               "busy": await state(request).hub.busy(agent_id, key)})


def _history(runtime: Runtime, key: str, session_id: str | None = None
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """On a thread: the session's entry and its transcript's items; with ``session_id``,
    those of that session of the key, ended or not."""
    if session_id:
        log = _transcript_of(runtime, key, session_id)
        return {"sessionId": log.session_id}, history.read_items(log)
    entry: dict[str, Any] = dict(runtime.store.get(key) or {})
    found = entry.get("sessionId")
    return entry, history.read_items(runtime.storage.transcript(found)) if found else []


def _transcript_of(runtime: Runtime, key: str, session_id: str) -> TranscriptLog:
    """The transcript of session ``session_id`` if it was a session of ``key`` (an ended
    one is listed with ``all=true``); 404 otherwise."""
    from clawd.sessions.files import summary_of
    from clawd.sessions.store import normalize_key

    wanted = session_id.strip()
    if wanted in runtime.storage.session_ids():
        log = runtime.storage.transcript(wanted)
        summary = summary_of(log)
        if summary is not None and normalize_key(summary.key or "") == key:
            return log
    raise workspace.NotFound(f"no session {session_id} of {key}")


async def rename_session(request: Request) -> Response:
    """Give a session (the key's current one, or ``sessionId``) a title: a ``title`` entry
    appended to its transcript, so every list (and a rebuilt store) shows it."""
    from clawd.sessions.files import TITLE_ENTRY
    from clawd.storage.session_admin import current_transcript

    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    body = await read_body(request, TitleBody)
    title = " ".join(body.title.split())
    if not title:
        raise BadRequest("the title is empty")
    runtime = state(request).agents.runtime(agent_id)

    def rename() -> str:
        log = (_transcript_of(runtime, key, body.session_id) if body.session_id
               else current_transcript(runtime.storage, key))
        if log is None:
            raise workspace.NotFound(f"no session {key}")
        log.append({"type": TITLE_ENTRY, "title": title})
        return log.session_id

    session_id = await run_in_threadpool(rename)
    return ok({"sessionKey": key, "sessionId": session_id, "title": title})


async def delete_session(request: Request) -> Response:
    """Delete a session (the key's current one, or ``sessionId``): it leaves the lists,
    its transcript is kept aside in ``deleted/``, as ``clawd sessions delete`` does."""
    from clawd.sessions.files import summary_of
    from clawd.storage.session_admin import Row, delete, set_aside

    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    gw = state(request)
    if (await gw.hub.busy(agent_id, key))["running"]:
        raise BadRequest(f"session {key} is running a turn; stop it first")
    runtime = gw.agents.runtime(agent_id)
    await gw.hub.release(agent_id, key)  # the gateway's own hold on it, if idle
    session_id = request.query_params.get("sessionId")

    def remove() -> str | None:
        if not session_id:
            return set_aside(runtime.storage, key)
        log = _transcript_of(runtime, key, session_id)
        summary = summary_of(log)
        current = (runtime.store.get(key) or {}).get("sessionId") == log.session_id
        return delete(runtime.storage, Row(summary, key if current else None),
                      purge=False) if summary else None

    said = await run_in_threadpool(remove)
    if said is None:
        raise workspace.NotFound(f"no session {key}")
    return ok({"deleted": True, "result": said})


async def session_context(request: Request) -> Response:
    """How full the session's context window is (the REPL's status line): the context
    size after the last model call or compaction (before the first: the fixed layers'
    estimate, as /status counts it), the window, the flush and compaction points."""
    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    runtime = state(request).agents.runtime(agent_id)
    found = await run_in_threadpool(_context, runtime, key)
    return ok({"agent": agent_id, "sessionKey": key, **found,
               "busy": await state(request).hub.busy(agent_id, key)})


def _context(runtime: Runtime, key: str) -> dict[str, Any]:
    entry = runtime.store.get(key)
    ref = session_model(entry, runtime.settings)
    used, fixed = (entry or {}).get("contextUsedTokens"), None
    try:
        budget = runtime.budget(runtime.models(ref))
        window, flush_at, compact_at = (budget.context_window, budget.flush_at,
                                        budget.compact_at)
        if used is None:  # before the first model call: the fixed layers, as /status says
            fixed = fixed_context(runtime, key, ref, float((entry or {}).get("tokenRatio")
                                                           or 1.0))
    except ClawdError:  # a model the registry no longer knows: no meter, the rest stands
        window = flush_at = compact_at = 0
    return {"sessionId": (entry or {}).get("sessionId"), "model": ref, "used": used,
            "fixed": fixed, "window": window, "flushAt": flush_at, "compactAt": compact_at}


async def session_mcp(request: Request) -> Response:
    """The agent's MCP servers, each on or off in the session, with their tools (the web
    page's list; ``/mcp on|off NAME`` switches one)."""
    from clawd.frontends.mcp_command import server_rows

    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    runtime = state(request).agents.runtime(agent_id)
    rows = await run_in_threadpool(lambda: server_rows(runtime, runtime.store.get(key)))
    return ok({"agent": agent_id, "sessionKey": key, "servers": rows})


async def send_message(request: Request) -> Response:
    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    body = await read_body(request, SendBody)
    if not body.text.strip():
        raise BadRequest("the message is empty: send {\"text\": \"...\"}")
    idempotency = idempotency_of(request.headers.get("idempotency-key") or body.idempotency_key)
    turn, new = await quotas.submit(request, agent_id, key, body.text, idempotency,
                                    asks=body.approvals)
    headers = {"X-Clawd-Turn-Id": turn.id, "X-Clawd-Session-Key": header_key(key)}
    if not new:
        headers["X-Clawd-Replayed"] = "true"
    return await _events(request, turn, -1, headers)


async def turn_events(request: Request) -> Response:
    """Follow a turn again (after a disconnect): the events after ``Last-Event-ID``."""
    turn = await state(request).hub.turn(request.path_params["turn"])
    if turn is None or not allowed(request, turn.agent_id):
        raise workspace.NotFound(f"no turn {request.path_params['turn']} (turns are "
                                 f"remembered while the gateway runs)")
    after = _int(request.headers.get("last-event-id") or request.query_params.get("after"),
                 "Last-Event-ID")
    return await _events(request, turn, -1 if after is None else after,
                         {"X-Clawd-Turn-Id": turn.id,
                          "X-Clawd-Session-Key": header_key(turn.key)})


async def _events(request: Request, turn: QueuedTurn | RemoteTurn, after: int,
                  headers: dict[str, str]) -> Response:
    if "application/json" in request.headers.get("accept", "") and \
            "text/event-stream" not in request.headers.get("accept", ""):
        lines = [line async for _, line in turn.feed.lines_of(after)]
        return ok({"turn": turn.to_json(), "events": [line for line in lines
                                                      if line.get("type") != "delta"]},
                  headers=headers)

    async def stream() -> AsyncIterator[bytes]:
        async for found in turn.feed.follow(after, keepalive=feed.HEARTBEAT_SECONDS):
            yield KEEP_ALIVE if found is None else sse(*found)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={**headers, "Cache-Control": "no-store",
                                      "X-Accel-Buffering": "no"})


async def answer_approval(request: Request) -> Response:
    """A person's answer to a tool's question in a turn (``gateway.approvals``)."""
    hub = state(request).hub
    turn = await hub.turn(request.path_params["turn"])
    if turn is None or not allowed(request, turn.agent_id):
        raise workspace.NotFound(f"no turn {request.path_params['turn']}")
    body = await read_body(request, ApprovalBody)
    number = _int(request.path_params["number"], "the question's number") or 0
    if not await hub.answer(turn, number, body.approve, body.values):
        raise workspace.NotFound(f"turn {turn.id} is not waiting for an answer to question "
                                 f"{number} (answered, or given up)")
    return ok({"answered": True, "approve": body.approve})


async def abort(request: Request) -> Response:
    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    turn = await state(request).hub.abort(agent_id, key)
    return ok({"aborted": turn is not None, "turn": turn.to_json() if turn else None})


async def memory_search(request: Request) -> Response:
    params = request.query_params
    agent_id, key = session_of(request, params.get("sessionKey"), params.get("agent"))
    limit = _int(params.get("maxResults"), "maxResults")
    runtime = state(request).agents.runtime(agent_id)
    found = await run_in_threadpool(workspace.search, runtime, key, params.get("q", ""), limit)
    return ok({"sessionKey": key, **found})


async def read_file(request: Request) -> Response:
    params = request.query_params
    agent_id, key = session_of(request, params.get("sessionKey"), params.get("agent"))
    runtime = state(request).agents.runtime(agent_id)
    found = await run_in_threadpool(workspace.read_file, runtime, key,
                                    request.path_params["path"])
    return ok(found)


async def write_file(request: Request) -> Response:
    params = request.query_params
    body = await read_body(request, FileBody)
    agent_id, key = session_of(request, body.session_key or params.get("sessionKey"),
                               body.agent or params.get("agent"))
    runtime = state(request).agents.runtime(agent_id)
    said = await run_in_threadpool(workspace.write_file, runtime, key,
                                   request.path_params["path"], body.content, body.append,
                                   quotas.write_limit(request))
    return ok(said)


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    if not value.strip().isdigit():
        raise BadRequest(f"{name} must be a whole number, not {value!r}")
    return int(value)


ROUTES = [
    Route("/health", health),
    Route("/api/agents", list_agents),
    Route("/api/commands", list_commands),
    Route("/api/sessions", list_sessions),
    Route("/api/sessions/{key:session_key}/history", session_history),
    Route("/api/sessions/{key:session_key}/context", session_context),
    Route("/api/sessions/{key:session_key}/mcp", session_mcp),
    Route("/api/sessions/{key:session_key}/messages", send_message, methods=["POST"]),
    Route("/api/sessions/{key:session_key}/abort", abort, methods=["POST"]),
    Route("/api/sessions/{key:session_key}", delete_session, methods=["DELETE"]),
    Route("/api/sessions/{key:session_key}", rename_session, methods=["PATCH"]),
    Route("/api/turns/{turn}/events", turn_events),
    Route("/api/turns/{turn}/approvals/{number}", answer_approval, methods=["POST"]),
    Route("/api/memory/search", memory_search),
    Route("/api/files/{path:path}", read_file, methods=["GET"]),
    Route("/api/files/{path:path}", write_file, methods=["PUT"]),
]
