"""Quotas per person (``gateway.quotas``): turns a minute and at once (429 with
``Retry-After``), sessions (409), the size of one write (413); counted for every worker on
PostgreSQL, the operator's token free of them; one person's burst never holds another's
turn back."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from clawd.core.messages import Message, ModelResponse, TextDelta, Usage
from clawd.loop.runtime import fixed_models
from clawd.storage.files.people import FilePeople
from clawd.storage.files.storage import FileStorage
from clawd.storage.postgres.people import PgPeople
from clawd.storage.postgres.quotas import PgTurnQuota

from conftest import make_runtime
from gateway_client import AUTH, events, gateway

pytestmark = pytest.mark.slow  # worker threads, and a database on two workers


class Gated:
    """A model that holds every turn whose message starts with "hold" until the test lets
    it go; others are answered at once."""

    name, model = "gated", "gated"

    def __init__(self):
        self.gate = threading.Event()
        self.held: list[str] = []
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def stream(self, request):
        text = request.messages[-1].text
        with self.lock:
            self.seen.append(text)
            if text.startswith("hold"):
                self.held.append(text)
        if text.startswith("hold"):
            self.gate.wait(30)
        yield TextDelta(f"re: {text}")
        yield ModelResponse(Message.assistant(f"re: {text}", usage=Usage(100, 5),
                                              stop_reason="stop"))


def _agent(tmp_path, first, agent_id: str):
    """Another agent beside ``first``, in the same store (folder or database)."""
    db = getattr(first.storage, "db", None)
    workspace = tmp_path / f"ws-{agent_id}"
    (workspace / "memory").mkdir(parents=True)
    storage = db.agent(agent_id) if db is not None else FileStorage(
        agent_id, workspace, tmp_path / "state" / "agents" / agent_id / "sessions")
    return dataclasses.replace(first, agent_id=agent_id, storage=storage, workspace=workspace)


def served(tmp_path, model, quotas: dict, **raw):
    """The gateway over main (the operator's), alice's and bob's agents, with ``quotas``;
    and the people's tokens as headers."""
    main = make_runtime(tmp_path, None)
    main.models = fixed_models(model, 200_000)
    runtimes = [main] + [_agent(tmp_path, main, name) for name in ("alice", "bob")]
    db = getattr(main.storage, "db", None)
    people = PgPeople(db) if db is not None else FilePeople(tmp_path / "people.json")
    tokens = {name: {"Authorization": f"Bearer {people.add(name, (name,))[1]}"}
              for name in ("alice", "bob")}
    return gateway(tmp_path, None, runtimes=runtimes, people=people,
                   raw={"quotas": quotas, **raw}), tokens


def _send(client, headers, text: str, key: str = "main", **more):
    return client.post(f"/api/sessions/{key}/messages", json={"text": text},
                       headers={**headers, **more})


def _hubs(client) -> list:
    apps = getattr(client.app, "apps", [client.app])
    return [app.state.gateway.hub for app in apps]


def test_turns_past_the_minute_s_quota_are_429_with_retry_after(tmp_path, one_or_two_workers):
    model = Gated()
    context, tokens = served(tmp_path, model, {"turnsPerMinute": 2})
    with context as client:
        alice, bob = tokens["alice"], tokens["bob"]
        assert _send(client, alice, "one", "a").status_code == 200
        assert _send(client, alice, "two", "b").status_code == 200
        refused = _send(client, alice, "three", "c")
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        error = refused.json()["error"]
        assert error["type"] == "quota_exceeded" and "turnsPerMinute" in error["message"]
        assert client.get("/api/sessions/c/history", headers=alice).json()["items"] == []
        assert "three" not in model.seen  # refused before it was queued
        # another person's count is their own; the operator's token is not limited
        assert _send(client, bob, "hello", "a").status_code == 200
        for n in range(4):
            assert _send(client, AUTH, f"op {n}", "x").status_code == 200
        # a retried send (same idempotency key) of a counted turn is the turn it was
        again = _send(client, bob, "hello 2", "b", **{"Idempotency-Key": "k1"})
        assert again.status_code == 200
        # bob is at two now: the retry is refused like any send past the quota
        assert _send(client, bob, "hello 2", "b", **{"Idempotency-Key": "k1"}
                     ).status_code == 429


def test_turns_past_the_at_once_bound_are_429_until_one_ends(tmp_path, one_or_two_workers):
    model = Gated()
    context, tokens = served(tmp_path, model, {"turnsPerMinute": None, "turnsAtOnce": 2})
    with context as client, ThreadPoolExecutor(4) as pool:
        bob = tokens["bob"]
        running = [pool.submit(_send, client, bob, f"hold {n}", f"b{n}") for n in range(2)]
        for _ in range(500):
            if len(model.held) == 2:
                break
            threading.Event().wait(0.02)
        assert len(model.held) == 2
        refused = _send(client, bob, "hold 3", "b3")
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
        assert "turnsAtOnce" in refused.json()["error"]["message"]
        reply = events(_send(client, tokens["alice"], "hi", "a"))
        assert {"type": "reply", "text": "re: hi", "aborted": False} in reply
        model.gate.set()
        assert all(f.result(30).status_code == 200 for f in running)
        for _ in range(200):  # a worker records the end of a turn just after its reply
            after = _send(client, bob, "after", "b0")
            if after.status_code != 429:
                break
            threading.Event().wait(0.05)
        assert after.status_code == 200


def test_a_burst_of_one_person_never_holds_another_s_turn_back(tmp_path, one_or_two_workers):
    """Each worker runs 3 turns at once at most. Bob sends 8 turns at once to 8 sessions;
    his bound (2) lets 2 run and refuses 6, so a thread is left on every worker and alice's
    turn runs to its end while bob's still hold. Without the bound bob's turns would take
    every thread and alice's would wait behind his queued ones until they ended."""
    model = Gated()
    context, tokens = served(tmp_path, model, {"turnsPerMinute": None, "turnsAtOnce": 2})
    with context as client, ThreadPoolExecutor(9) as pool:
        for hub in _hubs(client):
            hub.pool.shutdown(wait=True)
            hub.pool = ThreadPoolExecutor(3, thread_name_prefix="clawd-turn")
        burst = [pool.submit(_send, client, tokens["bob"], f"hold {n}", f"b{n}")
                 for n in range(8)]
        for _ in range(500):
            if len(model.held) == 2 and sum(f.done() for f in burst) == 6:
                break
            threading.Event().wait(0.02)
        assert len(model.held) == 2
        assert sorted(f.result().status_code for f in burst if f.done()) == [429] * 6
        alice = pool.submit(_send, client, tokens["alice"], "hi", "a")
        answered = alice.result(60)  # bob's two turns still hold: nothing has let go
        assert not model.gate.is_set() and len(model.held) == 2
        assert {"type": "reply", "text": "re: hi", "aborted": False} in events(answered)
        model.gate.set()
        assert sorted(f.result(30).status_code for f in burst) == [200] * 2 + [429] * 6


def test_a_new_session_past_the_quota_is_409(tmp_path, one_or_two_workers):
    model = Gated()
    context, tokens = served(tmp_path, model, {"sessions": 2})
    with context as client:
        alice = tokens["alice"]
        assert _send(client, alice, "one", "a").status_code == 200
        assert _send(client, alice, "two", "b").status_code == 200
        refused = _send(client, alice, "three", "c")
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert error["type"] == "session_limit" and "gateway.quotas.sessions" in error["message"]
        assert _send(client, alice, "again", "a").status_code == 200  # an existing one
        assert _send(client, tokens["bob"], "one", "c").status_code == 200  # bob's own
        for key in ("a", "b", "c", "d"):  # the operator's token: no limit
            assert _send(client, AUTH, "op", key).status_code == 200
        assert client.delete("/api/sessions/a", headers=alice).status_code == 200
        assert _send(client, alice, "three", "c").status_code == 200
        keys = [s["key"] for s in client.get("/api/sessions", headers=alice).json()["sessions"]]
        assert sorted(keys) == ["agent:alice:b", "agent:alice:c"]


def test_a_write_larger_than_a_person_may_make_is_413(tmp_path, one_or_two_workers):
    context, tokens = served(tmp_path, Gated(), {"noteBytes": 100, "fileBytes": 1000})
    with context as client:
        alice = tokens["alice"]

        def put(path: str, content: str, headers=alice, **more):
            return client.put(f"/api/files/{path}", json={"content": content, **more},
                              headers=headers)

        assert put("MEMORY.md", "- short\n").status_code == 200
        for path in ("MEMORY.md", "memory/2026-11-22.md", "memory/deep/x.md"):
            refused = put(path, "x" * 101)
            assert refused.status_code == 413, path
            error = refused.json()["error"]
            assert error["type"] == "too_large" and "noteBytes" in error["message"]
        assert put("MEMORY.md", "é" * 50).status_code == 200  # 100 bytes
        assert put("MEMORY.md", "é" * 51).status_code == 413  # bytes, not characters
        assert put("MEMORY.md", "x" * 101, append=True).status_code == 413
        assert put("notes/plan.txt", "x" * 1000).status_code == 200
        refused = put("notes/plan.txt", "y" * 1001)
        assert refused.status_code == 413 and "fileBytes" in refused.json()["error"]["message"]
        read = client.get("/api/files/notes/plan.txt", headers=alice).json()
        assert read["content"] == "x" * 1000  # nothing was written
        assert put("MEMORY.md", "- mine\n" * 500, headers=AUTH).status_code == 200  # operator
        # hostile: another person's agent, no token, a wrong one
        assert put("MEMORY.md", "x", agent="bob").status_code == 403
        assert put("MEMORY.md", "x", headers={}).status_code == 401
        assert put("MEMORY.md", "x", headers={"Authorization": "Bearer nope-nope-nope-1"}
                   ).status_code == 401
        theirs = client.get("/api/files/MEMORY.md", headers=tokens["bob"])
        assert "é" not in theirs.text and "mine" not in theirs.text


def test_the_operator_is_limited_too_when_the_config_says(tmp_path):
    context, _ = served(tmp_path, Gated(), {"turnsPerMinute": 1, "operator": True,
                                            "fileBytes": 10})
    with context as client:
        assert _send(client, AUTH, "one", "a").status_code == 200
        assert _send(client, AUTH, "two", "b").status_code == 429
        assert client.put("/api/files/x.txt", json={"content": "x" * 11},
                          headers=AUTH).status_code == 413


def test_tickets_are_taken_atomically_across_workers(pg_url):
    """Twenty threads on two pools (two workers) ask for a ticket of one person at once:
    exactly the quota gets one."""
    from clawd.storage.postgres import Database

    counters = [PgTurnQuota(Database(pg_url)), PgTurnQuota(Database(pg_url))]
    with ThreadPoolExecutor(20) as pool:
        got = list(pool.map(lambda n: counters[n % 2].reserve("bob", 5, None), range(20)))
    tickets = [t for t in got if isinstance(t, str)]
    assert len(tickets) == 5
    assert all(t.retry_after >= 59 for t in got if not isinstance(t, str))
    counters[0].cancel(tickets[0])  # given back: one more fits
    assert isinstance(counters[1].reserve("bob", 5, None), str)
    assert isinstance(counters[1].reserve("alice", 5, None), str)  # hers are her own
    for counter in counters:
        counter.db.close()
