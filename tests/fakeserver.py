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
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

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
