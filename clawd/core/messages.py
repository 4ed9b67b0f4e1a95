"""Provider-neutral conversation data: messages, typed content parts, usage, requests.

A message's ``content`` is a list of typed parts, a closed union (``Part``): ``TextPart``,
``ToolCall`` (in assistant messages), ``ImagePart`` and ``OtherPart`` (a block of a kind clawd
does not use, kept as it was read and never sent). Code dispatches on the part's class
(``match``/``isinstance``), never on strings. ``part_from_json``/``part_to_json`` are the one
place that converts parts to and from the transcript's JSON blocks (``{"type": "text", "text":
...}``, ``{"type": "toolCall", "id", "name", "arguments"}``, ``{"type": "image", "mimeType",
"data"}``), so a message round-trips unchanged. Provider adapters translate parts to and from
their wire formats; nothing above ``providers/`` sees SDK types.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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


def shown_time(stamp: Any) -> str:
    """A timestamp as clawd shows it everywhere (``/status``, ``sessions``, export, saved
    sessions): local time to the minute, ``2026-11-22 10:03``; ``?`` when unreadable."""
    parsed = parse_iso(stamp)
    return parsed.astimezone().strftime("%Y-%m-%d %H:%M") if parsed else "?"


def utc_iso(stamp: Any) -> str | None:
    """A timestamp in one form, UTC with milliseconds and ``Z`` (as ``now_iso`` writes);
    None when unreadable. Transcripts say ``Z``, the session store the local offset."""
    parsed = parse_iso(stamp)
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # a stamp without an offset is local time
    return (parsed.astimezone(timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"))


def now_iso() -> str:
    """The current UTC time as an ISO-8601 string with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_clock(clock: Callable[[], datetime]) -> Callable[[], str]:
    """``clock``'s time as an ISO-8601 string with milliseconds (a store's timestamps)."""
    return lambda: clock().isoformat(timespec="milliseconds")


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


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text written by the user, the model or a tool."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A request from the model to run one tool (a part of an assistant message)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, base64-encoded."""

    data: str
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class OtherPart:
    """A content block of a kind clawd does not use (from a hand edit or another tool):
    kept as it was read, counted in the context, never sent."""

    block: dict[str, Any]


Part = TextPart | ToolCall | ImagePart | OtherPart


def part_from_json(block: Any) -> Part:
    """The part a transcript block holds; ``ValueError`` when it is malformed."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise ValueError(f"a malformed content block: {str(block)[:60]}")
    kind = block["type"]
    if kind == "text" and isinstance(block.get("text"), str):
        return TextPart(block["text"])
    if (kind == "toolCall" and isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("arguments", {}), dict)):
        return ToolCall(block["id"], block["name"], block.get("arguments") or {})
    if kind == "image":
        data, mime = block.get("data"), block.get("mimeType")
        return ImagePart(data if isinstance(data, str) else "",
                         mime if isinstance(mime, str) else None)
    if kind in ("text", "toolCall"):
        raise ValueError(f"a malformed content block: {str(block)[:60]}")
    return OtherPart(block)


def part_to_json(part: Part) -> dict[str, Any]:
    """The transcript block of a part (``part_from_json`` reads it back)."""
    match part:
        case TextPart(text):
            return {"type": "text", "text": text}
        case ToolCall(id, name, arguments):
            return {"type": "toolCall", "id": id, "name": name, "arguments": arguments}
        case ImagePart(data, mime):
            return {"type": "image", "data": data,
                    **({"mimeType": mime} if mime is not None else {})}
        case OtherPart(block):
            return block
    raise TypeError(f"not a content part: {part!r}")


@dataclass(slots=True)
class Message:
    """One conversation message: ``user``, ``assistant`` or ``toolResult``."""

    role: str
    content: list[Part]
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
    # who sent a message that no person typed (a scheduled job, the heartbeat):
    # ``{"kind": "job"|"heartbeat", "jobId", "scheduledFor", "remember"}``; its turn is
    # kept out of memory unless ``remember`` (``automated_turns``)
    origin: dict[str, Any] | None = None

    @classmethod
    def user(cls, text: str, **kw: Any) -> Message:
        return cls("user", [TextPart(text)], **kw)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCall] | None = None,
                  **kw: Any) -> Message:
        parts: list[Part] = [TextPart(text)] if text else []
        return cls("assistant", [*parts, *(tool_calls or [])], **kw)

    @classmethod
    def tool_result(cls, call: ToolCall, text: str, is_error: bool = False,
                    **kw: Any) -> Message:
        return cls("toolResult", [TextPart(text)], tool_call_id=call.id,
                   tool_name=call.name, is_error=is_error, **kw)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.content if isinstance(p, ToolCall)]

    def with_lead(self, lead: Callable[[str], str]) -> Message:
        """A copy whose leading text is ``lead`` of it (of "" in a new text part, when the
        message does not start with text): what the runtime puts in front of a message in
        one request only, never in the transcript."""
        first, rest = (self.content[0], self.content[1:]) if self.content else (None, [])
        if isinstance(first, TextPart):
            return replace(self, content=[TextPart(lead(first.text)), *rest])
        return replace(self, content=[TextPart(lead("")), *self.content])

    def to_entry(self) -> dict[str, Any]:
        """The transcript line for this message."""
        entry: dict[str, Any] = {"type": "message", "id": self.id, "timestamp": self.timestamp,
                                 "role": self.role,
                                 "content": [part_to_json(p) for p in self.content]}
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
        if self.origin:
            entry["origin"] = self.origin
        return entry

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Message:
        content = entry.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or entry.get("role") not in ROLES:
            raise ValueError("not a message entry")
        # a malformed block raises: the whole line is reported and skipped, never half-read
        parts = [part_from_json(block) for block in content]
        return cls(entry["role"], parts, id=str(entry.get("id") or new_id()),
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
                   refused=bool(entry.get("refused", False)),
                   origin=entry["origin"] if isinstance(entry.get("origin"), dict) else None)


def automated_turns(messages: list[Message]) -> set[str]:
    """The ids of the messages of turns automation started (a user message with an
    ``origin`` that does not say ``remember``) and of everything answering them, up to the
    next user message: what consolidation and the memory flush leave out."""
    found: set[str] = set()
    inside = False
    for message in messages:
        if message.role == "user":
            inside = bool(message.origin) and not (message.origin or {}).get("remember")
        if inside:
            found.add(message.id)
    return found


def without_automated(messages: list[Message]) -> list[Message]:
    """``messages`` less the turns automation started (``automated_turns``)."""
    automated = automated_turns(messages)
    return [m for m in messages if m.id not in automated]


ROLES = ("user", "assistant", "toolResult")


def answered_calls(messages: list[Message]) -> list[tuple[ToolCall, Message]]:
    """Each tool call of the assistant messages in ``messages``, in order, with the
    ``toolResult`` that answered it (a call not answered there is left out)."""
    results = {m.tool_call_id: m for m in messages if m.role == "toolResult"}
    return [(call, results[call.id]) for m in messages if m.role == "assistant"
            for call in m.tool_calls if call.id in results]


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(slots=True)
class ToolSpec:
    """What the model is told about one tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    origin: str = ""  # "": built in; else the MCP server it comes from


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
