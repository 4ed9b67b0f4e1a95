"""The Anthropic Messages API adapter: streaming, tool calls, prompt caching, retries.

``AnthropicProvider`` turns a provider-neutral ``ModelRequest`` into a Messages API call
(system segments as text blocks, tool results grouped into user turns of ``tool_result``
blocks), streams text deltas back as they arrive and ends with one ``ModelResponse``. With
``request.cache`` the system prefix and the newest message carry ``cache_control``
breakpoints, so the stable prefix and the growing history are both served from the prompt
cache. The ``anthropic`` SDK is imported when a provider is built, never at module import,
and none of its types leave this file: failures become ``ProviderError`` /
``ContextOverflowError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from clawd.core.errors import ProviderError
from clawd.core.messages import (
    ImagePart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    TextDelta,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from clawd.providers.common import (
    RetryInfo,
    SdkProvider,
    pair_tool_calls,
    parse_arguments,
    parse_retry_after,
    status_error,
    stop_reason,
    transport_error,
)

CACHE_CONTROL = {"type": "ephemeral"}
# Error types Anthropic sends inside a stream that has already started with HTTP 200.
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


class AnthropicProvider(SdkProvider):
    """A model served through the Anthropic Messages API (or a server speaking it)."""

    api = "anthropic-messages"
    sdk = "anthropic"

    def __init__(self, model: str, *, name: str = "anthropic", **options: Any):
        super().__init__(model, name=name, **options)

    def _make_client(self, api_key: str, base_url: str | None,
                     headers: dict[str, str] | None, timeout: float) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key=api_key, base_url=base_url, default_headers=headers,
                                   max_retries=0, timeout=timeout)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(self.model, request)

    def _attempt(self, params: dict[str, Any]) -> Iterator[TextDelta | ModelResponse]:
        reply = _Reply(self.model)
        events = self._client.messages.create(**params, stream=True)
        try:
            for event in events:
                text = reply.feed(event)
                if text:
                    yield TextDelta(text)
        finally:
            events.close()
        if not reply.complete:
            raise ProviderError(f"{self.name}: the stream ended before the reply was complete",
                                retryable=True)
        yield ModelResponse(reply.message())

    def _convert(self, exc: Exception) -> RetryInfo:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError):
            error = exc.body.get("error") if isinstance(exc.body, dict) else None
            kind = error.get("type") if isinstance(error, dict) else None
            message = (error.get("message") if isinstance(error, dict) else None) or exc.message
            headers = exc.response.headers
            status: int | None = exc.status_code
            retryable: bool | None = None
            if status == 200:  # an error event inside a stream that started fine
                status, retryable = None, kind in RETRYABLE_STREAM_ERRORS
            should = (headers.get("x-should-retry") or "").lower()
            if should in ("true", "false"):
                retryable = should == "true"
            return RetryInfo(status_error(self.name, status, message, kind=kind,
                                          retryable=retryable), parse_retry_after(headers))
        if isinstance(exc, anthropic.APITimeoutError):
            return RetryInfo(ProviderError(
                f"{self.name}: no reply within {self.timeout:g}s", retryable=True))
        if isinstance(exc, anthropic.APIConnectionError):
            return RetryInfo(transport_error(self.name, exc.__cause__ or exc,
                                             self._client.base_url))
        return RetryInfo(transport_error(self.name, exc, self._client.base_url))


# --- request ---------------------------------------------------------------------------------

def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (without ``stream``)."""
    system: list[dict[str, Any]] = [{"type": "text", "text": s} for s in request.system
                                    if s.strip()]
    messages = to_wire(request.messages)
    if request.cache:
        if system:
            system[-1]["cache_control"] = dict(CACHE_CONTROL)
        if messages:
            messages[-1]["content"][-1]["cache_control"] = dict(CACHE_CONTROL)
    params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens,
                              "messages": messages}
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [tool_param(spec) for spec in request.tools]
        if request.tool_choice == "none":
            params["tool_choice"] = {"type": "none"}
    return params


def tool_param(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description,
            "input_schema": spec.parameters or {"type": "object", "properties": {}}}


def to_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """Anthropic messages: alternating roles, tool results as user-turn ``tool_result`` blocks.

    Consecutive messages of one role are merged into one turn, which groups a run of tool
    results (parallel tool calls) into the single user message the API expects.
    """
    out: list[dict[str, Any]] = []
    for message in pair_tool_calls(messages):
        if message.role == "toolResult":
            role, blocks = "user", [_tool_result(message)]
        elif message.role == "assistant":
            role, blocks = "assistant", _content_blocks(message.content)
        else:
            role, blocks = "user", _content_blocks(message.content)
        if not blocks:
            continue  # the API rejects empty turns (e.g. an aborted reply with no text)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _content_blocks(content: list[Part]) -> list[dict[str, Any]]:
    """The wire blocks of a message's parts (tool calls as ``tool_use``; parts of kinds
    clawd does not use are not sent)."""
    blocks: list[dict[str, Any]] = []
    for part in content:
        match part:
            case TextPart(text) if text:
                blocks.append({"type": "text", "text": text})
            case ImagePart(data, mime) if data:
                blocks.append({"type": "image", "source": {
                    "type": "base64", "media_type": mime or "image/png", "data": data}})
            case ToolCall(call_id, name, arguments):
                blocks.append({"type": "tool_use", "id": call_id, "name": name,
                               "input": arguments})
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = _content_blocks(message.content)
    if content:
        block["content"] = content
    if message.is_error:
        block["is_error"] = True
    return block


# --- response --------------------------------------------------------------------------------

class _Reply:
    """Assembles the streamed events of one reply into a ``Message``."""

    def __init__(self, model: str):
        self.model = model
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop: str | None = None
        self.complete = False

    def feed(self, event: Any) -> str:
        """Take one stream event; return the text it adds (empty for other events)."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.model = event.message.model or self.model
            self._add_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                self.blocks[event.index] = {"type": "text", "text": block.text or ""}
                return block.text or ""
            if block.type == "tool_use":
                self.blocks[event.index] = {"type": "toolCall", "id": block.id,
                                            "name": block.name, "json": "",
                                            "input": block.input or {}}
        elif kind == "content_block_delta":
            block = self.blocks.get(event.index)
            delta = event.delta
            if block is None:
                return ""
            if delta.type == "text_delta" and block["type"] == "text":
                block["text"] += delta.text
                return delta.text
            if delta.type == "input_json_delta" and block["type"] == "toolCall":
                block["json"] += delta.partial_json or ""
        elif kind == "message_delta":
            self.stop = event.delta.stop_reason or self.stop
            self._add_usage(event.usage)
        elif kind == "message_stop":
            self.complete = True
        return ""

    def _add_usage(self, usage: Any) -> None:
        # message_delta counts are cumulative, so later values replace earlier ones.
        if usage is None:
            return
        for ours, theirs in (("input_tokens", "input_tokens"),
                             ("output_tokens", "output_tokens"),
                             ("cache_read_tokens", "cache_read_input_tokens"),
                             ("cache_write_tokens", "cache_creation_input_tokens")):
            value = getattr(usage, theirs, None)
            if value is not None:
                setattr(self.usage, ours, int(value))

    def message(self) -> Message:
        content: list[Part] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block["type"] == "text":
                if block["text"]:
                    content.append(TextPart(block["text"]))
                continue
            arguments = parse_arguments(block["json"]) if block["json"].strip() \
                else dict(block["input"])
            content.append(ToolCall(block["id"], block["name"], arguments))
        return Message("assistant", content, usage=self.usage, stop_reason=stop_reason(self.stop),
                       model=self.model)

