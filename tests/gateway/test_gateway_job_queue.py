"""A job whose run goes to the main session (or a named one), run by ``clawd serve``, waits
in the session's queue like any turn: due while a chat turn runs, it runs after it; a chat
turn sent while it runs waits behind it and is answered; it keeps its own tools and model,
and a quiet heartbeat is forgotten from the open session's history. On files (one process)
and on PostgreSQL (two workers taking the requests in turn)."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.core.messages import Message, ModelResponse, TextDelta, Usage
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from gateway_client import AUTH, events, gateway

T0 = datetime(2030, 5, 1, 9, 0, tzinfo=timezone.utc)
DUE = T0 + timedelta(minutes=5)


class Gates(ScriptedProvider):
    """Replies "re: <message>"; the reply to a message in ``gates`` waits until its gate
    is set (``started`` tells it began)."""

    def __init__(self, *held: str, reply=None):
        super().__init__([])
        self.gates = {text: threading.Event() for text in held}
        self.started = {text: threading.Event() for text in held}
        self.seen: list[str] = []
        self.reply = reply or (lambda said: f"re: {said}")

    def stream(self, request):
        said = request.messages[-1].text
        self.seen.append(said)
        self.requests.append(request)
        if said in self.gates:
            self.started[said].set()
            assert self.gates[said].wait(10), f"{said!r} was never let go"
        text = self.reply(said)
        yield TextDelta(text)
        yield ModelResponse(Message.assistant(text, usage=Usage(10, 4), stop_reason="stop"))


def _store(runtime):
    from clawd.core.paths import state_dir
    from clawd.storage.files.jobs import FileJobs
    from clawd.storage.postgres.jobs import PgJobs

    db = getattr(runtime.storage, "db", None)
    return PgJobs(db) if db is not None else FileJobs(state_dir())


def _apps(client):
    """Each worker's app (one, or two behind ``Alternating``)."""
    return getattr(client.app, "apps", [client.app])


def _at(client, box: dict) -> None:
    """The last worker's automation reads the time from ``box["now"]``, the others' stays
    as it is now: with two workers, a job is claimed by the one the chat did not reach."""
    *others, last = _apps(client)
    start = box["now"]
    for app in others:
        app.state.gateway.background.runner.clock = lambda: start
    last.state.gateway.background.runner.clock = lambda: box["now"]


def _until(check, seconds: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.02)


def _busy(client) -> dict:
    """The main session's running turn and how many wait (on every worker)."""
    seen = client.get("/api/sessions/main/history?limit=1", headers=AUTH)
    assert seen.status_code == 200, seen.text
    return seen.json()["busy"]


def _runs(store, job_id):
    return store.runs(job_id, 10)


def _send(client, text: str, box: dict) -> threading.Thread:
    def send() -> None:
        box[text] = client.post("/api/sessions/main/messages", json={"text": text},
                                headers=AUTH)

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def _said(client) -> list[str]:
    items = client.get("/api/sessions/main/history?limit=50", headers=AUTH).json()["items"]
    return [i["text"] for i in items if i["type"] in ("user", "assistant")]


AUTOMATION = {"automation": {"tickSeconds": 0.05}}


def test_a_main_session_job_waits_behind_a_chat_turn_and_a_chat_waits_behind_it(
        tmp_path, one_or_two_workers):
    model = Gates("hello", "check the oven")
    main = make_runtime(tmp_path, model)
    store = _store(main)
    job = store.add(new_job("main", sched.at(DUE), "check the oven", T0, session="main",
                            deliver="web", name="oven"))
    box: dict = {"now": T0}
    with gateway(tmp_path, None, runtimes=[main], more=AUTOMATION) as client:
        _at(client, box)
        chat = _send(client, "hello", box)
        assert model.started["hello"].wait(10)
        box["now"] = DUE + timedelta(seconds=1)  # the job comes due while "hello" runs
        # the run is queued behind the chat turn, not run beside it nor failed
        _until(lambda: _busy(client)["queued"] == 1, what="the job's run queued")
        time.sleep(0.3)
        assert model.seen == ["hello"]
        assert [run["status"] for run in _runs(store, job["id"])] == ["running"]
        model.gates["hello"].set()
        assert model.started["check the oven"].wait(10)  # then the job's run
        chat.join(10)
        assert [e["text"] for e in events(box["hello"]) if e["type"] == "reply"] == [
            "re: hello"]
        later = _send(client, "and now?", box)  # sent while the job's run runs: it waits
        _until(lambda: _busy(client)["queued"] == 1, what="the chat turn queued")
        assert model.seen == ["hello", "check the oven"]
        model.gates["check the oven"].set()
        later.join(10)
        assert box["and now?"].status_code == 200, box["and now?"].text
        assert [e["text"] for e in events(box["and now?"]) if e["type"] == "reply"] == [
            "re: and now?"]
        _until(lambda: (_runs(store, job["id"]) or [{}])[0].get("delivery", {}).get(
            "status") == "delivered", what="the run delivered")
        said = _said(client)
        # with two workers, the one holding the session ran the run the other queued
        held = _apps(client)[0].state.gateway.hub
        assert [t.job["jobId"] for t in held.turns.values() if t.job] == [job["id"]]
    (run,) = _runs(store, job["id"])
    assert run["status"] == "ok" and run["reply"] == "re: check the oven", run
    assert run["delivery"]["target"] == "web"
    assert said == ["hello", "re: hello", "check the oven", "re: check the oven",
                    "and now?", "re: and now?"]


def _models(default, **others):
    """A resolver: ``others[ref]``'s provider for those refs, else ``default``'s."""
    from clawd.loop.runtime import fixed_models

    made = {ref: fixed_models(provider, 200_000) for ref, provider in others.items()}
    fallback = fixed_models(default, 200_000)
    return lambda ref: made.get(ref, fallback)(ref)


def _offered(request) -> list[str]:
    return sorted(spec.name for spec in request.tools)


def test_a_job_run_in_the_open_main_session_keeps_its_own_tools_and_model(
        tmp_path, one_or_two_workers):
    """The session is open (a chat turn just ran, the hub keeps it): the job's run offers
    only the job's tools on the job's model; the next chat turn has the session's own."""
    chat, alt = Gates(), Gates(reply=lambda said: f"alt: {said}")
    main = make_runtime(tmp_path, chat)
    main.models = _models(chat, **{"alt/model": alt})
    store = _store(main)
    job = store.add({**new_job("main", sched.at(DUE), "tidy up", T0, session="main",
                               tools=["read"]), "model": "alt/model"})
    box: dict = {"now": T0}
    with gateway(tmp_path, None, runtimes=[main], more=AUTOMATION,
                 raw={"idleSessionSeconds": 60}) as client:
        _at(client, box)
        assert client.post("/api/sessions/main/messages", json={"text": "hello"},
                           headers=AUTH).status_code == 200
        box["now"] = DUE + timedelta(seconds=1)
        _until(lambda: [r["status"] for r in _runs(store, job["id"])] == ["ok"],
               what="the run")
        assert client.post("/api/sessions/main/messages", json={"text": "and you?"},
                           headers=AUTH).status_code == 200
        said = _said(client)
    everything = _offered(chat.requests[0])
    assert "read" in everything and len(everything) > 1
    assert [r.messages[-1].text for r in alt.requests] == ["tidy up"]
    assert _offered(alt.requests[0]) == ["read"]  # the job's tools, on the job's model
    assert [r.messages[-1].text for r in chat.requests] == ["hello", "and you?"]
    assert _offered(chat.requests[1]) == everything  # the session's own again
    assert said == ["hello", "re: hello", "tidy up", "alt: tidy up", "and you?",
                    "re: and you?"]


def test_a_quiet_heartbeat_in_the_open_main_session_is_forgotten(tmp_path,
                                                                 one_or_two_workers):
    """The heartbeat goes through the main session's queue too: answered HEARTBEAT_OK, its
    turn leaves the history the next chat turn's model sees."""
    from clawd.scheduler import heartbeat

    from conftest import Clock

    now = datetime.now(timezone.utc)
    model = Gates(reply=lambda said: "HEARTBEAT_OK" if said.startswith("Read") or (
        "Tasks:" in said) else f"re: {said}")
    main = make_runtime(tmp_path, model, clock=Clock(now),
                        settings={"heartbeat": {"every": "30m"}})
    main.files.write("HEARTBEAT.md", "- look at the mail\n")
    store = _store(main)
    box: dict = {"now": now}
    with gateway(tmp_path, None, runtimes=[main], more=AUTOMATION,
                 raw={"idleSessionSeconds": 60}) as client:
        _at(client, box)
        assert client.post("/api/sessions/main/messages", json={"text": "hello"},
                           headers=AUTH).status_code == 200
        beat = heartbeat.job_id("main")
        _until(lambda: store.get(beat) is not None, what="the heartbeat job")
        box["now"] = now + timedelta(minutes=31)
        _until(lambda: [r["status"] for r in _runs(store, beat)] == ["ok"],
               what="the beat")
        assert client.post("/api/sessions/main/messages", json={"text": "again"},
                           headers=AUTH).status_code == 200
    said = [r.messages[-1].text for r in model.requests]
    assert said[0] == "hello" and "Tasks:" in said[1] and said[2] == "again"
    seen = [m.text for m in model.requests[2].messages]
    assert seen[0] == "hello" and seen[-1] == "again"
    assert not any("Tasks:" in text or "HEARTBEAT_OK" in text for text in seen)
