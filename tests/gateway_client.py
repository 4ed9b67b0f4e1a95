"""The gateway for tests: the app in-process over scripted runtimes, and its SSE events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
