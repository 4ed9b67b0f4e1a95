"""``clawd users remove NAME --purge`` / ``clawd users purge NAME``: a removed person's own
agent's data deleted (sessions, transcripts, notes and files, kept versions, memory index,
turn records, tokens), after a confirmation, on files and on PostgreSQL; another person's
and the operator's data untouched, and a shared agent kept."""

from __future__ import annotations

import dataclasses
import io

import pytest
from starlette.testclient import TestClient

from clawd.config import Config, load_config
from clawd.frontends.cli import main
from clawd.frontends.compose import agent_storage
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.providers.scripted import ScriptedProvider
from clawd.storage import open_people

from conftest import make_runtime
from gateway_client import AUTH, BASE, TOKEN

AGENTS = ("main", "alice", "bob")


@pytest.fixture(params=["files", "postgresql"])
def store(request, isolated_home, monkeypatch):
    """The kind of store the command line uses: files, or a fresh database."""
    if request.param == "postgresql":
        monkeypatch.setenv("CLAWD_STORAGE_URL", request.getfixturevalue("pg_url"))
    else:
        monkeypatch.delenv("CLAWD_STORAGE_URL", raising=False)
    return request.param


def _token(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def _client(tmp_path, stores: dict) -> TestClient:
    """The gateway over the agents' real stores (the people's included), a scripted model."""
    config = load_config()
    runtimes = []
    for agent in AGENTS:
        base = make_runtime(tmp_path / agent, ScriptedProvider(default=lambda r: "noted"))
        storage = stores[agent]
        runtimes.append(dataclasses.replace(base, agent_id=agent, storage=storage))
    gateway = Config.model_validate({"gateway": {"idleSessionSeconds": 0,
                                                 "shutdownGraceSeconds": 0}})
    return TestClient(create_app(gateway, ServedAgents.of_runtimes(
        runtimes, gateway, open_people(config)), TOKEN), base_url=BASE)


def _fill(tmp_path, tokens: dict[str, dict], stores: dict) -> None:
    """A conversation, a note and a file in each agent, each through its owner's token."""
    with _client(tmp_path, stores) as client:
        for agent in AGENTS:
            headers = tokens[agent]
            for key in ("main", "work"):
                answer = client.post(f"/api/sessions/{key}/messages",
                                     json={"text": f"{agent} says hi"}, headers=headers)
                assert answer.status_code == 200, answer.text
            for path in ("MEMORY.md", "MEMORY.md", "notes/plan.txt"):  # versions kept
                assert client.put(f"/api/files/{path}", json={
                    "content": f"- {agent}'s secret {path}\n", "agent": agent},
                    headers=headers).status_code == 200


def _held(storage) -> dict:
    """What ``storage`` (an agent's, opened while it was a person's) holds."""
    agent = storage.agent_id
    found = {"sessions": storage.sessions.count(), "transcripts": len(storage.session_ids()),
             "memory": storage.files.read("MEMORY.md")}
    db = getattr(storage, "db", None)
    if db is not None:
        with db.connection() as conn:
            for table in ("workspace_files", "file_versions", "gateway_turns", "memory_meta"):
                found[table] = conn.execute(f"SELECT count(*) FROM {table} WHERE agent_id = %s",
                                            (agent,)).fetchone()[0]
    return found


def _index(store: str, agent: str) -> None:
    """A row (or the file) of the agent's memory index."""
    from clawd.core.paths import state_dir

    storage = agent_storage(load_config(), agent)
    if store == "postgresql":
        with storage.db.connection() as conn:
            conn.execute("INSERT INTO memory_meta (agent_id, key, value) VALUES (%s, 'x', 'y')",
                         (agent,))
    else:
        (state_dir() / "memory").mkdir(parents=True, exist_ok=True)
        (state_dir() / "memory" / f"{agent}.sqlite").write_bytes(b"SQLite format 3\x00")


def test_purging_alice_leaves_bob_and_the_operator_whole(store, isolated_home, tmp_path,
                                                         capsys, monkeypatch):
    from clawd.core.paths import state_dir

    tokens = {"main": AUTH}
    for name in ("alice", "bob"):
        assert main(["users", "add", name]) == 0
        tokens[name] = {"Authorization": f"Bearer {_token(capsys)}"}
    assert main(["users", "add", "carol", "--agent", "main"]) == 0  # shares the operator's
    stores = {agent: agent_storage(load_config(), agent) for agent in AGENTS}
    _fill(tmp_path, tokens, stores)
    for agent in AGENTS:
        _index(store, agent)
    before = {agent: _held(stores[agent]) for agent in AGENTS}
    assert before["alice"]["sessions"] == 2 and "alice's secret" in before["alice"]["memory"]

    # asked, and not confirmed: nothing happens
    monkeypatch.setattr("sys.stdin", io.StringIO("no\n"))
    assert main(["users", "remove", "alice", "--purge"]) == 1
    assert "nothing was deleted" in capsys.readouterr().out
    assert _held(stores["alice"]) == before["alice"]
    monkeypatch.setattr("sys.stdin", io.StringIO("alice\n"))
    assert main(["users", "remove", "alice", "--purge"]) == 0
    said = capsys.readouterr().out
    assert "removed alice" in said and "purged alice" in said

    gone = _held(stores["alice"])
    assert gone["sessions"] == 0 and gone["transcripts"] == 0 and gone["memory"] is None
    assert all(gone.get(t, 0) == 0 for t in ("workspace_files", "file_versions",
                                             "gateway_turns", "memory_meta"))
    for agent in ("main", "bob"):
        assert _held(stores[agent]) == before[agent], agent
    if store == "files":
        assert not (isolated_home / "clawd-alice").exists()
        assert not (state_dir() / "agents" / "alice").exists()
        assert not (state_dir() / "memory" / "alice.sqlite").exists()
        assert (isolated_home / "clawd-bob" / "MEMORY.md").is_file()
        assert (state_dir() / "memory" / "bob.sqlite").exists()
        assert (state_dir() / "memory" / "main.sqlite").exists()
    else:
        with agent_storage(load_config(), "bob").db.connection() as conn:
            tickets = dict(conn.execute("SELECT person, count(*) FROM quota_turns GROUP BY 1"
                                        ).fetchall())
        assert "alice" not in tickets and tickets["bob"] == 2

    with _client(tmp_path, stores) as client:
        assert client.get("/api/agents", headers=tokens["alice"]).status_code == 401
        assert client.get("/api/sessions", headers=tokens["bob"]).status_code == 200
        read = client.get("/api/files/MEMORY.md", headers=tokens["bob"]).json()
        assert "bob's secret" in read["content"]

    # carol shares main: purging her takes her access and keeps main's data
    assert main(["users", "purge", "carol", "--yes"]) == 0
    said = capsys.readouterr().out
    assert "removed carol" in said and "kept main" in said and "purged" not in said
    assert _held(stores["main"]) == before["main"]


def test_purge_of_one_removed_earlier_and_of_nobody(store, isolated_home, capsys):
    operator = agent_storage(load_config(), "main")
    operator.files.create("MEMORY.md", "- the operator's own note\n")
    assert main(["users", "add", "dave"]) == 0
    capsys.readouterr()
    storage = agent_storage(load_config(), "dave")
    assert storage.files.read("SOUL.md")  # the template was laid down
    db = getattr(storage, "db", None)
    assert main(["users", "remove", "dave"]) == 0  # their files are kept
    assert main(["users", "purge", "dave", "--yes"]) == 0
    assert "purged dave" in capsys.readouterr().out
    if db is None:
        assert not (isolated_home / "clawd-dave").exists()
    else:
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM workspace_files WHERE agent_id = 'dave'"
                                ).fetchone()[0] == 0
    assert main(["users", "purge", "../x", "--yes"]) == 1
    assert main(["users", "purge", "nobody", "--yes"]) == 1
    assert "no person nobody" in capsys.readouterr().err
    assert main(["users", "purge", "main", "--yes"]) == 1  # the operator's agent: never
    assert operator.files.read("MEMORY.md") == "- the operator's own note\n"
