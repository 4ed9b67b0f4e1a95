"""The least a server can do for ``bench_hosted.py``'s mixed traffic: its ceiling here.

A one-process Starlette app on uvicorn (clawd's own HTTP stack) that answers the two routes
the mixed traffic sends, ``POST /api/sessions/{key}/messages`` and ``POST
/v1/chat/completions`` (``X-Clawd-Session-Key``), by running each session's turns in arrival
order (one ``asyncio.Lock`` a session, which is first come first served) and asking the
model once a turn; and ``GET /api/sessions/{key}/history`` for the benchmark's tally. No
context, no store, no tokens, no checks: what a turn costs here is the model's time and
the HTTP around it, so the turns/s it carries on a machine is the most any server could
carry there with the same clients and the same model.

    python scripts/hosted_ceiling.py PORT MODEL_URL
"""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def app_for(model_url: str) -> Starlette:
    locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
    said: defaultdict[str, list[dict[str, str]]] = defaultdict(list)
    model = httpx.AsyncClient(base_url=model_url, timeout=60,
                              limits=httpx.Limits(max_connections=200))

    async def turn(key: str, text: str) -> str:
        async with locks[key]:
            said[key].append({"type": "user", "text": text})
            got = await model.post("/v1/chat/completions", json={
                "model": "qwen", "messages": [{"role": "user", "content": text}]})
            reply = got.json()["choices"][0]["message"]["content"]
            said[key].append({"type": "assistant", "text": reply})
            return reply

    async def native(request: Request) -> JSONResponse:
        text = (await request.json())["text"]
        reply = await turn(request.path_params["key"], text)
        return JSONResponse({"events": [{"type": "reply", "text": reply}]})

    async def completions(request: Request) -> JSONResponse:
        text = (await request.json())["messages"][-1]["content"]
        reply = await turn(request.headers["x-clawd-session-key"], text)
        return JSONResponse({"object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply},
             "finish_reason": "stop"}]})

    async def history(request: Request) -> JSONResponse:
        return JSONResponse({"items": said[request.path_params["key"]]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(routes=[
        Route("/api/sessions/{key}/messages", native, methods=["POST"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/api/sessions/{key}/history", history),
        Route("/health", health)])


def main() -> int:
    port, model_url = int(sys.argv[1]), sys.argv[2]
    uvicorn.run(app_for(model_url), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
