"""Why a remote server did not start, in words a person can act on.

The SDK says "Server returned an error response" for a refused key and for a URL that speaks
another transport alike. When a remote server fails to start, its URL is asked once more,
plainly (``httpx``, the headers it was given, a few seconds at most), and the answer named:
a refusal (401, 403: its headers), nothing there (404), or a URL that speaks only the legacy
SSE transport (a POST refused, a GET answered with an event stream): the connection tries
that transport next (``LEGACY_SSE`` is what is said when it failed too).
"""

from __future__ import annotations

from collections.abc import Mapping

PROBE_SECONDS = 5.0
LEGACY_SSE = ("this URL speaks only the legacy SSE transport (HTTP+SSE), and it did not start "
              "with that either")
_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "clawd", "version": "0"}}}


def explain(status: int, reason: str, server: str, event_stream: bool = False) -> str | None:
    """What an HTTP ``status`` to the POST of an ``initialize`` means (``event_stream``: a
    GET of the URL answered with ``text/event-stream``); None when it explains nothing."""
    said = f"HTTP {status} {reason}".strip()
    if status in (401, 403):
        return (f"the server refused the request ({said}): check mcp.servers.{server}.headers "
                f"(its key or token)")
    if status == 404:
        return f"there is no MCP endpoint at this URL ({said})"
    if status == 405 and event_stream:
        return LEGACY_SSE
    if status >= 400:
        return f"the server answered {said}"
    return None


async def probe(url: str, headers: Mapping[str, str], server: str) -> str | None:
    """Ask ``url`` plainly and say what its answer means (``explain``); None when it does
    not explain the failure (or cannot be asked)."""
    import httpx

    accept = {"Accept": "application/json, text/event-stream"}
    try:
        async with httpx.AsyncClient(timeout=PROBE_SECONDS, headers=dict(headers)) as http:
            answer = await http.post(url, json=_INITIALIZE, headers=accept)
            stream = False
            if answer.status_code == 405:
                async with http.stream("GET", url, headers={
                        "Accept": "text/event-stream"}) as got:
                    stream = got.headers.get("content-type", "").startswith(
                        "text/event-stream")
            return explain(answer.status_code, answer.reason_phrase, server, stream)
    except httpx.HTTPError as exc:
        return f"cannot reach it: {type(exc).__name__}: {exc}" if str(exc) else None
