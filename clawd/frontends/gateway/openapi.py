"""The gateway's OpenAPI 3.1 description, served at ``/openapi.json`` (docs/gateway.md says
the same in prose). Written as data, route by route; the OpenAI-compatible paths are
included when that endpoint is on.
"""

from __future__ import annotations

from typing import Any

from clawd import __version__


def _param(name: str, where: str = "query", kind: str = "string", required: bool = False,
           about: str = "") -> dict[str, Any]:
    return {"name": name, "in": where, "required": required or where == "path",
            "schema": {"type": kind}, "description": about}


KEY = _param("key", "path", about="a session key (agent:<id>:<name>) or a short name")
AGENT = _param("agent", about="the agent (default: the gateway's default agent)")
JOB = _param("id", "path", about="a job's whole id; a job of an agent the token does not "
             "reach is not found")
SESSION = _param("sessionKey", about="the session whose access rules apply (default main)")
ERROR = {"description": "an error: {\"error\": {\"message\", \"type\", \"code\"}}"}
SSE = {"description": "server-sent events; each data line is one event of "
                      "`clawd chat --json --stream` (docs/json-events.md), its id the event's "
                      "number in the turn",
       "content": {"text/event-stream": {}, "application/json": {}}}


def _op(summary: str, params: list[dict[str, Any]] | None = None, body: dict | None = None,
        ok: dict | None = None, errors: tuple[int, ...] = (401, 403)) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "parameters": params or [],
                          "responses": {"200": ok or {"description": "JSON"},
                                        **{str(code): ERROR for code in errors}}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "properties": body}}}}
    return op


def document(compatible: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/health": {"get": {"summary": "liveness; needs no token", "security": [],
                            "responses": {"200": {"description": "{\"ok\": true}"}}}},
        "/ready": {"get": {"summary": "readiness: the database answers and the worker is not "
                           "stopping; needs no token", "security": [],
                           "responses": {"200": {"description": "{\"ready\": true}"},
                                         "503": {"description": "{\"ready\": false, "
                                                 "\"reason\": \"database\" or "
                                                 "\"stopping\"}"}}}},
        "/metrics": {"get": {"summary": "Prometheus' text format; the operator's token only",
                             "responses": {"200": {"description": "text/plain"},
                                           "401": ERROR, "403": ERROR}}},
        "/": {"get": {"summary": "the web chat (HTML); needs no token: the page asks for it",
                      "security": [], "responses": {"200": {"description": "text/html"}}}},
        "/ui/{name}": {"get": {"summary": "the web chat's CSS and JavaScript; needs no token",
                               "security": [], "parameters": [_param("name", "path")],
                               "responses": {"200": {"description": "a file"},
                                             "404": ERROR}}},
        "/api/agents": {"get": _op("the agents this token reaches")},
        "/api/commands": {"get": _op("the slash commands (the REPL's registry)")},
        "/api/sessions": {"get": _op("a page of the sessions of an agent, newest activity "
                                     "first: the fields of `clawd sessions list --json`, "
                                     "busy, and nextCursor", [
                                         AGENT, _param("all", kind="boolean",
                                                       about="also ended sessions"),
                                         _param("limit", kind="integer",
                                                about="sessions a page, 1-500 (100)"),
                                         _param("cursor", about="the nextCursor of the "
                                                "page before")])},
        "/api/sessions/{key}": {
            "patch": _op("rename the session (a title line in its transcript)", [KEY, AGENT],
                         {"title": {"type": "string"}, "sessionId": {"type": "string"}},
                         errors=(400, 401, 403, 404)),
            "delete": _op("delete the session; its transcript is kept aside", [
                KEY, AGENT, _param("sessionId", about="an ended session of the key")],
                errors=(400, 401, 403, 404))},
        "/api/sessions/{key}/history": {"get": _op(
            "a session's history, a page at a time (newest first page)",
            [KEY, AGENT, _param("before", kind="integer", about="items before this index"),
             _param("limit", kind="integer", about="items per page (default 50, max 200)"),
             _param("sessionId", about="that session of the key, ended or not")])},
        "/api/sessions/{key}/context": {"get": _op(
            "how full the session's context window is: sessionId, model, used (tokens after "
            "the last model call or compaction; null before the first), fixed (while used "
            "is null: the fixed layers' estimated tokens), window, flushAt, compactAt, busy",
            [KEY, AGENT])},
        "/api/sessions/{key}/mcp": {"get": _op(
            "the agent's MCP servers: name, transport, state, on (in this session), error, "
            "tools (name, description); /mcp on|off NAME switches one", [KEY, AGENT])},
        "/api/sessions/{key}/messages": {"post": _op(
            "send a message or a /command; the turn's events", [
                KEY, AGENT, _param("Idempotency-Key", "header",
                                   about="a retried send with this key never runs twice")],
            {"text": {"type": "string"}, "idempotencyKey": {"type": "string"},
             "approvals": {"type": "boolean"}}, SSE,
            (400, 401, 403, 409, 413, 429, 503))},
        "/api/sessions/{key}/abort": {"post": _op(
            "stop the running turn as Ctrl-C does (the partial reply kept)", [KEY, AGENT])},
        "/api/turns/{turn}/events": {"get": _op(
            "follow a turn again after a disconnect", [
                _param("turn", "path"), _param("Last-Event-ID", "header", "integer")],
            ok=SSE, errors=(401, 404))},
        "/api/turns/{turn}/approvals/{number}": {"post": _op(
            "answer a tool's question in a turn sent with approvals: true", [
                _param("turn", "path"), _param("number", "path", "integer")],
            {"approve": {"type": "boolean"}, "values": {"type": "object"}},
            errors=(400, 401, 404))},
        "/api/sessions/{key}/jobs": {"get": _op(
            "the jobs made in the session or running in it: id, name, message, schedule, "
            "nextRun (UTC), nextRunLocal and timezone (the user's zone), enabled",
            [KEY, AGENT])},
        "/api/jobs/{id}/pause": {"post": _op("pause a job", [JOB], errors=(401, 404))},
        "/api/jobs/{id}/resume": {"post": _op("resume a paused job", [JOB],
                                              errors=(400, 401, 404))},
        "/api/jobs/{id}": {"delete": _op("delete a job and its runs", [JOB],
                                         errors=(400, 401, 404))},
        "/api/memory/search": {"get": _op("memory search as the session sees it", [
            AGENT, SESSION, _param("q", required=True), _param("maxResults", kind="integer")])},
        "/api/files/{path}": {
            "get": _op("read a workspace file (or list a folder) under the tools' rules",
                       [_param("path", "path"), AGENT, SESSION], errors=(401, 403, 404)),
            "put": _op("write (or append to) a workspace file as the write tool does",
                       [_param("path", "path")],
                       {"content": {"type": "string"}, "append": {"type": "boolean"},
                        "sessionKey": {"type": "string"}, "agent": {"type": "string"}},
                       errors=(401, 403, 413))},
    }
    if compatible:
        paths["/v1/models"] = {"get": _op("one model per agent, in OpenAI's list shape")}
        paths["/v1/chat/completions"] = {"post": _op(
            "OpenAI chat completions, streaming or not; the session from X-Clawd-Session-Key, "
            "X-OpenWebUI-Chat-Id or user", [
                _param("X-Clawd-Session-Key", "header"),
                _param("X-OpenWebUI-Chat-Id", "header")],
            {"model": {"type": "string"}, "messages": {"type": "array"},
             "stream": {"type": "boolean"}, "user": {"type": "string"}},
            errors=(400, 401, 403, 413, 429))}
    return {"openapi": "3.1.0",
            "info": {"title": "clawd gateway", "version": __version__,
                     "description": "The native API of `clawd serve` (docs/gateway.md)"},
            "components": {"securitySchemes": {"bearer": {"type": "http",
                                                          "scheme": "bearer"}}},
            "security": [{"bearer": []}], "paths": paths}
