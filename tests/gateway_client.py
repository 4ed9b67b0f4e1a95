"""The gateway for tests: the app in-process over scripted runtimes, its SSE events, and
``clawd serve`` started as a process."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from clawd.config import Config
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app

from conftest import make_runtime

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "http://127.0.0.1:18789"


@contextmanager
def gateway(tmp_path: Path, provider, *, raw: dict | None = None, token: str | None = TOKEN,
            runtimes=None, settings: dict | None = None, people=None,
            more: dict | None = None) -> Iterator[TestClient]:
    """The gateway over a runtime of ``provider`` (or ``runtimes``); ``raw``: its
    ``gateway`` settings, ``more``: the config's other sections."""
    config = Config.model_validate({"gateway": {"idleSessionSeconds": 0,
                                                "shutdownGraceSeconds": 0, **(raw or {})},
                                    **(more or {})})
    runtimes = runtimes or [make_runtime(tmp_path, provider, settings=settings)]
    with TestClient(served_app(config, runtimes, token, people), base_url=BASE) as client:
        yield client


def served_app(config: Config, runtimes: list, token: str | None, people=None):
    """The gateway over ``runtimes`` (and ``people``, a ``storage.people`` store); under
    ``two_workers``, two workers on the runtimes' database taking the requests in turn
    (``Alternating``), as a load balancer would."""
    if os.environ.get(WORKERS_ENV) != "two":
        return create_app(config, ServedAgents.of_runtimes(runtimes, config, people), token)
    from clawd.storage.postgres import Database

    url = runtimes[0].storage.db.url
    config = config.model_copy(update={"storage": config.storage.model_copy(
        update={"url": url})})
    second = [dataclasses.replace(r, storage=Database(url).agent(r.agent_id)) for r in runtimes]
    return Alternating([create_app(config, ServedAgents.of_runtimes(rs, config, people), token)
                        for rs in (runtimes, second)])


WORKERS_ENV = "CLAWD_TEST_GATEWAY"


class Alternating:
    """Several gateway workers behind one address: each HTTP request goes to the next
    worker in turn; the lifespan starts and stops them all."""

    def __init__(self, apps: list):
        self.apps, self.sent = apps, 0

    @property
    def state(self):
        """The first worker's (``server`` stops through its hub)."""
        return self.apps[0].state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        app = self.apps[self.sent % len(self.apps)]
        self.sent += 1
        await app(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        from contextlib import AsyncExitStack

        await receive()  # startup
        async with AsyncExitStack() as stack:
            for app in self.apps:
                await stack.enter_async_context(app.router.lifespan_context(app))
            await send({"type": "lifespan.startup.complete"})
            await receive()  # shutdown
        await send({"type": "lifespan.shutdown.complete"})


def events(response) -> list[dict]:
    """The JSON of each SSE ``data:`` line."""
    return [json.loads(line[6:]) for line in response.text.splitlines()
            if line.startswith("data: ")]


def send(client: TestClient, text: str, key: str = "main", **headers) -> list[dict]:
    response = client.post(f"/api/sessions/{key}/messages", json={"text": text},
                           headers={**AUTH, **headers})
    assert response.status_code == 200, response.text
    return events(response)


def page_turn(client: TestClient, text: str, answers: Callable[[dict], list[dict]], *,
              by: TestClient | None = None, key: str = "main"
              ) -> tuple[str, list[dict], list[httpx.Response]]:
    """Send ``text`` as the web page does (``approvals: true``) and follow its events; each
    ``approval`` or ``question`` line is answered with the bodies ``answers(line)`` gives,
    posted in order (through ``by``, another worker's client, when given). The turn's id,
    its lines and the answers' responses."""
    lines: list[dict] = []
    said: list[httpx.Response] = []
    with client.stream("POST", f"/api/sessions/{key}/messages", json={
            "text": text, "approvals": True},
            headers={**AUTH, "Accept": "text/event-stream"}) as stream:
        turn = stream.headers["X-Clawd-Turn-Id"]
        for raw in stream.iter_lines():
            if not raw.startswith("data:"):
                continue
            lines.append(json.loads(raw[5:]))
            if lines[-1]["type"] in ("approval", "question"):
                path = f"/api/turns/{turn}/approvals/{lines[-1]['id']}"
                said += [(by or client).post(path, headers=AUTH, json=body)
                         for body in answers(lines[-1])]
            if lines[-1]["type"] == "done":
                break
    return turn, lines, said


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Drained(subprocess.Popen):
    """A process whose output is read as it runs, so a server that logs every request never
    blocks on a full pipe; ``communicate`` gives what it wrote."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.said: tuple[list[str], list[str]] = ([], [])
        self.readers = [threading.Thread(target=into.extend, args=(pipe,), daemon=True)
                         for pipe, into in zip((self.stdout, self.stderr), self.said)
                         if pipe is not None]
        for reader in self.readers:
            reader.start()

    def communicate(self, input=None, timeout=None):  # noqa: A002 - Popen's own name
        self.wait(timeout)
        for reader in self.readers:
            reader.join(10)
        return "".join(self.said[0]), "".join(self.said[1])


def start_serve(env: dict[str, str], port: int, more: list[str] | None = None
                ) -> tuple[subprocess.Popen, str]:
    """``clawd serve`` (with ``more`` options) as a process with ``env``, once its health
    check answers on ``port``: the process and its URL."""
    child = Drained([sys.executable, "-m", "clawd", "serve", *(more or [])], env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return child, url
        except httpx.HTTPError:
            time.sleep(0.05)
        if child.poll() is not None:
            break
    child.kill()
    raise AssertionError(f"clawd serve did not start: {child.communicate()}")
