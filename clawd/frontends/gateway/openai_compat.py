"""The OpenAI-compatible routes, ``GET /v1/models`` and ``POST /v1/chat/completions``, on
when ``gateway.http.endpoints.chatCompletions.enabled``.

A completion is a turn like any other: its new user message goes through the session's
queue in the ``Hub`` (``openai_map`` says which session and which message), and the turn's
events become OpenAI's shapes: text deltas as ``chat.completion.chunk``s ending with
``data: [DONE]``, or one ``chat.completion``; a ``/command`` answers with its output; a
turn that failed before any text is an error in OpenAI's shape (an ``error`` data line in
a stream). A client's bookkeeping request is answered by the agent's model directly, with
no tools and no session.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from clawd.core.errors import ClawdError
from clawd.core.messages import Message, ModelRequest, new_id
from clawd.frontends.gateway.common import (
    BadRequest,
    agent_of,
    allowed,
    failure,
    json_body,
    ok,
    session_of,
    state,
)
from clawd.frontends.gateway.guard import error_body
from clawd.frontends.gateway.openai_map import (
    MappingError,
    agent_named,
    chunk,
    completion,
    is_bookkeeping,
    model_id,
    new_message,
    session_name,
    text_of,
    usage_of,
)
from clawd.loop.runtime import Runtime

ASIDE_MAX_TOKENS = 512


async def models(request: Request) -> Response:
    ids = [a for a in state(request).agents.ids if allowed(request, a)]
    return ok({"object": "list", "data": [{"id": model_id(a), "object": "model",
                                           "created": 0, "owned_by": "clawd"} for a in ids]})


async def chat_completions(request: Request) -> Response:
    gw = state(request)
    try:
        body = await json_body(request)
        agent_id = agent_of(request, agent_named(body.get("model")))
        model, stream = model_id(agent_id), body.get("stream") is True
        created = int(time.time())
        if is_bookkeeping(body, request.headers):
            runtime = gw.agents.runtime(agent_id)
            text = await run_in_threadpool(answer_aside, runtime, body)
            return _single(new_id(), model, created, text, stream,
                           {"X-Clawd-Bookkeeping": "true"})
        text = new_message(body)
        name, how = session_name(request.headers, body.get("user"), new_id())
        agent_id, key = session_of(request, name, agent_id)
        idempotency = request.headers.get("idempotency-key")
        turn, _ = gw.hub.submit(agent_id, key, text, idempotency)
    except (ClawdError, MappingError) as exc:
        return failure(BadRequest(str(exc)) if isinstance(exc, MappingError) else exc)
    headers = {"X-Clawd-Session-Key": key, "X-Clawd-Session-From": how,
               "X-Clawd-Turn-Id": turn.id}
    lines = turn.feed.follow()
    if stream:
        return StreamingResponse(_chunks(lines, turn.id, model, created),
                                 media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-store"})
    text, error, done = "", None, None
    async for _, line in lines:
        kind = line.get("type")
        if kind in ("reply", "command") and line.get("text"):
            text = line["text"]
        elif kind == "error":
            error = line["message"]
        elif kind == "done":
            done = line
    if not text and error:
        return Response(error_body(502, error, "turn_failed"), 502, headers,
                        media_type="application/json")
    return ok_with(completion(turn.id, model, created, text, usage_of(done)), headers)


def ok_with(data: Any, headers: dict[str, str]) -> Response:
    response = ok(data)
    response.headers.update(headers)
    return response


def _data(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


async def _chunks(lines: AsyncIterator[tuple[int, dict[str, Any]]], turn_id: str, model: str,
                  created: int) -> AsyncIterator[bytes]:
    yield _data(chunk(turn_id, model, created, {"role": "assistant", "content": ""}))
    sent, error, done = False, None, None
    async for _, line in lines:
        kind = line.get("type")
        # the text as it streams; a command's output (or a reply that did not stream) whole
        if kind == "delta" or (kind in ("reply", "command") and line.get("text") and not sent):
            sent = True
            yield _data(chunk(turn_id, model, created, {"content": line["text"]}))
        elif kind == "error":
            error = line["message"]
        elif kind == "done":
            done = line
    if error and not sent:
        yield _data({"error": {"message": error, "type": "turn_failed", "code": 502}})
    else:
        last = chunk(turn_id, model, created, {}, "stop")
        last["usage"] = usage_of(done)
        yield _data(last)
    yield b"data: [DONE]\n\n"


def _single(turn_id: str, model: str, created: int, text: str, stream: bool,
            headers: dict[str, str]) -> Response:
    if not stream:
        return ok_with(completion(turn_id, model, created, text, usage_of(None)), headers)
    body = (_data(chunk(turn_id, model, created, {"role": "assistant", "content": text}))
            + _data(chunk(turn_id, model, created, {}, "stop")) + b"data: [DONE]\n\n")
    return Response(body, media_type="text/event-stream", headers=headers)


def answer_aside(runtime: Runtime, body: dict[str, Any]) -> str:
    """A bookkeeping request answered by the agent's model: its messages as the client sent
    them, no tools, no workspace files, no session."""
    from clawd.providers.base import complete

    system, messages = [], []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        text = text_of(message.get("content"))
        role = message.get("role")
        if role == "system":
            system.append(text)
        elif role in ("user", "assistant") and text.strip():
            messages.append(Message.user(text) if role == "user" else Message.assistant(text))
    if not messages:
        raise BadRequest("the request has no user message")
    handle = runtime.models(runtime.settings.model)
    request = ModelRequest(system=system, messages=messages,
                           max_tokens=min(ASIDE_MAX_TOKENS, runtime.settings.max_tokens))
    return complete(handle.connect(), request).message.text


ROUTES = [
    Route("/v1/models", models),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]
