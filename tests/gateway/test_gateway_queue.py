"""One writer per session: a busy session queues (429 past its bound), sessions run side
by side, and the CLI and the gateway share the session lock."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from clawd.core.messages import Message, ModelResponse, TextDelta, Usage
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from gateway_client import AUTH, events, gateway

pytestmark = pytest.mark.slow  # worker threads


class Held:
    """A model whose first reply waits for the test; later ones answer at once."""

    name, model = "held", "held"

    def __init__(self):
        self.started, self.gate = threading.Event(), threading.Event()
        self.seen: list[str] = []

    def stream(self, request):
        text = request.messages[-1].text
        self.seen.append(text)
        if len(self.seen) == 1:
            self.started.set()
            self.gate.wait(10)
        yield TextDelta(f"re: {text}")
        yield ModelResponse(Message.assistant(f"re: {text}", usage=Usage(100, 5),
                                              stop_reason="stop"))


def _runtime(tmp_path, model):
    runtime = make_runtime(tmp_path, None)
    runtime.models = fixed_models(model, 200_000)
    return runtime


def _post(client, text, key="main", results=None):
    response = client.post(f"/api/sessions/{key}/messages", json={"text": text}, headers=AUTH)
    if results is not None:
        results[text] = response
    return response


def test_a_busy_session_queues_then_refuses_past_its_bound(tmp_path, one_or_two_workers):
    model = Held()
    with gateway(tmp_path, None, runtimes=[_runtime(tmp_path, model)],
                 raw={"maxQueuedPerSession": 1}) as client:
        results: dict = {}
        first = threading.Thread(target=_post, args=(client, "one", "main", results))
        first.start()
        assert model.started.wait(5)
        second = threading.Thread(target=_post, args=(client, "two", "main", results))
        second.start()
        for _ in range(200):  # the second waits in the queue, not on a lock
            busy = client.get("/api/sessions/main/history", headers=AUTH).json()["busy"]
            if busy["queued"] == 1:
                break
            threading.Event().wait(0.02)
        assert busy["queued"] == 1 and busy["running"]
        refused = _post(client, "three")
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert "try again" in refused.json()["error"]["message"]
        model.gate.set()
        first.join(10)
        second.join(10)
        assert events(results["one"])[-2]["text"] == "re: one"
        assert events(results["two"])[-2]["text"] == "re: two"
        items = client.get("/api/sessions/main/history", headers=AUTH).json()["items"]
    assert [i["text"] for i in items] == ["one", "re: one", "two", "re: two"]
    assert model.seen == ["one", "two"]  # never interleaved, "three" never sent


class Together:
    """A model that answers only once two requests are in flight at the same time."""

    name, model = "together", "together"

    def __init__(self):
        self.barrier = threading.Barrier(2, timeout=5)

    def stream(self, request):
        self.barrier.wait()  # BrokenBarrierError if the sessions ran one after the other
        yield ModelResponse(Message.assistant("both here", usage=Usage(100, 5),
                                              stop_reason="stop"))


def test_different_sessions_run_at_the_same_time(tmp_path, one_or_two_workers):
    with gateway(tmp_path, None, runtimes=[_runtime(tmp_path, Together())]) as client:
        results: dict = {}
        threads = [threading.Thread(target=_post, args=(client, f"hi {key}", key, results))
                   for key in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
    for text in ("hi a", "hi b"):
        assert events(results[text])[-2] == {"type": "reply", "text": "both here",
                                             "aborted": False}


HOLDER = """
import sys
from pathlib import Path
where, key, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
if where.startswith("postgresql"):
    from clawd.storage.postgres import database
    storage = database(where).agent("main")
else:
    from clawd.storage.files.storage import FileStorage
    storage = FileStorage("main", Path(where) / "ws", Path(where))
try:
    held = storage.hold(key, wait)
except Exception as exc:
    print("busy:", exc, flush=True)
    raise SystemExit(1)
print("held", flush=True)
sys.stdin.read()  # until the test closes it
held.release()
"""


def _holder(where, key: str, wait: float = 0) -> subprocess.Popen:
    """Another clawd process (a chat in a terminal) holding session ``key`` of the store
    ``where`` (a sessions folder or a database URL)."""
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(where), key, str(wait)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_the_cli_and_the_gateway_share_the_session_lock(tmp_path, monkeypatch,
                                                        one_or_two_workers):
    from clawd.sessions import lock

    monkeypatch.setattr(lock, "WAIT_SECONDS", 0.3)
    runtime = make_runtime(tmp_path, ScriptedProvider(default="ok"))
    database = getattr(runtime.storage, "db", None)
    where = database.url if database is not None else runtime.storage.sessions_dir
    with gateway(tmp_path, None, runtimes=[runtime], raw={"idleSessionSeconds": 30}) as client:
        # another process (a clawd chat) holds the session: the turn waits, then fails in
        # one line, and nothing is written
        child = _holder(where, "agent:main:main")
        assert child.stdout.readline().strip() == "held"
        busy = events(_post(client, "blocked"))
        assert busy[0]["type"] == "error" and "in use by another clawd process" in \
            busy[0]["message"]
        # in an HTTP client's words, not the command line's
        assert "--session" not in busy[0]["message"]
        assert "send it again" in busy[0]["message"]
        assert busy[-1]["type"] == "done" and busy[-1]["failed"] is True
        child.communicate("")
        assert events(_post(client, "from the web"))[-1]["failed"] is False
        other = _holder(where, "agent:main:main", wait=5)
        if database is None:
            # the gateway holds it (for idleSessionSeconds): a chat elsewhere is refused
            out, _ = other.communicate("", timeout=10)
            assert other.returncode == 1 and "in use by another clawd process" in out
        else:
            # asked on the database, the idle worker lets go: the chat joins at once
            assert other.stdout.readline().strip() == "held"
            other.communicate("", timeout=10)
    cli = Session.open(runtime, "agent:main:main")  # the gateway let go of it when it stopped
    assert [m.text for m in cli.history.messages] == ["from the web", "ok"]
    cli.close()


def test_a_session_is_not_busy_once_its_reply_has_ended(tmp_path, monkeypatch,
                                                         one_or_two_workers):
    from clawd.storage.postgres.shared import PgShared

    write = PgShared._flush

    def slow(self, batch):  # a database slow to take the turn's lines
        threading.Event().wait(0.3)
        write(self, batch)

    monkeypatch.setattr(PgShared, "_flush", slow)
    runtime = make_runtime(tmp_path, ScriptedProvider(default="ok"))
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        assert events(_post(client, "hello"))[-1]["failed"] is False
        # the next request goes to the other worker: it sees the turn ended
        busy = client.get("/api/sessions/main/history", headers=AUTH).json()["busy"]
    assert busy == {"running": None, "queued": 0}
