"""How an OpenAI-style request maps onto clawd: the agent, the session, the new message, and
whether it is a client's own bookkeeping. Pure functions, no I/O.

- **model**: one per agent, ``clawd:<agentId>``; a bare agent id and ``clawd`` (the
  default agent) are accepted too.
- **session**: ``X-Clawd-Session-Key`` (a short name or a full key), else the client's chat
  id (Open WebUI sends ``X-OpenWebUI-Chat-Id`` with ``ENABLE_FORWARD_USER_INFO_HEADERS``):
  ``agent:<id>:openai:chat:<readable>-<digest>``, else the ``user`` field:
  ``agent:<id>:openai:user:<readable>-<digest>``, else a new session for this request
  alone. The digest is of the exact value, so values that differ in any way (case, ``@``
  against ``-``, past the readable part's length) are different sessions: one person's
  history never reaches another.
- **the new message**: the last message, which must be the user's. A client re-sends the
  whole conversation each time; clawd keeps its own, so only that message enters the
  session (the client's system message and earlier turns are not appended again).
- **bookkeeping**: requests a client makes for itself (titles, tags, follow-up questions,
  search queries) are recognised by their whole shape: one prompt, no conversation in the
  messages (no assistant message, one user message at most), that begins as one of the
  task prompts Open WebUI and LibreChat send and carries the conversation inside it
  (``<chat_history>``, or ``User:`` / ``AI:`` lines); or by a ``metadata.task`` field, or
  by ``X-Clawd-Bookkeeping: true``. They are answered by the agent's model without tools,
  and never enter a session. A person's message that merely mentions such a phrase is a
  message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

SESSION_HEADER = "x-clawd-session-key"
CHAT_ID_HEADERS = ("x-openwebui-chat-id",)
BOOKKEEPING_HEADER = "x-clawd-bookkeeping"
MODEL_PREFIX = "clawd:"
READABLE_CHARS = 40  # of a user or chat id kept readable in the key, before its digest
DIGEST_CHARS = 16  # hex digits of the id's SHA-256: 64 bits

_TRANSCRIPT = re.compile(r"^\W{0,3}(user|human)\W{0,3}:.*^\W{0,3}(ai|assistant|response)\W{0,3}:",
                         re.I | re.M | re.S)
# (how a client's task prompt begins, what it carries): the conversation is inside the prompt
BOOKKEEPING_SHAPES = (
    # Open WebUI's task templates (title, tags, follow-ups, queries, emoji, autocomplete)
    (re.compile(r"\A\s*### Task:"), re.compile(r"<chat_history>.*</chat_history>", re.S)),
    # LibreChat's title prompts
    (re.compile(r"\A\s*(please\s+)?(provide|generate)\s+a\s+concise,\s+5-word-or-less title "
                r"for the conversation", re.I), _TRANSCRIPT),
    (re.compile(r"\A\s*Analyze this conversation and provide:\s*1\. The detected language",
                re.I), _TRANSCRIPT),
    (re.compile(r"\A\s*Please generate a concise title \(max 40 characters\) for a "
                r"conversation", re.I), _TRANSCRIPT),
)


class MappingError(ValueError):
    """A request clawd cannot map (HTTP 400), said in one line."""


def model_id(agent_id: str) -> str:
    return f"{MODEL_PREFIX}{agent_id}"


def agent_named(model: Any) -> str | None:
    """The agent a ``model`` names (None: the default agent)."""
    if not isinstance(model, str) or not model.strip():
        raise MappingError("model is required: one of GET /v1/models (clawd:<agent>)")
    name = model.strip()
    if name.lower() in ("clawd", MODEL_PREFIX.rstrip(":")):
        return None
    return name[len(MODEL_PREFIX):] if name.lower().startswith(MODEL_PREFIX) else name


def client_id(value: str) -> str:
    """A client's user or chat id as part of a session key: a readable start (lowercase
    letters, digits, ``.``, ``_``, ``-``) and a digest of the exact value, so two values
    that differ in any way never name one session."""
    readable = re.sub(r"[^a-z0-9._-]+", "-", value.strip().lower()).strip("-.")
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{readable[:READABLE_CHARS].rstrip('-.')}-{digest}" if readable else digest


def session_name(headers: Mapping[str, str], user: Any, new_id: str) -> tuple[str, str]:
    """The session key (short or full) a request uses, and where it came from:
    ``header``, ``chat-id``, ``user`` or ``new``. ``X-Clawd-Session-Key`` is taken as
    sent, already decoded (``common.key_from_header``)."""
    explicit = (headers.get(SESSION_HEADER) or "").strip()
    if explicit:
        return explicit, "header"
    for name in CHAT_ID_HEADERS:
        chat = (headers.get(name) or "").strip()
        if chat:
            return f"openai:chat:{client_id(chat)}", "chat-id"
    if isinstance(user, str) and user.strip():
        return f"openai:user:{client_id(user)}", "user"
    return f"openai:{new_id}", "new"


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content
                         if isinstance(part, dict) and part.get("type") == "text"
                         and isinstance(part.get("text"), str))
    return ""


def new_message(body: Mapping[str, Any]) -> str:
    """The text of the request's last message, the user's (see the module docstring)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise MappingError("messages must be a non-empty list")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise MappingError("the last message must be the user's (role \"user\"): clawd "
                           "answers one new message at a time")
    text = text_of(last.get("content"))
    if not text.strip():
        raise MappingError("the last user message has no text")
    return text


def is_bookkeeping(body: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
    """Whether the request is a client's own bookkeeping (see the module docstring)."""
    if (headers.get(BOOKKEEPING_HEADER) or "").strip().lower() in ("1", "true", "yes"):
        return True
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and metadata.get("task"):
        return True
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    roles = [m.get("role") for m in messages]
    if not messages or "assistant" in roles or roles.count("user") > 1:
        return False  # a conversation: a person is talking
    text = text_of(messages[-1].get("content"))
    return any(start.search(text) and holds.search(text) for start, holds in
               BOOKKEEPING_SHAPES)


def usage_of(done: Mapping[str, Any] | None) -> dict[str, int]:
    """OpenAI's usage from a ``done`` event's."""
    usage = (done or {}).get("usage") or {}
    prompt = sum(int(usage.get(k, 0)) for k in ("input", "cacheRead", "cacheWrite"))
    completion = int(usage.get("output", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def chunk(turn_id: str, model: str, created: int, delta: dict[str, Any],
          finish: str | None = None) -> dict[str, Any]:
    return {"id": f"chatcmpl-{turn_id}", "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def completion(turn_id: str, model: str, created: int, text: str,
               usage: dict[str, int]) -> dict[str, Any]:
    return {"id": f"chatcmpl-{turn_id}", "object": "chat.completion", "created": created,
            "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
            "usage": usage}
