"""The OpenAI-compatible routes, ``GET /v1/models`` and ``POST /v1/chat/completions``, on
when ``gateway.http.endpoints.chatCompletions.enabled``.

A completion is a turn like any other: its new user message goes through the session's
queue in the ``Hub`` (``openai_map`` says which session and which message), and the turn's
events become OpenAI's shapes: text deltas as ``chat.completion.chunk``s ending with
``data: [DONE]``, or one ``chat.completion``; a ``/command`` answers with its output; a
turn that failed before any text is an error in OpenAI's shape (an ``error`` data line in
a stream). A client's bookkeeping request is answered by the agent's model directly, with
no tools and no session, on a small pool of its own (``Bounded``: past it, 429), so a flood
of them never holds the threads the other routes read with. A quiet stream gets a
keep-alive comment every 15 s.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from clawd.core.messages import Message, ModelRequest, new_id
from clawd.frontends.gateway import quotas
from clawd.frontends.gateway.bodies import BadRequest, CompletionBody
from clawd.frontends.gateway.common import (
    agent_of,
    allowed,
    header_key,
    idempotency_of,
    key_from_header,
    ok,
    read_body,
    session_of,
    state,
)
from clawd.frontends.gateway.gatekeeper import error_body
from clawd.frontends.gateway.openai_map import (
    SESSION_HEADER,
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
from clawd.frontends.hub import feed
from clawd.frontends.hub.feed import KEEP_ALIVE
from clawd.loop.runtime import Runtime

ASIDE_MAX_TOKENS = 512


async def models(request: Request) -> Response:
    ids = [a for a in state(request).agents.ids if allowed(request, a)]
    return ok({"object": "list", "data": [{"id": model_id(a), "object": "model",
                                           "created": 0, "owned_by": "clawd"} for a in ids]})


async def chat_completions(request: Request) -> Response:
    gw = state(request)
    parsed = await read_body(request, CompletionBody)
    body = parsed.model_dump(exclude_none=True)
    agent_id = agent_of(request, agent_named(parsed.model))
    model, stream = model_id(agent_id), parsed.stream is True
    created = int(time.time())
    if is_bookkeeping(body, request.headers):
        runtime = gw.agents.runtime(agent_id)
        text = await gw.aside.run(answer_aside, runtime, body)
        return _single(new_id(), model, created, text, stream,
                       {"X-Clawd-Bookkeeping": "true"})
    text = new_message(body)
    sent = dict(request.headers)
    if sent.get(SESSION_HEADER, "").strip():  # blank: not given
        sent[SESSION_HEADER] = key_from_header(sent[SESSION_HEADER])
    name, how = session_name(sent, parsed.user, new_id())
    agent_id, key = session_of(request, name, agent_id)
    turn, _ = await quotas.submit(request, agent_id, key, text,
                                  idempotency_of(request.headers.get("idempotency-key")),
                                  ephemeral=how == "new")  # nobody can come back to it
    headers = {"X-Clawd-Session-Key": header_key(key), "X-Clawd-Session-From": how,
               "X-Clawd-Turn-Id": turn.id}
    if stream:
        lines = turn.feed.follow(keepalive=feed.HEARTBEAT_SECONDS)
        return StreamingResponse(_chunks(lines, turn.id, model, created),
                                 media_type="text/event-stream",
                                 headers={**headers, "Cache-Control": "no-store",
                                          "X-Accel-Buffering": "no"})
    text, error, done = "", None, None
    async for _, line in turn.feed.lines_of():
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
    return ok(completion(turn.id, model, created, text, usage_of(done)), headers=headers)


def _data(payload: Any) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


async def _chunks(lines: AsyncIterator[tuple[int, dict[str, Any]] | None], turn_id: str,
                  model: str, created: int) -> AsyncIterator[bytes]:
    yield _data(chunk(turn_id, model, created, {"role": "assistant", "content": ""}))
    sent, error, done = False, None, None
    async for found in lines:
        if found is None:
            yield KEEP_ALIVE
            continue
        line = found[1]
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
        return ok(completion(turn_id, model, created, text, usage_of(None)), headers=headers)
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
    if not messages and system:  # the task prompt sent as a system message alone
        messages, system = [Message.user("\n\n".join(system))], []
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
