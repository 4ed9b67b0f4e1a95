"""The gateway's native API, driven in-process: auth, the event stream, history, idempotent
sends, abort, slash commands, files and memory under the tools' rules; each as one process
and as two workers on one database that take the requests in turn."""

from __future__ import annotations

import io
import json
import logging
import threading
import time

import pytest

from clawd.core.messages import ModelResponse, TextDelta
from clawd.frontends.commands import Chat
from clawd.frontends.render import Renderer, drive
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from gateway_client import AUTH, TOKEN, events, gateway, send

# every turn runs on a worker thread; each test runs as one process on files and as two
# workers on one PostgreSQL database taking the requests in turn
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_or_two_workers")]

def test_health_is_open_and_everything_else_needs_the_token(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with gateway(tmp_path, ScriptedProvider()) as client:
        assert client.get("/health").json()["ok"] is True
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Authorization": TOKEN}):
            refused = client.get("/api/sessions", headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["type"] == "unauthorized"
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []
        assert client.get("/openapi.json", headers=AUTH).json()["openapi"].startswith("3.")
    assert TOKEN not in caplog.text and "wrong-token" not in caplog.text


def test_a_scoped_token_reaches_its_agent_only(tmp_path):
    work = make_runtime(tmp_path / "w", ScriptedProvider(["hi"]))
    work.agent_id = "work"
    home = make_runtime(tmp_path / "h", ScriptedProvider())
    scoped = {"Authorization": "Bearer work-scoped-token-5678"}
    raw = {"auth": {"tokens": [{"token": "work-scoped-token-5678", "agents": ["work"]}]}}
    with gateway(tmp_path, None, raw=raw, runtimes=[home, work]) as client:
        assert [a["id"] for a in client.get("/api/agents", headers=scoped).json()["agents"]] \
            == ["work"]
        assert client.get("/api/sessions?agent=main", headers=scoped).status_code == 403
        # no agent named: the first one the token reaches, not the default it cannot
        assert client.get("/api/sessions", headers=scoped).json()["agent"] == "work"
        assert client.get("/api/sessions?agent=work", headers=scoped).status_code == 200
        denied = client.post("/api/sessions/agent:main:main/messages", json={"text": "x"},
                             headers=scoped)
        assert denied.status_code == 403
        ok = client.post("/api/sessions/agent:work:main/messages", json={"text": "x"},
                         headers=scoped)
        assert events(ok)[-1]["sessionKey"] == "agent:work:main"
        # another agent's key, whatever agent the request names, is not this token's
        other = client.get("/api/sessions/agent:main:main/history?agent=work", headers=scoped)
        assert other.status_code == 403, other.text
        # errors in HTTP words: no command-line flags
        crossed = client.get("/api/sessions/agent:work:main/history?agent=main", headers=AUTH)
        assert crossed.status_code == 400
        assert crossed.json()["error"]["message"] == (
            "the session key agent:work:main is of the agent work, not main (?agent=main)")
        short = client.get("/api/sessions/agent:work/history", headers=AUTH)
        assert short.status_code == 400 and "--" not in short.json()["error"]["message"]


def test_a_send_streams_the_events_of_json_stream(tmp_path):
    script = ["Hello there, friend."]
    with gateway(tmp_path, ScriptedProvider(list(script), chunk_size=4)) as client:
        streamed = send(client, "hi")
    # the same turn through clawd chat --json --stream's renderer
    out = io.StringIO()
    chat = Chat.open(make_runtime(tmp_path / "cli", ScriptedProvider(list(script), chunk_size=4)),
                "agent:main:main")
    renderer = Renderer(out, as_json=True, deltas=True)
    drive(chat.handle("hi"), renderer.event)
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    for line in streamed + printed:  # the workspace's path differs, and so the prompt's size
        line.pop("sessionId", None)
        line.pop("usage", None)
    assert streamed == printed
    assert [e["type"] for e in streamed] == ["waiting"] + ["delta"] * 5 + ["reply", "done"]
    assert streamed[0] == {"type": "waiting", "stage": "model"}


def test_history_pages_back_without_flush_turns(tmp_path):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider) as client:
        for n in range(3):
            send(client, f"message {n}")
        first = client.get("/api/sessions/main/history?limit=4", headers=AUTH).json()
        assert [i["text"] for i in first["items"]] == ["message 1", "ok", "message 2", "ok"]
        assert first["total"] == 6 and first["before"] == 2
        older = client.get(f"/api/sessions/main/history?limit=4&before={first['before']}",
                           headers=AUTH).json()
        assert [i["text"] for i in older["items"]] == ["message 0", "ok"]
        assert older["before"] is None
        listed = client.get("/api/sessions", headers=AUTH).json()["sessions"]
        assert listed[0]["key"] == "agent:main:main" and listed[0]["messages"] == 6
        assert client.get("/api/sessions/main/history?limit=x", headers=AUTH).status_code == 400


def test_a_retried_send_with_the_same_idempotency_key_runs_once(tmp_path):
    provider = ScriptedProvider(["only once"])
    with gateway(tmp_path, provider) as client:
        first = send(client, "do it", **{"Idempotency-Key": "k-1"})
        again = client.post("/api/sessions/main/messages", json={"text": "do it"},
                            headers={**AUTH, "Idempotency-Key": "k-1"})
        assert again.headers["X-Clawd-Replayed"] == "true"
        assert [e for e in events(again) if e["type"] != "delta"] == \
            [e for e in first if e["type"] != "delta"]
        other = client.post("/api/sessions/main/messages", json={"text": "something else"},
                            headers={**AUTH, "Idempotency-Key": "k-1"})
        assert other.status_code == 409
        history = client.get("/api/sessions/main/history", headers=AUTH).json()
    assert [i["text"] for i in history["items"]] == ["do it", "only once"]
    provider.assert_done()


class Gated:
    """A model that streams its first words, then waits for the test before the rest."""

    name, model = "gated", "gated"

    def __init__(self, first: str, rest: str):
        self.first, self.rest = first, rest
        self.started, self.gate = threading.Event(), threading.Event()

    def stream(self, request):
        from clawd.core.messages import Message, Usage

        yield TextDelta(self.first)
        self.started.set()
        self.gate.wait(10)
        yield TextDelta(self.rest)
        yield ModelResponse(Message.assistant(self.first + self.rest,
                                              usage=Usage(100, 10), stop_reason="stop"))


def _in_thread(fn, *args):
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn(*args)))
    thread.start()
    return thread, box


def test_abort_keeps_the_partial_reply_marked_as_ctrl_c_does(tmp_path):
    model = Gated("The quick brown", " fox")
    runtime = make_runtime(tmp_path, None)
    runtime.models = _models(model)
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        thread, box = _in_thread(send, client, "tell me")
        assert model.started.wait(5)
        stopped = client.post("/api/sessions/main/abort", headers=AUTH).json()
        assert stopped["aborted"] is True
        _heard(client)
        model.gate.set()
        thread.join(10)
        streamed = box["value"]
        assert streamed[-1]["interrupted"] is True
        assert any(e["type"] == "notice" and "interrupted" in e["text"] for e in streamed)
        items = client.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert items[-1] == {**items[-1], "text": "The quick brown", "interrupted": True}
        assert client.post("/api/sessions/main/abort", headers=AUTH).json()["aborted"] is False



def test_a_reply_stopped_for_looping_keeps_its_notice_in_the_history(tmp_path):
    loop = "Here is what to pack:\n" + "Sunglasses\n" * 80
    stopped = "the reply was stopped: the model kept repeating itself"
    with gateway(tmp_path, ScriptedProvider([loop], chunk_size=4)) as client:
        streamed = send(client, "what should I pack?")
        assert {"type": "notice", "text": stopped} in streamed
        items = client.get("/api/sessions/main/history", headers=AUTH).json()["items"]
        assert items[-1] == {**items[-1], "type": "assistant", "notice": stopped,
                             "text": "Here is what to pack:\nSunglasses"}
        assert "notice" not in items[0]  # the message, and any reply not stopped, have none

def _heard(client) -> None:
    """Wait until the worker running the turn has heard the abort (another worker's reaches
    it through the database, a moment later)."""
    apps = getattr(client.app, "apps", [client.app])
    deadline = time.monotonic() + 10
    while not any(t.token.cancelled for app in apps for t in app.state.gateway.hub.turns.values()):
        assert time.monotonic() < deadline, "the abort never reached the running turn"
        time.sleep(0.01)


def _models(provider):
    from clawd.loop.runtime import fixed_models

    return fixed_models(provider, 200_000)


def test_slash_commands_go_through_the_registry(tmp_path):
    with gateway(tmp_path, ScriptedProvider(["hi"])) as client:
        send(client, "hello")
        status = client.post("/api/sessions/main/messages", json={"text": "/status"},
                             headers={**AUTH, "Accept": "application/json"}).json()
        assert status["events"][0]["name"] == "status"
        assert "Context:" in status["events"][0]["text"]
        unknown = send(client, "/nope")
        assert unknown[0]["type"] == "error" and "unknown command /nope" in unknown[0]["message"]
        new = send(client, "/new")
        assert new[-1] == {"type": "command", "name": "new", "text": new[-1]["text"]}
        commands = client.get("/api/commands", headers=AUTH).json()["commands"]
        assert {"new", "compact", "status", "undo", "retry"} <= {c["name"] for c in commands}


def test_an_empty_or_malformed_send_is_one_clear_error(tmp_path):
    with gateway(tmp_path, ScriptedProvider()) as client:
        for body in ({"text": "  "}, {"words": "x"}):
            refused = client.post("/api/sessions/main/messages", json=body, headers=AUTH)
            assert refused.status_code == 400 and "empty" in refused.json()["error"]["message"]
        broken = client.post("/api/sessions/main/messages", content=b"{nope",
                             headers={**AUTH, "Content-Type": "application/json"})
        assert broken.status_code == 400 and "not JSON" in broken.json()["error"]["message"]
        bad_key = client.post("/api/sessions/agent:main:/messages", json={"text": "x"},
                              headers=AUTH)
        assert bad_key.status_code == 400


def test_files_follow_the_tools_rules(tmp_path):
    runtime = make_runtime(tmp_path, ScriptedProvider())
    files = runtime.files  # the workspace's files: a folder, or the database's rows
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        files.write("MEMORY.md", "- the door code is 4711\n")
        files.write("notes.md", "shared notes\n")
        read = client.get("/api/files/MEMORY.md", headers=AUTH).json()
        assert read["content"] == "- the door code is 4711\n"
        group = client.get("/api/files/MEMORY.md?sessionKey=telegram:group:42", headers=AUTH)
        assert group.status_code == 403 and "4711" not in group.text
        assert client.get("/api/files/notes.md?sessionKey=telegram:group:42",
                          headers=AUTH).json()["content"] == "shared notes\n"
        for outside in ("..%2Fsecret.txt", "%2Fetc%2Fpasswd", "memory%2F..%2F..%2Fx"):
            refused = client.get(f"/api/files/{outside}", headers=AUTH)
            assert refused.status_code == 403, outside
        assert client.get("/api/files/missing.md", headers=AUTH).status_code == 404
        wrote = client.put("/api/files/memory/2026-11-22.md",
                           json={"content": "- met Ada\n", "append": True}, headers=AUTH)
        assert wrote.status_code == 200 and "appended" in wrote.json()["result"]
        replace = client.put("/api/files/MEMORY.md?sessionKey=telegram:group:42",
                             json={"content": "gone"}, headers=AUTH)
        assert replace.status_code == 403
        assert files.read("MEMORY.md") == "- the door code is 4711\n"
        assert files.read("memory/2026-11-22.md") == "- met Ada\n"
        assert client.put("/api/files/..%2Fx.md", json={"content": "x"},
                          headers=AUTH).status_code == 403


def test_memory_search_sees_what_the_session_may_see(tmp_path):
    from clawd.storage.files.memory import open_file_index

    from memory_fakes import FakeEmbedder

    runtime = make_runtime(tmp_path, ScriptedProvider())
    (runtime.workspace / "MEMORY.md").write_text("- Ada keeps the ledger\n")
    runtime.memory = open_file_index("main", runtime.workspace, runtime.settings.memory_search,
                                     tmp_path / "state", embedder=FakeEmbedder())
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        found = client.get("/api/memory/search?q=ledger", headers=AUTH).json()
        assert found["results"][0]["path"] == "MEMORY.md"
        group = client.get("/api/memory/search?q=ledger&sessionKey=discord:channel:9",
                           headers=AUTH)
        assert group.status_code == 403 and "Ada" not in group.text


def test_an_ended_session_is_read_by_its_id_and_sessions_are_deleted(tmp_path,
                                                                      one_or_two_workers):
    provider = ScriptedProvider(default="ok")
    runtime = make_runtime(tmp_path, provider)
    started = time.monotonic()
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        send(client, "first words", key="trip")
        first = client.get("/api/sessions/trip/history", headers=AUTH).json()["sessionId"]
        send(client, "/new", key="trip")
        send(client, "second words", key="trip")
        send(client, "elsewhere", key="other")
        ended = client.get(f"/api/sessions/trip/history?sessionId={first}", headers=AUTH)
        assert ended.status_code == 200 and ended.json()["sessionId"] == first
        assert [i["text"] for i in ended.json()["items"] if i["type"] == "user"] == \
            ["first words"]
        # only a session of that key, by its exact id
        for wrong in (first, "../sessions", first[:6]):
            key = "other" if wrong == first else "trip"
            assert client.get(f"/api/sessions/{key}/history?sessionId={wrong}",
                              headers=AUTH).status_code == 404, wrong
        # a delete from another site's page is refused, like every change
        assert client.delete(f"/api/sessions/trip?sessionId={first}", headers={
            **AUTH, "Origin": "https://evil.example"}).status_code == 403
        gone = client.delete(f"/api/sessions/trip?sessionId={first}", headers=AUTH)
        assert gone.status_code == 200 and gone.json()["deleted"] is True
        listed = client.get("/api/sessions?all=true", headers=AUTH).json()["sessions"]
        assert first not in [s["sessionId"] for s in listed]
        assert client.delete("/api/sessions/trip", headers=AUTH).status_code == 200
        assert client.delete("/api/sessions/trip", headers=AUTH).status_code == 404
        keys = [s["key"] for s in client.get("/api/sessions", headers=AUTH).json()["sessions"]]
        assert keys == ["agent:main:other"]
    # /new's new session has the key: the old one let go at once, so the worker that got
    # the next turn did not wait (gateway.SHARED_WAIT_SECONDS) for it
    assert time.monotonic() - started < 60
    # the transcripts are kept aside: files moved to deleted/, or rows marked deleted
    if one_or_two_workers == "one":
        kept = tmp_path / "state" / "agents" / "main" / "sessions" / "deleted"
        assert len(list(kept.iterdir())) == 2
    else:
        assert len(runtime.storage._ids(deleted=True)) == 2


def test_a_session_is_renamed_by_a_title_line_in_its_transcript(tmp_path, one_or_two_workers):
    with gateway(tmp_path, ScriptedProvider(default="ok")) as client:
        send(client, "plan the kyoto trip in october", key="trip")
        named = client.patch("/api/sessions/trip", json={"title": "  Kyoto   trip "},
                             headers=AUTH)
        assert named.status_code == 200 and named.json()["title"] == "Kyoto trip"
        [row] = client.get("/api/sessions", headers=AUTH).json()["sessions"]
        assert row["title"] == "Kyoto trip"
        last = row["lastActivity"]
        for bad in ({"title": "   "}, {"title": 5}, {"title": "x" * 201}, {}):
            assert client.patch("/api/sessions/trip", json=bad, headers=AUTH).status_code \
                == 400, bad
        assert client.patch("/api/sessions/nosuch", json={"title": "x"},
                            headers=AUTH).status_code == 404
    if one_or_two_workers != "one":
        return  # the rest is of sessions.json, a file
    # the title survives a rebuilt store, and is no activity
    sessions = tmp_path / "state" / "agents" / "main" / "sessions"
    (sessions / "sessions.json").unlink()
    from clawd.storage.files.storage import FileStorage
    from clawd.storage.session_admin import rows

    [again] = rows(FileStorage("main", tmp_path / "ws", sessions), ended=False)
    assert again.summary.title == "Kyoto trip" and again.to_json()["lastActivity"] == last
