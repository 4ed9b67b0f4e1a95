"""A small HTTP server on 127.0.0.1 for tests: scripted responses per route, requests recorded.

Register a handler per (method, path); a handler receives the parsed ``Request`` and returns
a ``Response`` (status, headers, body as bytes or an iterable of byte chunks for streaming).
Queued handlers are used once each, in order; a default handler answers when the queue for a
route is empty. Every request is recorded in ``server.requests``.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None):
        return cls(status, json.dumps(data).encode(),
                   {"content-type": "application/json", **(headers or {})})


Handler = Callable[[Request], Response]


class FakeServer:
    """A threaded HTTP server answering from per-route queues."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._queues: dict[tuple[str, str], deque[Handler]] = defaultdict(deque)
        self._defaults: dict[tuple[str, str], Handler] = {}
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                request = Request(self.command, path, {k.lower(): v for k, v in
                                                       self.headers.items()}, body)
                server.requests.append(request)
                handler = server._next(self.command, path)
                if handler is None:
                    response = Response.json({"error": {"message": f"no route {path}"}}, 404)
                else:
                    response = handler(request)
                self._write(response)

            def _write(self, response: Response) -> None:
                self.send_response(response.status)
                for key, value in response.headers.items():
                    self.send_header(key, value)
                if isinstance(response.body, bytes):
                    self.send_header("content-length", str(len(response.body)))
                    self.end_headers()
                    self.wfile.write(response.body)
                    return
                # streamed: close the connection at the end instead of chunked framing
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in response.body:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        # a short poll interval keeps shutdown (once per test) quick
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, method: str, path: str, *handlers: Handler) -> None:
        self._queues[(method, path)].extend(handlers)

    def default(self, method: str, path: str, handler: Handler) -> None:
        self._defaults[(method, path)] = handler

    def _next(self, method: str, path: str) -> Handler | None:
        queue = self._queues.get((method, path))
        if queue:
            return queue.popleft()
        return self._defaults.get((method, path))

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# --- realistic provider responses ---------------------------------------------------------
#
# The builders below speak the providers' real wire formats, so the real SDKs parse them:
# Anthropic Messages server-sent events, OpenAI Chat Completions chunks, and each provider's
# error JSON. ``cut_after`` ends a streamed body early while the declared content-length
# promises more, which the HTTP client sees as a connection dropped mid-reply.

def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _split(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] if text else []


def anthropic_events(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                     usage: dict[str, int] | None = None, stop_reason: str | None = None,
                     model: str = "claude-test-1", chunk: int = 5) -> list[bytes]:
    """The SSE events of one streamed Anthropic message.

    ``tool_calls`` are ``{"id", "name", "arguments"}`` dicts (``arguments`` a dict, or a
    string sent verbatim as the partial JSON). ``usage`` may hold ``input_tokens``,
    ``output_tokens``, ``cache_read_input_tokens`` and ``cache_creation_input_tokens``.
    """
    tool_calls = tool_calls or []
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, **(usage or {})}
    stop_reason = stop_reason or ("tool_use" if tool_calls else "end_turn")
    start_usage = {**usage, "output_tokens": 1}
    events = [sse("message_start", {"type": "message_start", "message": {
        "id": "msg_01TestMessage", "type": "message", "role": "assistant", "content": [],
        "model": model, "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    index = 0
    if text:
        events.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                                                  "content_block": {"type": "text", "text": ""}}))
        events.append(sse("ping", {"type": "ping"}))
        for piece in _split(text, chunk):
            events.append(sse("content_block_delta", {
                "type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": piece}}))
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for call in tool_calls:
        args = call.get("arguments", {})
        raw = args if isinstance(args, str) else json.dumps(args)
        events.append(sse("content_block_start", {
            "type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": call["id"], "name": call["name"],
                              "input": {}}}))
        for piece in [""] + _split(raw, 7):
            events.append(sse("content_block_delta", {
                "type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(sse("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events


def anthropic_stream(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                     cut_after: int | None = None, **kw: Any) -> Response:
    """A streamed Anthropic Messages response (see ``anthropic_events``)."""
    return stream_response(anthropic_events(text, tool_calls, **kw), cut_after=cut_after)


def anthropic_message(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                      usage: dict[str, int] | None = None, stop_reason: str | None = None,
                      model: str = "claude-test-1") -> Response:
    """A non-streamed Anthropic Messages response."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in tool_calls or []:
        content.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                        "input": call.get("arguments", {})})
    return Response.json({
        "id": "msg_01TestMessage", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_sequence": None,
        "stop_reason": stop_reason or ("tool_use" if tool_calls else "end_turn"),
        "usage": {"input_tokens": 10, "output_tokens": 5, **(usage or {})}})


def anthropic_error(status: int, message: str, error_type: str | None = None,
                    headers: dict[str, str] | None = None) -> Response:
    """An Anthropic error response: ``{"type": "error", "error": {"type", "message"}}``."""
    error_type = error_type or {400: "invalid_request_error", 401: "authentication_error",
                                403: "permission_error", 404: "not_found_error",
                                413: "request_too_large", 429: "rate_limit_error",
                                529: "overloaded_error"}.get(status, "api_error")
    return Response.json({"type": "error", "error": {"type": error_type, "message": message},
                          "request_id": "req_test"}, status, headers)


def anthropic_stream_error(error_type: str = "overloaded_error", message: str = "Overloaded"
                           ) -> bytes:
    """An ``error`` event as Anthropic sends it inside an open stream."""
    return sse("error", {"type": "error", "error": {"type": error_type, "message": message}})


def openai_chunks(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                  usage: dict[str, int] | None = None, finish_reason: str | None = None,
                  model: str = "gpt-test", chunk: int = 5) -> list[bytes]:
    """The SSE chunks of one streamed Chat Completions reply, ending with usage and [DONE].

    ``tool_calls`` are ``{"id", "name", "arguments"}`` dicts; arguments are sent as a JSON
    string split across several chunks (a string is sent verbatim). ``usage`` may hold
    ``prompt_tokens``, ``completion_tokens`` and ``cached_tokens``.
    """
    tool_calls = tool_calls or []
    finish_reason = finish_reason or ("tool_calls" if tool_calls else "stop")

    def chunk_of(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(None, {"id": "chatcmpl-test", "object": "chat.completion.chunk",
                          "created": 1700000000, "model": model,
                          "system_fingerprint": "fp_test", "usage": None,
                          "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                       "finish_reason": finish}]})

    chunks = [chunk_of({"role": "assistant", "content": "", "refusal": None})]
    for piece in _split(text, chunk):
        chunks.append(chunk_of({"content": piece}))
    for i, call in enumerate(tool_calls):
        args = call.get("arguments", {})
        raw = args if isinstance(args, str) else json.dumps(args)
        chunks.append(chunk_of({"tool_calls": [{
            "index": i, "id": call["id"], "type": "function",
            "function": {"name": call["name"], "arguments": ""}}]}))
        for piece in _split(raw, 6):
            chunks.append(chunk_of({"tool_calls": [{"index": i,
                                                    "function": {"arguments": piece}}]}))
    chunks.append(chunk_of({}, finish_reason))
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 0, **(usage or {})}
    chunks.append(sse(None, {
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
        "model": model, "choices": [], "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"],
                                      "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}}))
    chunks.append(sse(None, "[DONE]"))
    return chunks


def openai_stream(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                  cut_after: int | None = None, **kw: Any) -> Response:
    """A streamed Chat Completions response (see ``openai_chunks``)."""
    return stream_response(openai_chunks(text, tool_calls, **kw), cut_after=cut_after)


def openai_completion(text: str = "", tool_calls: list[dict[str, Any]] | None = None, *,
                      usage: dict[str, int] | None = None, finish_reason: str | None = None,
                      model: str = "gpt-test") -> Response:
    """A non-streamed Chat Completions response."""
    calls = [{"id": c["id"], "type": "function",
              "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
             for c in tool_calls or []]
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    usage = {"prompt_tokens": 10, "completion_tokens": 5, **(usage or {})}
    return Response.json({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000,
        "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                     "finish_reason": finish_reason or
                                     ("tool_calls" if calls else "stop")}],
        "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}})


def openai_error(status: int, message: str, code: str | None = None,
                 error_type: str | None = None, headers: dict[str, str] | None = None
                 ) -> Response:
    """An OpenAI error response: ``{"error": {"message", "type", "param", "code"}}``."""
    error_type = error_type or {429: "requests"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error")
    return Response.json({"error": {"message": message, "type": error_type, "param": None,
                                    "code": code}}, status, headers)


def stream_response(events: list[bytes], *, cut_after: int | None = None) -> Response:
    """An ``text/event-stream`` response of ``events``.

    With ``cut_after=n`` only the first ``n`` events are sent and the connection closes
    while the declared content-length still promises the rest: a reply dying mid-stream.
    """
    headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
    if cut_after is None:
        return Response(200, iter(events), headers)
    headers["content-length"] = str(sum(len(e) for e in events))
    return Response(200, iter(events[:cut_after]), headers)
