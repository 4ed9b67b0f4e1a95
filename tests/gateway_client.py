"""The gateway for tests: the app in-process over scripted runtimes, its SSE events, and
``clawd serve`` started as a process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from clawd.config import Config
from clawd.frontends.gateway.agents import Agents
from clawd.frontends.gateway.app import create_app

from conftest import make_runtime

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "http://127.0.0.1:18789"


@contextmanager
def gateway(tmp_path: Path, provider, *, raw: dict | None = None, token: str | None = TOKEN,
            runtimes=None, settings: dict | None = None) -> Iterator[TestClient]:
    config = Config.model_validate({"gateway": {"idleSessionSeconds": 0,
                                                "shutdownGraceSeconds": 0, **(raw or {})}})
    runtimes = runtimes or [make_runtime(tmp_path, provider, settings=settings)]
    app = create_app(config, Agents.of_runtimes(runtimes, config), token)
    with TestClient(app, base_url=BASE) as client:
        yield client


def events(response) -> list[dict]:
    """The JSON of each SSE ``data:`` line."""
    return [json.loads(line[6:]) for line in response.text.splitlines()
            if line.startswith("data: ")]


def send(client: TestClient, text: str, key: str = "main", **headers) -> list[dict]:
    response = client.post(f"/api/sessions/{key}/messages", json={"text": text},
                           headers={**AUTH, **headers})
    assert response.status_code == 200, response.text
    return events(response)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_serve(env: dict[str, str], port: int, more: list[str] | None = None
                ) -> tuple[subprocess.Popen, str]:
    """``clawd serve`` (with ``more`` options) as a process with ``env``, once its health
    check answers on ``port``: the process and its URL."""
    child = subprocess.Popen([sys.executable, "-m", "clawd", "serve", *(more or [])], env=env,
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
