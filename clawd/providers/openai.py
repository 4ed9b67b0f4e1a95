"""The OpenAI Chat Completions adapter, also used for OpenAI-compatible servers.

``OpenAIProvider`` turns a provider-neutral ``ModelRequest`` into a streamed Chat Completions
call: the system segments become one system message, tool calls become function calls with
JSON-string arguments and tool results become ``role: "tool"`` messages. Text deltas are
yielded as they arrive; tool-call fragments are stitched together by index; the usage chunk
requested with ``stream_options.include_usage`` fills ``Usage`` (cached prompt tokens count as
cache reads). The same class serves Ollama, vLLM, llama.cpp, OpenRouter and proxies through
``base_url``. The ``openai`` SDK is imported when a provider is built, and its types and
exceptions never leave this file. The request goes out through the client's ``post`` with
the body as built (``build_params`` makes plain JSON): ``chat.completions.create`` would walk
every message of a long history through its type-driven transform first, a fifth of a
turn's time in a worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from clawd.core.errors import ProviderError
from clawd.core.messages import (
    ImagePart,
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
    new_id,
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

# Error types an OpenAI-style server may report inside a stream that started with HTTP 200.
RETRYABLE_STREAM_ERRORS = frozenset({"server_error", "overloaded_error", "rate_limit_exceeded",
                                     "service_unavailable"})


class OpenAIProvider(SdkProvider):
    """A model served through Chat Completions (OpenAI or a compatible server).

    ``max_tokens_field`` names the output limit parameter: OpenAI's current models want
    ``max_completion_tokens``; many compatible servers only know ``max_tokens``.
    """

    api = "openai-completions"
    sdk = "openai"

    def __init__(self, model: str, *, name: str = "openai",
                 max_tokens_field: str = "max_completion_tokens", **options: Any):
        self.max_tokens_field = max_tokens_field
        super().__init__(model, name=name, **options)

    def _make_client(self, api_key: str, base_url: str | None,
                     headers: dict[str, str] | None, timeout: float) -> Any:
        import openai

        return openai.OpenAI(api_key=api_key, base_url=base_url, default_headers=headers,
                             max_retries=0, timeout=timeout)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(self.model, request, self.max_tokens_field)

    def _attempt(self, params: dict[str, Any]) -> Iterator[TextDelta | ModelResponse]:
        from openai import Stream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        reply = _Reply(self.model)
        chunks = self._client.post("/chat/completions", body={**params, "stream": True},
                                   cast_to=ChatCompletion, stream=True,
                                   stream_cls=Stream[ChatCompletionChunk],
                                   options={"security": {"bearer_auth": True}})
        try:
            for chunk in chunks:
                text = reply.feed(chunk)
                if text:
                    yield TextDelta(text)
        finally:
            chunks.close()
        if reply.finish is None:
            raise ProviderError(f"{self.name}: the stream ended before the reply was complete",
                                retryable=True)
        yield ModelResponse(reply.message())

    def _convert(self, exc: Exception) -> RetryInfo:
        import openai

        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            # LM Studio and Ollama may send {"error": "text"}: the SDK hands over the text
            message = body.get("message") or (exc.body if isinstance(exc.body, str)
                                              and exc.body.strip() else exc.message)
            kind = _kind(body)
            retry_after = parse_retry_after(exc.response.headers)
            should = (exc.response.headers.get("x-should-retry") or "").lower()
            retryable = should == "true" if should in ("true", "false") else None
            return RetryInfo(status_error(self.name, exc.status_code, str(message),
                                          kind=kind,
                                          retryable=retryable), retry_after)
        if isinstance(exc, openai.APITimeoutError):
            return RetryInfo(ProviderError(
                f"{self.name}: no reply within {self.timeout:g}s", retryable=True))
        if isinstance(exc, openai.APIConnectionError):
            return RetryInfo(transport_error(self.name, exc.__cause__ or exc,
                                             self._client.base_url))
        if isinstance(exc, openai.APIError):  # an error object sent inside the stream
            body = exc.body if isinstance(exc.body, dict) else {}
            kind = _kind(body)
            return RetryInfo(status_error(self.name, None, exc.message,
                                          kind=kind,
                                          retryable=kind in RETRYABLE_STREAM_ERRORS))
        return RetryInfo(transport_error(self.name, exc, self._client.base_url))


def _kind(body: dict[str, Any]) -> str | None:
    """The error's kind: its string ``code``, else its ``type`` (llama.cpp's ``code`` is the
    HTTP status, and its ``type`` says ``exceed_context_size_error``)."""
    code = body.get("code")
    kind = code if isinstance(code, str) and code else body.get("type")
    return str(kind) if kind else None


# --- request ---------------------------------------------------------------------------------

def build_params(model: str, request: ModelRequest,
                 max_tokens_field: str = "max_completion_tokens") -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` (without ``stream``)."""
    messages: list[dict[str, Any]] = []
    system = "\n\n".join(s for s in request.system if s.strip())
    if system:
        messages.append({"role": "system", "content": system})
    messages.extend(to_wire(request.messages))
    params: dict[str, Any] = {"model": model, "messages": messages,
                              max_tokens_field: request.max_tokens,
                              "stream_options": {"include_usage": True}}
    if request.tools:
        params["tools"] = [tool_param(spec) for spec in request.tools]
        if request.tool_choice == "none":
            params["tool_choice"] = "none"
    return params


def tool_param(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": spec.name, "description": spec.description,
        "parameters": spec.parameters or {"type": "object", "properties": {}}}}


def to_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """Chat Completions messages for a history (without the system message)."""
    out: list[dict[str, Any]] = []
    for message in pair_tool_calls(messages):
        if message.role == "toolResult":
            text = message.text or ("(no output)" if not _has_image(message) else "")
            if _has_image(message):
                # tool messages carry text only; say so rather than drop silently
                text = (text + "\n" if text else "") + "[image omitted]"
            if message.is_error:
                text = f"ERROR: {text}"
            out.append({"role": "tool", "tool_call_id": message.tool_call_id,
                        "content": text})
        elif message.role == "assistant":
            calls = [_call_param(call) for call in message.tool_calls]
            if not message.text and not calls:
                continue
            wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if calls:
                wire["tool_calls"] = calls
            out.append(wire)
        else:
            out.append({"role": "user", "content": _user_content(message)})
    return out


def _has_image(message: Message) -> bool:
    return any(isinstance(part, ImagePart) for part in message.content)


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not _has_image(message):
        return message.text
    parts: list[dict[str, Any]] = []
    for part in message.content:
        match part:
            case TextPart(text) if text:
                parts.append({"type": "text", "text": text})
            case ImagePart(data, mime) if data:
                url = f"data:{mime or 'image/png'};base64,{data}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _call_param(call: ToolCall) -> dict[str, Any]:
    args = call.arguments
    # Arguments the model sent as broken JSON go back exactly as it wrote them.
    if set(args) == {"_raw"} and isinstance(args["_raw"], str):
        text = args["_raw"]
    else:
        text = json.dumps(args, ensure_ascii=False)
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": text}}


# --- response --------------------------------------------------------------------------------

class _Reply:
    """Assembles streamed chunks into a ``Message``."""

    def __init__(self, model: str):
        self.model = model
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.usage = Usage()
        self.finish: str | None = None

    def feed(self, chunk: Any) -> str:
        """Take one chunk; return the text it adds."""
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._set_usage(usage)
        added = ""
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    added += delta.content
                for fragment in delta.tool_calls or []:
                    self._add_fragment(fragment)
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return added

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.index if fragment.index is not None else len(self.calls)
        slot = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if fragment.id:
            slot["id"] = fragment.id
        function = fragment.function
        if function is None:
            return
        if function.name and function.name != slot["name"]:
            slot["name"] += function.name
        if function.arguments:
            slot["arguments"] += function.arguments

    def _set_usage(self, usage: Any) -> None:
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details else 0
        self.usage = Usage(input_tokens=max(0, prompt - cached),
                           output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                           cache_read_tokens=cached)

    def message(self) -> Message:
        calls = [ToolCall(slot["id"] or f"call_{new_id()}", slot["name"],
                          parse_arguments(slot["arguments"]))
                 for _, slot in sorted(self.calls.items())]
        stop = stop_reason(self.finish)
        if calls and stop == "stop":
            stop = "toolUse"  # some compatible servers say "stop" even when calling tools
        return Message.assistant("".join(self.text), calls, usage=self.usage,
                                 stop_reason=stop, model=self.model)
