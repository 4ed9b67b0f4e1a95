"""People (``clawd users``): a token each, shown once and kept as a digest, an agent of
their own, and a gateway where one person's token never reaches another's sessions, files
or notes; on the embedded store and on PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import stat

import pytest

from clawd.config import Config
from clawd.core.errors import ClawdError
from clawd.frontends.cli import main
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.people import FilePeople
from clawd.storage.people import digest
from clawd.storage.postgres import database
from clawd.storage.postgres.people import PgPeople

from conftest import make_runtime
from gateway_client import AUTH, BASE, TOKEN, events


def _token(out: str) -> str:
    return out.strip().splitlines()[-1]


def test_users_add_list_rotate_remove_on_the_embedded_store(isolated_home, capsys):
    assert main(["users", "add", "Alice"]) == 0
    said = capsys.readouterr().out
    token = _token(said)
    assert "added alice with an agent of their own, alice" in said and len(token) >= 43
    people = isolated_home / ".clawd" / "people.json"
    assert stat.S_IMODE(people.stat().st_mode) == 0o600
    stored = json.loads(people.read_text())
    assert token not in people.read_text() and stored["alice"]["digest"] == digest(token)
    assert (isolated_home / "clawd-alice" / "SOUL.md").is_file()  # the template, laid down
    assert (isolated_home / "clawd-alice" / "MEMORY.md").is_file()
    assert main(["users", "add", "bob", "--agent", "main"]) == 0
    assert "reaching agent main" in capsys.readouterr().out
    assert main(["users", "add", "alice"]) == 1  # one alice
    assert main(["users", "add", "main"]) == 1  # a name that is an agent already
    assert "there is an agent main already" in capsys.readouterr().err
    assert main(["users", "add", "../x"]) == 1
    assert main(["users"]) == 0
    listed = capsys.readouterr().out
    assert "alice" in listed and "bob" in listed and token not in listed
    assert main(["users", "rotate", "alice"]) == 0
    fresh = _token(capsys.readouterr().out)
    store = FilePeople(people)
    assert store.find(token.encode()) is None and store.find(fresh.encode()).name == "alice"
    assert main(["users", "remove", "alice"]) == 0
    assert store.find(fresh.encode()) is None
    assert (isolated_home / "clawd-alice" / "SOUL.md").is_file()  # their files stay


def test_people_on_postgresql(pg_url):
    people = PgPeople(database(pg_url))
    person, token = people.add("carol", ("carol",))
    assert people.find(token.encode()) == person and people.all() == [person]
    with pytest.raises(ClawdError):
        people.add("carol", ("carol",))
    _, again = people.rotate("carol")
    assert people.find(token.encode()) is None and people.find(again.encode()).name == "carol"
    people.remove("carol")
    assert people.find(again.encode()) is None and people.all() == []


def _served(tmp_path, people):
    """A gateway over three agents (main, alice, carol) with scripted models."""
    runtimes = []
    for agent in ("main", "alice", "carol"):
        provider = ScriptedProvider(default=lambda request, agent=agent: f"{agent} here")
        runtime = make_runtime(tmp_path / agent, provider)
        runtime.files.write("memory/2026-11-20.md", f"- {agent}'s secret is {agent}-4242\n")
        runtimes.append(dataclasses.replace(runtime, agent_id=agent))
    config = Config.model_validate({"gateway": {
        "idleSessionSeconds": 0, "shutdownGraceSeconds": 0,
        "http": {"endpoints": {"chatCompletions": {"enabled": True}}}}})
    return create_app(config, ServedAgents.of_runtimes(runtimes, config, people=people), TOKEN)


def test_one_persons_token_never_reaches_anothers_agent(tmp_path):
    from starlette.testclient import TestClient

    people = FilePeople(tmp_path / "people.json")
    _, alice = people.add("alice", ("alice",))
    _, carol = people.add("carol", ("carol",))
    as_alice = {"Authorization": f"Bearer {alice}"}
    with TestClient(_served(tmp_path, people), base_url=BASE) as client:
        agents = client.get("/api/agents", headers=as_alice).json()["agents"]
        assert [a["id"] for a in agents] == ["alice"]
        assert len(client.get("/api/agents", headers=AUTH).json()["agents"]) == 3
        # no agent named: the person's own
        reply = events(client.post("/api/sessions/main/messages", json={"text": "hi"},
                                   headers=as_alice))
        assert any(e.get("text") == "alice here" for e in reply if e["type"] == "reply")
        for route in ("/api/sessions?agent=carol", "/api/sessions/main/history?agent=carol",
                      "/api/files/memory/2026-11-20.md?agent=carol",
                      "/api/memory/search?q=secret&agent=carol",
                      "/api/sessions/main/context?agent=main"):
            assert client.get(route, headers=as_alice).status_code == 403, route
        assert client.post("/api/sessions/main/messages?agent=carol", json={"text": "hi"},
                           headers=as_alice).status_code == 403
        assert client.put("/api/files/memory/x.md", json={"content": "x", "agent": "carol"},
                          headers=as_alice).status_code == 403
        own = client.get("/api/files/memory/2026-11-20.md", headers=as_alice).json()
        assert "alice-4242" in json.dumps(own) and "carol" not in json.dumps(own)
        listed = client.get("/api/sessions", headers=as_alice).json()
        assert listed["agent"] == "alice"
        # a person removed is out at once; a wrong token is a 401
        people.remove("carol")
        assert client.get("/api/agents", headers={"Authorization": f"Bearer {carol}"}
                          ).status_code == 401


def test_the_openai_endpoint_answers_a_person_from_their_own_agent(tmp_path):
    from starlette.testclient import TestClient

    people = FilePeople(tmp_path / "people.json")
    _, alice = people.add("alice", ("alice",))
    as_alice = {"Authorization": f"Bearer {alice}"}
    with TestClient(_served(tmp_path, people), base_url=BASE) as client:
        models = client.get("/v1/models", headers=as_alice).json()["data"]
        assert [m["id"] for m in models] == ["clawd:alice"]
        body = {"model": "clawd", "user": "alice-phone",
                "messages": [{"role": "user", "content": "hi"}]}
        answer = client.post("/v1/chat/completions", json=body, headers=as_alice)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "alice here"
        assert answer.headers["X-Clawd-Session-Key"].startswith("agent:alice:openai:user:")
        for model in ("clawd:carol", "clawd:main"):
            denied = client.post("/v1/chat/completions", json={**body, "model": model},
                                 headers=as_alice)
            assert denied.status_code == 403, model

