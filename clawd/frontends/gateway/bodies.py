"""The request bodies the gateway takes, as pydantic models, and reading one.

``parse`` reads and checks a body in one step with pydantic's JSON parser, so whatever
JSON cannot carry into a turn is a 400 in the error shape before anything runs: bytes that
are not UTF-8, a lone surrogate (``"\\ud800"``, which no transcript could store), nesting
past the parser's depth limit, a wrong type. Fields a client adds of its own are ignored.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from clawd.core.errors import ClawdError


class BadRequest(ClawdError):
    """A request the gateway cannot take (HTTP 400), said in one line."""


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class SendBody(Body):
    """``POST /api/sessions/{key}/messages``."""

    text: StrictStr = ""
    idempotency_key: StrictStr | None = Field(None, alias="idempotencyKey")
    approvals: StrictBool = False  # the sender answers a tool's questions (the web page)


class ApprovalBody(Body):
    """``POST /api/turns/{turn}/approvals/{id}``."""

    approve: StrictBool
    values: dict[str, StrictStr | StrictBool | int | float] | None = None  # a server's form


class FileBody(Body):
    """``PUT /api/files/{path}``."""

    content: StrictStr
    append: StrictBool = False
    session_key: StrictStr | None = Field(None, alias="sessionKey")
    agent: StrictStr | None = None


class TitleBody(Body):
    """``PATCH /api/sessions/{key}``: a new title (the session list shows it)."""

    title: StrictStr = Field(max_length=200)
    session_id: StrictStr | None = Field(None, alias="sessionId")


class ChatMessage(Body):
    role: StrictStr
    content: StrictStr | list[dict[str, Any]] | None = None


class CompletionBody(Body):
    """``POST /v1/chat/completions``: what clawd reads of it (the rest is the client's)."""

    model: StrictStr
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool | None = False
    user: StrictStr | None = None
    metadata: dict[str, Any] | None = None


B = TypeVar("B", bound=Body)


def parse(model: type[B], raw: bytes) -> B:
    """``raw`` as a ``model``, or a one-line ``BadRequest``."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise BadRequest(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """The first problem of a validation error, in one line."""
    error = exc.errors(include_url=False, include_input=False)[0]
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "json_invalid":
        return f"the body is not JSON: {message.removeprefix('Invalid JSON: ')}"
    where = ".".join(str(part) for part in error.get("loc", ()))
    if error.get("type") == "missing":
        return f"the body has no {where}"
    return f"{where}: {message}" if where else f"the body {message}"
