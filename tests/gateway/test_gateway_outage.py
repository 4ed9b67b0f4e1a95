"""A database outage under a gateway on PostgreSQL: the postmaster and its processes killed
(``kill -9``) and started again. Requests during it answer a JSON 503 with ``Retry-After``
within a few seconds (the token check too, never a plain-text 500); a send that failed is
not run later behind the client's back, and its idempotency key sends it again once the
database is back; nothing stays queued or running; the gateway is back to normal by itself.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from pgoutage import OwnServer, wait_for
from starlette.testclient import TestClient

from clawd.config import AgentDefaults, Config
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.loop.runtime import Runtime, fixed_models
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.postgres import Database

from gateway_client import AUTH, BASE, TOKEN, events


def _worker(tmp_path, url: str) -> TestClient:
    provider = ScriptedProvider(default=lambda request: "ok: " + request.messages[-1].text)
    workspace = tmp_path / "ws"
    runtime = Runtime(config=Config(), agent_id="main",
                      settings=AgentDefaults.model_validate({
                          "workspace": str(workspace), "memorySearch": {"enabled": False}}),
                      workspace=workspace, storage=Database(url).agent("main"),
                      models=fixed_models(provider, 200_000, profile="strong"), tools=[])
    config = Config.model_validate({"storage": {"url": url},
                                    "gateway": {"shutdownGraceSeconds": 0}})
    return TestClient(create_app(config, ServedAgents.of_runtimes([runtime], config), TOKEN),
                      base_url=BASE)


def _send(client: TestClient, text: str, key: str):
    return client.post("/api/sessions/main/messages", json={"text": text},
                       headers={**AUTH, "Idempotency-Key": key})


def _unfinished(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM gateway_turns WHERE state <> 'done'"
                                ).fetchone()[0])


@pytest.mark.slow
def test_an_outage_answers_503_at_once_and_the_gateway_heals_by_itself(tmp_path):
    server = OwnServer()
    try:
        with _worker(tmp_path, server.url) as gateway:
            sent = _send(gateway, "before", "k0")
            assert [e["text"] for e in events(sent) if e["type"] == "reply"] == ["ok: before"]
            server.kill()
            for request in (lambda: _send(gateway, "during", "k1"),
                            lambda: gateway.get("/api/sessions", headers=AUTH),
                            lambda: gateway.get("/api/sessions",
                                                headers={"Authorization": "Bearer wrong"})):
                started = time.monotonic()
                answered = request()
                assert time.monotonic() - started < 12
                assert answered.status_code == 503, answered.text
                assert answered.json()["error"]["type"] == "unavailable"
                assert "does not answer" in answered.json()["error"]["message"]
                assert int(answered.headers["Retry-After"]) > 0
            server.start()
            wait_for(lambda: gateway.get("/api/sessions", headers=AUTH).status_code == 200,
                     what="the gateway answering again")
            again = _send(gateway, "during", "k1")  # the same key: sent now, once
            assert again.status_code == 200, again.text
            assert [e["text"] for e in events(again) if e["type"] == "reply"] == ["ok: during"]
            wait_for(lambda: _unfinished(server.url) == 0, what="no turn left unfinished")
            items = gateway.get("/api/sessions/main/history?limit=20",
                                headers=AUTH).json()["items"]
            assert [i["text"] for i in items if i["type"] == "user"] == ["before", "during"]
    finally:
        server.stop()


def test_a_send_that_failed_half_way_is_ended_not_run_and_its_key_sends_it_again(
        tmp_path, pg_url):
    """A send queued in the database just before the database stopped answering: the
    worker that took it remembers it, and its first sweep once the database answers ends
    it (nobody runs it behind the client's back); the client's retry with the same
    idempotency key then sends it, once."""
    from clawd.frontends.hub.postgres import UNANSWERED
    from clawd.frontends.hub.stored import stopped_lines
    from clawd.storage.postgres import database
    from clawd.storage.postgres.shared import PgShared

    with _worker(tmp_path, pg_url) as gateway:
        coordination = gateway.app.state.gateway.hub.coordination
        other = PgShared(database(pg_url), stopped_lines, worker=coordination.shared.worker)
        assert other.begin("t-half", "main", "agent:main:main", "hello", "k-half") == (None, 1)
        coordination.unsent.add("t-half")  # as ``place`` leaves it when the database stops
        wait_for(lambda: not coordination.unsent, what="the half-sent turn ended")
        ended = events(gateway.get("/api/turns/t-half/events", headers=AUTH))
        assert ended[0] == {"type": "error", "message": UNANSWERED} and ended[-1]["failed"]
        again = _send(gateway, "hello", "k-half")
        assert again.headers["X-Clawd-Turn-Id"] != "t-half"
        assert [e["text"] for e in events(again) if e["type"] == "reply"] == ["ok: hello"]
        assert _send(gateway, "hello", "k-half").headers["X-Clawd-Turn-Id"] == \
            again.headers["X-Clawd-Turn-Id"]  # sent now: a retry is that turn
        items = gateway.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert [i["text"] for i in items if i["type"] == "user"] == ["hello"]
