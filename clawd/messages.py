"""Provider-neutral conversation data: messages, content blocks, tool calls, usage, requests.

A message's ``content`` is a list of blocks, each a small dict with a ``type``:
``{"type": "text", "text": ...}``, ``{"type": "toolCall", "id", "name", "arguments"}`` (in
assistant messages) and ``{"type": "image", "mimeType", "data"}``. The same shape is written
to the transcript, so a message round-trips through JSON unchanged. Provider adapters
translate to and from their wire formats; nothing above ``providers/`` sees SDK types.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


def new_id() -> str:
    """A short random id for transcript entries."""
    return uuid.uuid4().hex[:12]


def parse_iso(stamp: Any) -> datetime | None:
    """A timestamp written by ``now_iso`` (or any ISO-8601 string); None when unreadable."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


def now_iso() -> str:
    """The current UTC time as an ISO-8601 string with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Usage:
    """Token usage of one model call as the provider reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: fresh input plus cache reads and writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)

    def to_json(self) -> dict[str, int]:
        return {"input": self.input_tokens, "output": self.output_tokens,
                "cacheRead": self.cache_read_tokens, "cacheWrite": self.cache_write_tokens}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Usage | None:
        """The usage recorded in a transcript; None when absent or not token counts (the
        message is kept, its usage ignored)."""
        if not isinstance(data, dict):
            return None
        values = [data.get(name, 0) for name in ("input", "output", "cacheRead", "cacheWrite")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            return None
        return cls(*values)


@dataclass(slots=True)
class ToolCall:
    """A request from the model to run one tool."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Message:
    """One conversation message: ``user``, ``assistant`` or ``toolResult``."""

    role: str
    content: list[dict[str, Any]]
    id: str = field(default_factory=new_id)
    timestamp: str = field(default_factory=now_iso)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    usage: Usage | None = None
    stop_reason: str | None = None
    model: str | None = None
    flush: bool = False
    aborted: bool = False
    # a blank answer to a user turn that was asked again: kept on disk, out of the history
    retried: bool = False
    # a user message too large for the window: kept on disk, never sent
    refused: bool = False

    @classmethod
    def user(cls, text: str, **kw: Any) -> Message:
        return cls("user", [{"type": "text", "text": text}], **kw)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCall] | None = None,
                  **kw: Any) -> Message:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for call in tool_calls or []:
            blocks.append({"type": "toolCall", "id": call.id, "name": call.name,
                           "arguments": call.arguments})
        return cls("assistant", blocks, **kw)

    @classmethod
    def tool_result(cls, call: ToolCall, text: str, is_error: bool = False,
                    **kw: Any) -> Message:
        return cls("toolResult", [{"type": "text", "text": text}], tool_call_id=call.id,
                   tool_name=call.name, is_error=is_error, **kw)

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(b["id"], b["name"], b.get("arguments") or {})
                for b in self.content if b.get("type") == "toolCall"]

    def to_entry(self) -> dict[str, Any]:
        """The transcript line for this message."""
        entry: dict[str, Any] = {"type": "message", "id": self.id, "timestamp": self.timestamp,
                                 "role": self.role, "content": self.content}
        if self.tool_call_id is not None:
            entry["toolCallId"] = self.tool_call_id
            entry["toolName"] = self.tool_name
            entry["isError"] = self.is_error
        if self.usage is not None:
            entry["usage"] = self.usage.to_json()
        for key, value in (("stopReason", self.stop_reason), ("model", self.model)):
            if value is not None:
                entry[key] = value
        if self.flush:
            entry["flush"] = True
        if self.aborted:
            entry["aborted"] = True
        if self.retried:
            entry["retried"] = True
        if self.refused:
            entry["refused"] = True
        return entry

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Message:
        content = entry.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or entry.get("role") not in ROLES:
            raise ValueError("not a message entry")
        bad = next((b for b in content if not _valid_block(b)), None)
        if bad is not None:  # the whole line is reported and skipped, never half-read
            raise ValueError(f"a malformed content block: {str(bad)[:60]}")
        return cls(entry["role"], content, id=str(entry.get("id") or new_id()),
                   timestamp=str(entry.get("timestamp") or ""),
                   tool_call_id=_str_or_none(entry.get("toolCallId")),
                   tool_name=_str_or_none(entry.get("toolName")),
                   is_error=bool(entry.get("isError", False)),
                   usage=Usage.from_json(entry.get("usage")),
                   stop_reason=_str_or_none(entry.get("stopReason")),
                   model=_str_or_none(entry.get("model")),
                   flush=bool(entry.get("flush", False)),
                   aborted=bool(entry.get("aborted", False)),
                   retried=bool(entry.get("retried", False)),
                   refused=bool(entry.get("refused", False)))


ROLES = ("user", "assistant", "toolResult")


def _valid_block(block: Any) -> bool:
    """A content block the providers and the token estimates can use."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind == "text":
        return isinstance(block.get("text"), str)
    if kind == "toolCall":
        return (isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
                and isinstance(block.get("arguments", {}), dict))
    return isinstance(kind, str)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(slots=True)
class ToolSpec:
    """What the model is told about one tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    """One call to a model.

    ``system`` is a list of segments (the system prompt, then the project context); adapters
    that support prompt caching put a cache breakpoint after the last segment and on the
    newest message when ``cache`` is true. ``tool_choice`` ``"none"``: the tools are
    described (the history may hold tool calls) but the model must answer in words.
    """

    system: list[str]
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    cache: bool = False
    tool_choice: str = "auto"


@dataclass(slots=True)
class TextDelta:
    """A piece of streamed assistant text."""

    text: str


@dataclass(slots=True)
class ModelResponse:
    """The end of a streamed call: the complete assistant message (with usage, stop reason)."""

    message: Message
