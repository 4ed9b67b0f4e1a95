"""Two gateway workers on one PostgreSQL database, requests alternating between them: one
conversation, whichever worker serves each turn; a retried send with the same idempotency
key never runs twice, whichever worker it reaches; a turn run by one worker is followed from
the other (``Last-Event-ID`` too); an abort reaches the worker running the turn; a
session's waiting turns are bounded over every worker; wrong tokens count on every worker
together."""

from __future__ import annotations

import threading
import time

from starlette.testclient import TestClient

from clawd.config import AgentDefaults, Config
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.loop.runtime import Runtime, fixed_models
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.postgres import Database, database

from gateway_client import AUTH, BASE, TOKEN, events


def _worker(tmp_path, url: str, name: str, rate: dict | None = None, queued: int = 8,
            openai: bool = False):
    """One worker: its own ``Database`` (pool and session leases, as a process of its own
    has), the stand-in model answering "<name>: <message>"."""
    provider = ScriptedProvider(default=lambda request: f"{name}: " + request.messages[-1].text)
    workspace = tmp_path / "ws"
    runtime = Runtime(config=Config(), agent_id="main",
                      settings=AgentDefaults.model_validate({
                          "workspace": str(workspace), "memorySearch": {"enabled": False}}),
                      workspace=workspace, storage=Database(url).agent("main"),
                      models=fixed_models(provider, 200_000, profile="strong"), tools=[])
    config = Config.model_validate({"storage": {"url": url}, "gateway": {
        "shutdownGraceSeconds": 0, "maxQueuedPerSession": queued,
        "auth": {"rateLimit": rate or {}},
        "http": {"endpoints": {"chatCompletions": {"enabled": openai}}}}})
    return TestClient(create_app(config, ServedAgents.of_runtimes([runtime], config), TOKEN),
                      base_url=BASE)


def _reply(streamed: list[dict]) -> str:
    return next(e["text"] for e in streamed if e["type"] == "reply")


def test_alternating_workers_keep_one_conversation(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        started = time.monotonic()
        for n in range(6):
            client = (a, b)[n % 2]
            sent = client.post("/api/sessions/main/messages", json={"text": f"message {n}"},
                               headers=AUTH)
            # the worker holding the session runs every turn of it, whichever worker the
            # message reached
            assert _reply(events(sent)) == f"a: message {n}"
        assert time.monotonic() - started < 20
        for client in (a, b):
            items = client.get("/api/sessions/main/history?limit=50", headers=AUTH).json()
            said = [i["text"] for i in items["items"] if i["type"] in ("user", "assistant")]
            assert said == [t for n in range(6) for t in (f"message {n}", f"a: message {n}")]


def test_a_turn_sent_to_another_worker_waits_in_arrival_order(tmp_path, pg_url):
    """One client sends turn after turn to worker a; another sends one turn to the same
    session through worker b while a's third runs: b's turn runs next, not after a's
    later ones, and nothing fails."""
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        model = PauseOn("a2")
        a.app.state.gateway.agents.runtime("main").models = fixed_models(model, 200_000,
                                                                        profile="strong")
        box: dict = {}

        def a_sends() -> None:
            for n in range(8):
                box[f"a{n}"] = a.post("/api/sessions/main/messages",
                                      json={"text": f"a{n}"}, headers=AUTH)

        runner = threading.Thread(target=a_sends)
        runner.start()
        assert model.started.wait(10)
        sent_b = _in_thread(b, "from b", box)
        hub = a.app.state.gateway.hub
        deadline = time.monotonic() + 10
        while hub.coordination.shared.waiting("main", "agent:main:main") < 2:
            assert time.monotonic() < deadline, "b's turn was never queued"
            time.sleep(0.02)
        model.gate.set()
        runner.join(60)
        sent_b.join(60)
        assert box["from b"].status_code == 200
        assert _reply(events(box["from b"])).endswith("from b")
        assert all(box[f"a{n}"].status_code == 200 for n in range(8))
        items = b.get("/api/sessions/main/history?limit=50", headers=AUTH).json()["items"]
        users = [i["text"] for i in items if i["type"] == "user"]
        assert users == ["a0", "a1", "a2", "from b", "a3", "a4", "a5", "a6", "a7"]


def test_a_retried_send_runs_once_whichever_worker_it_reaches(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        key = {"Idempotency-Key": "send-1", **AUTH}
        first = a.post("/api/sessions/main/messages", json={"text": "once"}, headers=key)
        turn = first.headers["X-Clawd-Turn-Id"]
        a.app.state.gateway.hub.coordination.shared.wait_written()
        again = b.post("/api/sessions/main/messages", json={"text": "once"}, headers=key)
        assert again.headers["X-Clawd-Turn-Id"] == turn
        assert again.headers["X-Clawd-Replayed"] == "true"
        assert _reply(events(again)) == "a: once"
        other = b.post("/api/sessions/main/messages", json={"text": "something else"},
                       headers=key)
        assert other.status_code == 409
        items = b.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert [i["text"] for i in items if i["type"] == "user"] == ["once"]  # ran once


def test_a_turn_is_followed_from_another_worker(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        sent = a.post("/api/sessions/main/messages", json={"text": "follow me"},
                      headers=AUTH)
        turn = sent.headers["X-Clawd-Turn-Id"]
        here = events(sent)
        a.app.state.gateway.hub.coordination.shared.wait_written()
        there = events(b.get(f"/api/turns/{turn}/events", headers=AUTH))
        kept = [e for e in here if e["type"] != "delta"]
        assert [e["type"] for e in there] == [e["type"] for e in kept]
        assert _reply(there) == "a: follow me"
        rest = b.get(f"/api/turns/{turn}/events", headers={**AUTH, "Last-Event-ID": "1"})
        assert len(events(rest)) < len(there)
        assert b.get("/api/turns/nosuch/events", headers=AUTH).status_code == 404


def test_wrong_tokens_count_on_every_worker_together(tmp_path, pg_url):
    rate = {"maxAttempts": 4, "windowSeconds": 60, "lockoutSeconds": 30}
    with _worker(tmp_path, pg_url, "a", rate) as a, _worker(tmp_path, pg_url, "b", rate) as b:
        wrong = {"Authorization": "Bearer not-the-token-at-all-0000"}
        codes = [(a, b)[n % 2].get("/api/agents", headers=wrong).status_code
                 for n in range(5)]
        assert codes == [401, 401, 401, 429, 429]
        locked = b.get("/api/agents", headers=AUTH)
        assert locked.status_code == 429 and int(locked.headers["Retry-After"]) > 0
        assert a.get("/api/agents", headers=AUTH).status_code == 429


def test_a_valid_token_on_one_worker_does_not_clear_wrong_ones_on_another(tmp_path, pg_url):
    rate = {"maxAttempts": 3, "windowSeconds": 60, "lockoutSeconds": 30}
    with _worker(tmp_path, pg_url, "a", rate) as a, _worker(tmp_path, pg_url, "b", rate) as b:
        wrong = {"Authorization": "Bearer not-the-token-at-all-0000"}
        codes = []
        for _ in range(3):
            codes.append(a.get("/api/agents", headers=wrong).status_code)
            codes.append(b.get("/api/agents", headers=AUTH).status_code)
        assert codes == [401, 200, 401, 200, 429, 429]


def _ghost_turn(url: str, idempotency: str):
    """A worker that died mid-turn: it had opened the session, kept the message "hello" and
    said "Hel" of its reply (as a ``kill -9`` leaves it)."""
    from clawd.core.messages import Message
    from clawd.frontends.hub.stored import stopped_lines
    from clawd.sessions.entry import new_entry
    from clawd.sessions.transcript import begin
    from clawd.storage.postgres.shared import PgShared

    storage = database(url).agent("main")
    log = storage.transcript("sid")
    begin(log, "main", key="agent:main:main")
    log.append_message(Message.user("hello"))
    storage.sessions.update("agent:main:main", lambda _: new_entry(
        "sid", storage.session_file("sid"), "local/m"))
    ghost = PgShared(database(url), stopped_lines,
                     worker="clawd gone-host:4242")  # no such connection
    assert ghost.begin("t-ghost", "main", "agent:main:main", "hello", idempotency) == (None, 1)
    ghost.publish("t-ghost", 0, {"type": "delta", "text": "Hel"})
    ghost.wait_written()


def test_a_turn_of_a_worker_that_died_ends_for_its_followers(tmp_path, pg_url):
    _ghost_turn(pg_url, "k1")
    with _worker(tmp_path, pg_url, "b") as b:
        key = {"Idempotency-Key": "k1", **AUTH}
        again = b.post("/api/sessions/main/messages", json={"text": "hello"}, headers=key)
        assert again.headers["X-Clawd-Turn-Id"] == "t-ghost"  # never run a second time
        said = events(again)
        assert [e["type"] for e in said] == ["delta", "error", "done"]
        assert "stopped before it ended" in said[1]["message"] and said[2]["failed"]
        # what it had said is in the session, marked interrupted as Ctrl-C marks it
        items = b.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert [(i["type"], i["text"], i.get("interrupted")) for i in items] == [
            ("user", "hello", None), ("assistant", "Hel", True)]
        # the session itself goes on, on this worker
        assert _reply(events(b.post("/api/sessions/main/messages", json={"text": "next"},
                                    headers=AUTH))) == "b: next"


def test_a_v1_retry_with_its_idempotency_key_after_a_worker_died_runs_nothing_twice(
        tmp_path, pg_url):
    _ghost_turn(pg_url, "v1-k1")
    with _worker(tmp_path, pg_url, "b", openai=True) as b:
        headers = {**AUTH, "Idempotency-Key": "v1-k1", "X-Clawd-Session-Key": "main"}
        body = {"model": "clawd", "messages": [{"role": "user", "content": "hello"}]}
        again = b.post("/v1/chat/completions", json=body, headers=headers)
        assert again.headers["X-Clawd-Turn-Id"] == "t-ghost"  # never run a second time
        assert again.status_code == 502  # the turn failed when its worker died
        assert "stopped before it ended" in again.json()["error"]["message"]
        streamed = b.post("/v1/chat/completions", json={**body, "stream": True},
                          headers=headers)
        assert streamed.headers["X-Clawd-Turn-Id"] == "t-ghost"
        assert '"content": "Hel"' in streamed.text  # what it had said, not a new reply
        items = b.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert [(i["type"], i["text"]) for i in items] == [("user", "hello"),
                                                           ("assistant", "Hel")]


class Gated(ScriptedProvider):
    """The first reply stops after its first words until ``gate`` is set."""

    def __init__(self):
        super().__init__([])
        self.started, self.gate = threading.Event(), threading.Event()

    def stream(self, request):
        from clawd.core.messages import Message, ModelResponse, TextDelta, Usage

        yield TextDelta("The quick brown")
        self.started.set()
        self.gate.wait(10)
        yield TextDelta(" fox")
        yield ModelResponse(Message.assistant("The quick brown fox", usage=Usage(10, 4),
                                              stop_reason="stop"))


class PauseOn(ScriptedProvider):
    """Replies "held: <message>"; the reply to ``text`` waits until ``gate`` is set."""

    def __init__(self, text: str):
        super().__init__([])
        self.text = text
        self.started, self.gate = threading.Event(), threading.Event()

    def stream(self, request):
        from clawd.core.messages import Message, ModelResponse, TextDelta, Usage

        said = request.messages[-1].text
        if said == self.text:
            self.started.set()
            self.gate.wait(10)
        yield TextDelta(f"held: {said}")
        yield ModelResponse(Message.assistant(f"held: {said}", usage=Usage(10, 4),
                                              stop_reason="stop"))


def _gate(client) -> Gated:
    model = Gated()
    runtime = client.app.state.gateway.agents.runtime("main")
    runtime.models = fixed_models(model, 200_000, profile="strong")
    return model


def _in_thread(client, text: str, box: dict) -> threading.Thread:
    thread = threading.Thread(target=lambda: box.setdefault(text, client.post(
        "/api/sessions/main/messages", json={"text": text}, headers=AUTH)))
    thread.start()
    return thread


def test_an_abort_asked_of_one_worker_stops_the_turn_on_the_other(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        model = _gate(a)
        started, gate = model.started, model.gate
        assert a.app.state.gateway.hub.coordination.shared.listening.wait(5)
        box: dict = {}
        thread = _in_thread(a, "tell me", box)
        assert started.wait(5)
        stopped = b.post("/api/sessions/main/abort", headers=AUTH).json()
        assert stopped["aborted"] is True
        hub = a.app.state.gateway.hub
        deadline = time.monotonic() + 5
        while not any(s.running is not None and s.running.token.cancelled
                      for s in hub.slots.values()):
            assert time.monotonic() < deadline, "the worker running the turn never heard"
            time.sleep(0.02)
        gate.set()
        thread.join(10)
        assert events(box["tell me"])[-1]["interrupted"] is True
        items = b.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert items[-1] == {**items[-1], "text": "The quick brown", "interrupted": True}


def test_a_session_s_turns_wait_on_every_worker_within_one_bound(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a", queued=2) as a, \
            _worker(tmp_path, pg_url, "b", queued=2) as b:
        model = _gate(a)
        box: dict = {}
        threads = [_in_thread(a, "first", box)]
        assert model.started.wait(5)
        threads += [_in_thread(b, "second", box), _in_thread(b, "third", box)]
        deadline = time.monotonic() + 5
        while a.app.state.gateway.hub.coordination.shared.waiting("main", "agent:main:main") < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        refused = a.post("/api/sessions/main/messages", json={"text": "fourth"},
                         headers=AUTH)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        model.gate.set()
        for thread in threads:
            thread.join(30)
        assert {text: box[text].status_code for text in box} == {
            "first": 200, "second": 200, "third": 200}
        items = b.get("/api/sessions/main/history?limit=50", headers=AUTH).json()["items"]
        users = [i["text"] for i in items if i["type"] == "user"]
        assert users[0] == "first" and sorted(users[1:]) == ["second", "third"]
        assert "fourth" not in users



def test_turns_sent_to_the_holder_are_each_run_once_for_their_own_client(tmp_path, pg_url):
    """The worker holding a session hears of each turn it queues (``NOTIFY``) while it is
    still queueing it: its drain must run the very turn the client follows, every time."""
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        assert a.app.state.gateway.hub.coordination.shared.listening.wait(5)
        box: dict = {}

        def sends() -> None:
            for n in range(20):
                client = a if n % 4 else b
                box[n] = client.post("/api/sessions/main/messages", json={"text": f"m{n}"},
                                     headers=AUTH)

        sender = threading.Thread(target=sends, daemon=True)
        sender.start()
        sender.join(60)
        assert not sender.is_alive(), f"a turn never ended for its client after {len(box)}"
        # b took the session with the first turn: it runs every one after
        assert [_reply(events(box[n])) for n in range(20)] == [f"b: m{n}" for n in range(20)]
        items = a.get("/api/sessions/main/history?limit=100", headers=AUTH).json()["items"]
        assert [i["text"] for i in items if i["type"] == "user"] == [f"m{n}" for n in range(20)]


def test_an_abort_stops_the_running_turn_not_one_waiting_behind_it(tmp_path, pg_url):
    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        model = _gate(a)
        assert a.app.state.gateway.hub.coordination.shared.listening.wait(5)
        box: dict = {}
        first = _in_thread(a, "first", box)
        assert model.started.wait(5)
        second = _in_thread(b, "second", box)
        deadline = time.monotonic() + 5
        while a.app.state.gateway.hub.coordination.shared.waiting("main", "agent:main:main") < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        stopped = b.post("/api/sessions/main/abort", headers=AUTH).json()
        running = a.app.state.gateway.hub.slots[("main", "agent:main:main")].running
        assert stopped["aborted"] is True and stopped["turn"]["id"] == running.id
        deadline = time.monotonic() + 10  # the abort reaches a through the database
        while not running.token.cancelled:
            assert time.monotonic() < deadline, "the running turn never heard the abort"
            time.sleep(0.02)
        model.gate.set()
        first.join(10)
        second.join(10)
        assert events(box["first"])[-1]["interrupted"] is True
        assert events(box["second"])[-1]["failed"] is False


def test_a_turn_another_worker_took_still_reaches_its_client(tmp_path, pg_url):
    """A turn worker a received waits in the database while a lets the session go; worker
    b takes the session and runs it. The client following the turn on a gets b's reply
    (it used to follow a feed nobody wrote to, and never ended)."""
    import asyncio

    from clawd.frontends.hub.feed import Feed
    from clawd.frontends.hub.stored import sink
    from clawd.frontends.hub.turns import QueuedTurn

    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        hub, key = a.app.state.gateway.hub, "agent:main:main"
        shared = hub.coordination.shared

        async def received_not_run() -> None:  # as a's ``place`` leaves it before its take
            turn = QueuedTurn("left-behind", "main", key, "left behind",
                              feed=Feed(sink(shared, "left-behind"), shared.wait_written))
            hub.turns[turn.id] = turn
            await asyncio.to_thread(shared.begin, turn.id, "main", key, turn.text, None,
                                    False)

        a.portal.call(received_not_run)
        assert _reply(events(b.post("/api/sessions/main/messages", json={"text": "after"},
                                    headers=AUTH))) == "b: after"
        box: dict = {}
        follower = threading.Thread(target=lambda: box.setdefault("seen", a.get(
            "/api/turns/left-behind/events", headers=AUTH)), daemon=True)
        follower.start()
        follower.join(15)
        assert not follower.is_alive(), "the turn never ended for the client following it"
        assert _reply(events(box["seen"])) == "b: left behind"
        items = a.get("/api/sessions/main/history?limit=10", headers=AUTH).json()["items"]
        assert [i["text"] for i in items if i["type"] == "user"] == ["left behind", "after"]


def test_a_worker_that_lost_its_hold_unseen_writes_nothing_more_of_the_session(
        tmp_path, pg_url):
    """Worker a's lease connection drops mid-turn (a network cut, a pooler restarted): the
    server lets go of a's lock while a believes it holds the session, and worker b takes
    the session for its own turn. a's turn then writes nothing more (its writes carry an
    epoch the session no longer has) and ends saying why: one writer."""
    import psycopg

    with _worker(tmp_path, pg_url, "a") as a, _worker(tmp_path, pg_url, "b") as b:
        model = _gate(a)
        box: dict = {}
        first = _in_thread(a, "tell me", box)
        assert model.started.wait(30)
        lease = a.app.state.gateway.agents.runtime("main").storage.db.lease_connection()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (lease.info.backend_pid,))
        taken = _reply(events(b.post("/api/sessions/main/messages", json={"text": "from b"},
                                     headers=AUTH)))
        assert taken.startswith("b: ") and taken.endswith("from b")  # a's message folded in
        model.gate.set()
        first.join(20)
        said = events(box["tell me"])
        assert any("taken over by another worker" in e.get("message", "") for e in said), said
        items = b.get("/api/sessions/main/history?limit=20", headers=AUTH).json()["items"]
        assert [(i["type"], i["text"]) for i in items] == [
            ("user", "tell me"), ("user", "from b"), ("assistant", taken)]
        # a takes part again: its next message runs, the session's one writer at a time
        assert _reply(events(a.post("/api/sessions/main/messages", json={"text": "again"},
                                    headers=AUTH))).endswith("again")


def test_a_slow_database_never_holds_up_the_event_loop(tmp_path, pg_url):
    """The people's agents are read again every ``PEOPLE_SECONDS``: with the ``people``
    table locked (a database slow to answer), a request that needs the served agents
    waits on a thread, and ``/health`` still answers at once (it used to wait on the
    event loop behind the lookup)."""
    import psycopg

    from clawd.frontends.gateway.agents import PEOPLE_SECONDS
    from clawd.storage.postgres.people import PgPeople

    client = _worker(tmp_path, pg_url, "a")
    people = PgPeople(Database(pg_url))
    people.add("alice", ("alice",))
    agents = client.app.state.gateway.agents
    agents.people = people
    with client:
        assert client.get("/api/agents", headers=AUTH).status_code == 200
        time.sleep(PEOPLE_SECONDS + 0.3)  # due to be read again
        box: dict = {}
        with psycopg.connect(pg_url) as locker:
            locker.execute("LOCK TABLE people IN ACCESS EXCLUSIVE MODE")
            asking = threading.Thread(target=lambda: box.setdefault(
                "agents", client.get("/api/agents", headers=AUTH)), daemon=True)
            asking.start()
            time.sleep(0.5)
            health = threading.Thread(target=lambda: box.setdefault(
                "health", client.get("/health")), daemon=True)
            health.start()
            health.join(2)
            answered = "health" in box
        asking.join(20)
        health.join(20)
        assert answered, "/health waited for the database"
        assert box["agents"].status_code == 200


def test_a_worker_is_woken_only_for_the_turns_it_follows():
    """Every worker hears every turn's notices; only those of a turn a follower here waits
    for reach its event loop (``Wakers.followed``, asked on the listener's thread)."""
    import asyncio

    from clawd.frontends.hub.stored import Wakers

    async def check() -> None:
        wakers = Wakers()
        assert not wakers.followed("t1")
        event = wakers.arm("t1")
        assert wakers.followed("t1") and not wakers.followed("t2")
        wakers.wake("t2")
        assert not event.is_set()
        wakers.wake("t1")
        assert event.is_set()
        wakers.disarm("t1", event)
        assert not wakers.followed("t1")

    asyncio.run(check())
