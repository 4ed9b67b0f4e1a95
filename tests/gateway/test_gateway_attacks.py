"""The gateway under attack: each probe that once got through, as a test.

Weak tokens; ``X-Forwarded-For`` forged to dodge the wrong-token limit; the owner locked out
by requests anyone's web page can make; session keys that are no valid header value; people
told apart by the exact ``user`` or chat id; a flood of bookkeeping requests; bodies no
turn can take; shutdown and keep-alives. The in-process app where that is enough, a real
``clawd serve`` (uvicorn) where the server's own behaviour is the point. The in-process
probes run as one process on files and as two workers on one database taking the requests
in turn: an attacker's requests reach whichever worker a load balancer picks."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, unquote

import httpx
import pytest

from clawd.config import Config
from clawd.config.gateway import token_weakness
from clawd.core.errors import ConfigError
from clawd.frontends.cli import main
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.frontends.gateway.server import local_token
from clawd.frontends.hub import feed
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from gateway_client import AUTH, BASE, TOKEN, events, free_port, gateway, send, start_serve

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_or_two_workers")]

OPENAI = {"http": {"endpoints": {"chatCompletions": {"enabled": True}}}}


def user_texts(client, key: str, **params) -> list[str]:
    found = client.get(f"/api/sessions/{quote(key, safe='')}/history", headers=AUTH,
                       params=params).json()
    return [item["text"] for item in found["items"] if item["type"] == "user"]


# --- 1. weak tokens ---------------------------------------------------------------------------

@pytest.mark.parametrize("token", ["a", "aaaaaaaaaaaaaaaaaaaaaaaa", "abcdefghijklmnopqrst",
                                   "1234567890123456789012", "passwordpassword"])
def test_a_weak_environment_token_is_refused_at_start(token, capsys, monkeypatch,
                                                     isolated_home):
    monkeypatch.setenv("CLAWD_GATEWAY_TOKEN", token)
    for host in ([], ["--host", "0.0.0.0"]):  # loopback, and beyond it
        assert main(["serve", *host]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "CLAWD_GATEWAY_TOKEN" in err
        assert "clawd serve --new-token" in err


def test_a_weak_configured_token_is_a_config_error():
    for raw in ({"token": "aaaaaaaaaaaaaaaaaaaa"}, {"token": "short"},
                {"tokens": [{"token": "0123456789abcdefghij", "agents": ["work"]}]}):
        with pytest.raises(ValueError, match="--new-token"):
            Config.model_validate({"gateway": {"auth": raw}})


def test_new_token_prints_a_strong_one(capsys):
    assert main(["serve", "--new-token"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["serve", "--new-token"]) == 0
    second = capsys.readouterr().out.strip()
    assert first != second and len(first) >= 40
    assert token_weakness(first) is None and token_weakness(second) is None


def test_the_token_file_is_made_0600_once_and_never_rewritten(tmp_path):
    state = tmp_path / "state"
    token, path = local_token(state)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and token_weakness(token) is None
    assert local_token(state) == (token, path)
    assert [p.name for p in state.iterdir()] == ["gateway-token"]  # no spare file left


def test_a_token_file_others_may_read_is_refused_with_the_chmod(tmp_path):
    state = tmp_path / "state"
    token, path = local_token(state)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match=f"chmod 600 {path}"):
        local_token(state)
    assert path.read_text().strip() == token  # neither reused nor rewritten
    os.chmod(path, 0o600)
    path.write_text("aaaaaaaaaaaaaaaaaaaaaaa\n")
    with pytest.raises(ConfigError, match="too little variety"):
        local_token(state)
    assert path.read_text() == "aaaaaaaaaaaaaaaaaaaaaaa\n"


def test_two_starts_at_once_agree_on_one_token(tmp_path):
    state = tmp_path / "state"
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: local_token(state)[0], range(16)))
    assert len(set(found)) == 1


# --- 2. forged X-Forwarded-For -----------------------------------------------------------------

def test_a_forged_forwarded_for_does_not_dodge_the_limit(isolated_home, local_config):
    """A real ``clawd serve``: uvicorn alone would believe the header from 127.0.0.1."""
    config_path = isolated_home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "auth": {"rateLimit": {"maxAttempts": 3}}}
    config_path.write_text(json.dumps(config))
    child, url = start_serve({**os.environ, "CLAWD_GATEWAY_TOKEN": TOKEN}, port)
    try:
        codes = [httpx.get(f"{url}/api/sessions", timeout=5, headers={
            "Authorization": "Bearer wrong-token-0123456789",
            "X-Forwarded-For": f"203.0.113.{n}", "X-Real-IP": f"203.0.113.{n}"}).status_code
            for n in range(6)]
        assert codes == [401, 401, 429, 429, 429, 429]
    finally:
        child.terminate()
        child.wait(20)


def test_forwarded_for_is_believed_from_a_trusted_proxy_only(tmp_path):
    raw = {"trustedProxies": ["10.0.0.0/8"], "auth": {"rateLimit": {"maxAttempts": 2}}}
    config = Config.model_validate({"gateway": {"idleSessionSeconds": 0, **raw}})
    runtime = make_runtime(tmp_path, ScriptedProvider())
    app = create_app(config, ServedAgents.of_runtimes([runtime], config), TOKEN)
    wrong = {"Authorization": "Bearer wrong-token-0123456789"}
    from starlette.testclient import TestClient

    with TestClient(app, base_url=BASE, client=("10.1.2.3", 40000)) as proxy:
        # each real client behind the proxy is counted on its own
        for n in range(4):
            assert proxy.get("/api/sessions", headers={
                **wrong, "X-Forwarded-For": f"198.51.100.{n}, 10.9.9.9"}).status_code == 401
        same = {**wrong, "X-Forwarded-For": "spoofed, 198.51.100.77"}
        assert [proxy.get("/api/sessions", headers=same).status_code
                for _ in range(3)] == [401, 429, 429]
        # another client behind the proxy is not locked out by that one
        assert proxy.get("/api/sessions", headers={
            **AUTH, "X-Forwarded-For": "198.51.100.78"}).status_code == 200
    with TestClient(app, base_url=BASE, client=("192.0.2.1", 40000)) as direct:
        # not a proxy of ours: its header is ignored, its own address counted
        codes = [direct.get("/api/sessions", headers={
            **wrong, "X-Forwarded-For": f"198.51.100.{n}"}).status_code for n in range(3)]
        assert codes == [401, 429, 429]


# --- 3. the owner locked out by anyone's page --------------------------------------------------

def test_requests_without_a_token_never_lock_the_owner_out(tmp_path):
    raw = {"auth": {"rateLimit": {"maxAttempts": 3}}}
    with gateway(tmp_path, ScriptedProvider(default="ok"), raw=raw) as client:
        for _ in range(20):  # an <img>, a no-cors fetch: no Authorization header
            assert client.get("/api/sessions").status_code == 401
            assert client.post("/api/sessions/main/messages", content=b"x",
                               headers={"Content-Type": "text/plain"}).status_code == 401
        for _ in range(20):  # refused for Origin or Host before any token is looked at
            assert client.post("/api/sessions/main/messages", json={"text": "x"}, headers={
                "Authorization": "Bearer wrong-token-0123456789",
                "Origin": "https://evil.example"}).status_code == 403
            assert client.get("/api/sessions", headers={
                "Authorization": "Bearer wrong-token-0123456789",
                "Host": "evil.example"}).status_code == 403
        assert client.get("/api/sessions", headers=AUTH).status_code == 200
        assert [e["type"] for e in send(client, "hello")][-1] == "done"


# --- 4. session keys that are no valid header value ------------------------------------------

def test_a_unicode_session_key_works_end_to_end(tmp_path):
    provider = ScriptedProvider(default="ok")
    raw = OPENAI
    with gateway(tmp_path, provider, raw=raw) as client:
        key = "日本の旅 ☃"
        response = client.post(f"/api/sessions/{quote(key, safe='')}/messages",
                               json={"text": "hello"}, headers=AUTH)
        assert response.status_code == 200
        assert events(response)[-1]["type"] == "done"
        header = response.headers["X-Clawd-Session-Key"]
        assert header.isascii() and unquote(header) == f"agent:main:{key}"
        turn = response.headers["X-Clawd-Turn-Id"]
        again = client.get(f"/api/turns/{turn}/events", headers=AUTH)
        assert unquote(again.headers["X-Clawd-Session-Key"]) == f"agent:main:{key}"
        assert user_texts(client, key) == ["hello"]  # one turn, not two
        # the same key through /v1, percent-encoded in its header
        completed = client.post("/v1/chat/completions", headers={
            **AUTH, "X-Clawd-Session-Key": quote(key)}, json={
            "model": "clawd", "messages": [{"role": "user", "content": "again"}]})
        assert completed.status_code == 200
        assert unquote(completed.headers["X-Clawd-Session-Key"]) == f"agent:main:{key}"
        assert user_texts(client, key) == ["hello", "again"]
        listed = client.get("/api/sessions", headers=AUTH).json()["sessions"]
        assert [s["key"] for s in listed] == [f"agent:main:{key}"]


@pytest.mark.parametrize("key", ["team/alpha", "a/history", "/lead/", "a/b/messages"])
def test_a_key_with_a_slash_made_through_v1_is_reached_on_every_native_route(tmp_path, key):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        made = client.post("/v1/chat/completions", headers={
            **AUTH, "X-Clawd-Session-Key": quote(key)}, json={
            "model": "clawd", "messages": [{"role": "user", "content": "first"}]})
        assert made.status_code == 200
        full = unquote(made.headers["X-Clawd-Session-Key"])
        path = f"/api/sessions/{quote(key, safe='')}"
        sent = client.post(f"{path}/messages", json={"text": "second"}, headers=AUTH)
        assert unquote(sent.headers["X-Clawd-Session-Key"]) == full
        assert user_texts(client, key) == ["first", "second"]
        context = client.get(f"{path}/context", headers=AUTH)
        assert context.status_code == 200 and context.json()["sessionKey"] == full
        assert client.post(f"{path}/abort", headers=AUTH).json()["aborted"] is False
        renamed = client.patch(path, json={"title": "Team"}, headers=AUTH)
        assert renamed.status_code == 200, renamed.text
        listed = client.get("/api/sessions", headers=AUTH).json()["sessions"]
        assert [(s["key"], s["title"]) for s in listed] == [(full, "Team")]
        assert client.delete(path, headers=AUTH).json()["deleted"] is True
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []


def test_a_route_that_is_not_there_answers_json(tmp_path):
    with gateway(tmp_path, ScriptedProvider()) as client:
        missing = client.get("/api/nothing/here", headers=AUTH)
        assert missing.status_code == 404
        assert missing.json()["error"] == {"message": "no route GET /api/nothing/here",
                                           "type": "not_found", "code": 404}
        wrong = client.put("/api/sessions/main/history", headers=AUTH)
        assert wrong.status_code == 405 and "GET" in wrong.headers["Allow"]
        assert wrong.json()["error"]["type"] == "method_not_allowed"


@pytest.mark.parametrize("key", ["a%0D%0Ab", "a%0Ab", "nul%00", "ta%09b", "%7F", "%20%20",
                                 "k" * 300])
def test_a_key_that_can_never_work_is_refused_before_anything_runs(tmp_path, key):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        refused = client.post(f"/api/sessions/{key}/messages", json={"text": "hi"},
                              headers=AUTH)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["type"] == "invalid_request_error"
        for route in ("history", "context"):
            assert client.get(f"/api/sessions/{key}/{route}", headers=AUTH).status_code == 400
        header = client.post("/v1/chat/completions", headers={
            **AUTH, "X-Clawd-Session-Key": key}, json={
            "model": "clawd", "messages": [{"role": "user", "content": "hi"}]})
        assert header.status_code == 400
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []
    assert provider.requests == []


# --- 5. people told apart ---------------------------------------------------------------------

def test_distinct_users_and_chat_ids_get_distinct_sessions(tmp_path):
    provider = ScriptedProvider(default="noted")
    long = "x" * 90
    users = ["alice@example.com", "alice-example.com", "ALICE@EXAMPLE.COM", " alice@example.com",
             long + "1", long + "2"]
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        def ask(text: str, **extra) -> str:
            response = client.post("/v1/chat/completions", headers={**AUTH, **extra.pop(
                "headers", {})}, json={"model": "clawd", "messages": [
                    {"role": "user", "content": text}], **extra})
            assert response.status_code == 200
            return unquote(response.headers["X-Clawd-Session-Key"])

        keys = [ask(f"secret of {n}", user=user) for n, user in enumerate(users)]
        assert len(set(keys)) == len(users)
        assert keys[0].startswith("agent:main:openai:user:alice-example.com-")
        assert ask("again", user="alice@example.com") == keys[0]  # the same person: one session
        for n, key in enumerate(keys):
            assert user_texts(client, key) == [f"secret of {n}"] + (["again"] if n == 0 else [])
        chats = [ask(f"chat {c}", headers={"X-OpenWebUI-Chat-Id": c})
                 for c in ("Chat/1", "chat-1", "CHAT/1")]
        assert len(set(chats)) == 3


# --- 6. bookkeeping: bounded, and known by its whole shape -------------------------------------

LIBRECHAT_TITLE = ("Provide a concise, 5-word-or-less title for the conversation, using title "
                   "case conventions. Only return the title itself.\n\nConversation:\n"
                   "User: how do tide pools form?\nAI: Tide pools form where the sea ...")


def test_a_flood_of_bookkeeping_is_bounded_and_reads_stay_responsive(tmp_path,
                                                                     one_or_two_workers):
    release = threading.Event()

    def slow_title(request):
        release.wait(20)
        return "Tide Pools"

    provider = ScriptedProvider(default=slow_title)
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        send(client, "first message")  # a session to read
        body = {"model": "clawd", "messages": [{"role": "user", "content": LIBRECHAT_TITLE}]}

        def title(_: int) -> int:
            return client.post("/v1/chat/completions", json=body, headers=AUTH).status_code

        with ThreadPoolExecutor(45) as pool:
            asked = [pool.submit(title, n) for n in range(45)]
            refused = [f for f in asked if _done_within(f, 10)]
            # the rest wait on the model; history and the session list still answer
            started = time.monotonic()
            assert user_texts(client, "main") == ["first message"]
            assert client.get("/api/sessions", headers=AUTH).status_code == 200
            assert time.monotonic() - started < 5
            release.set()
            codes = [f.result(30) for f in asked]
        assert codes.count(429) == len(refused) and codes.count(200) == 45 - len(refused)
        # four at once and eight waiting, in each worker (a bound of the process's threads)
        workers = 2 if one_or_two_workers == "two" else 1
        assert 1 <= codes.count(200) <= 12 * workers
    # none of them entered the session
    assert len([r for r in provider.requests if r.tools]) == 1


def _done_within(future, seconds: float) -> bool:
    try:
        return future.result(seconds) == 429
    except TimeoutError:
        return False


@pytest.mark.parametrize("messages", [
    # a person asking for a title in their own words
    [{"role": "user", "content": "Give me a concise, 5-word-or-less title for the conversation "
                                 "we had about tide pools yesterday."}],
    # the whole phrase, but inside a conversation
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
     {"role": "user", "content": LIBRECHAT_TITLE}],
    # Open WebUI's task start with no chat history in it
    [{"role": "user", "content": "### Task: plan my week, please"}],
])
def test_a_message_that_only_mentions_a_task_phrase_is_a_message(tmp_path, messages):
    provider = ScriptedProvider(default="sure")
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        response = client.post("/v1/chat/completions", headers={**AUTH, "X-Clawd-Session-Key":
                                                                "main"},
                               json={"model": "clawd", "messages": messages})
        assert response.status_code == 200 and "X-Clawd-Bookkeeping" not in response.headers
        assert user_texts(client, "main") == [messages[-1]["content"]]


def test_librechat_s_title_request_is_bookkeeping(tmp_path):
    provider = ScriptedProvider(default="Tide Pools")
    with gateway(tmp_path, provider, raw=OPENAI) as client:
        response = client.post("/v1/chat/completions", headers={**AUTH, "X-Clawd-Session-Key":
                                                                "main"}, json={
            "model": "clawd", "messages": [{"role": "system", "content": LIBRECHAT_TITLE}]})
        assert response.status_code == 200 and response.headers["X-Clawd-Bookkeeping"] == "true"
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []


# --- 7. bodies no turn can take ----------------------------------------------------------------

DEEP = b'{"text": "hi", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"


@pytest.mark.parametrize("route, body", [
    ("/api/sessions/main/messages", DEEP),
    ("/api/sessions/main/messages", b'{"text": "caf\\ud800"}'),
    ("/api/sessions/main/messages", b'{"text": "caf\xe9"}'),
    ("/api/sessions/main/messages", b'{"text": 5}'),
    ("/api/sessions/main/messages", b'["text"]'),
    ("/v1/chat/completions", b'{"model": "clawd", "messages": ' + b"[" * 50_000 + b"]" * 50_000
     + b"}"),
    ("/v1/chat/completions",
     b'{"model": "clawd", "messages": [{"role": "user", "content": "caf\\udc80"}]}'),
    ("/v1/chat/completions", b'{"model": "clawd", "messages": []}'),
    ("/api/files/notes.md", b'{"content": "\\ud83d"}'),
    ("/api/files/notes.md", b'{"content": "x", "append": "yes"}'),
])
def test_a_body_no_turn_can_take_is_400_and_nothing_runs(tmp_path, route, body, capfd):
    provider = ScriptedProvider(default="ok")
    raw = {**OPENAI, "maxBodyBytes": 1_000_000}
    with gateway(tmp_path, provider, raw=raw) as client:
        method = client.put if route.startswith("/api/files") else client.post
        refused = method(route, content=body, headers={**AUTH,
                                                         "Content-Type": "application/json"})
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == 400 and "\n" not in error["message"]
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []
    assert provider.requests == [] and not (tmp_path / "ws" / "notes.md").exists()
    assert "Traceback" not in capfd.readouterr().err


def test_an_unexpected_failure_is_a_json_500_in_one_line(tmp_path, capfd, monkeypatch):
    from clawd.frontends.gateway import native

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(native, "_context", broken)
    with gateway(tmp_path, ScriptedProvider()) as client:
        failed = client.get("/api/sessions/main/context", headers=AUTH)
        assert failed.status_code == 500
        assert failed.json()["error"]["type"] == "server_error"
        assert client.get("/api/sessions", headers=AUTH).status_code == 200
    assert "Traceback" not in capfd.readouterr().err


# --- 8. keep-alives, and no store read on the event loop --------------------------------------

def test_a_quiet_stream_gets_keep_alive_comments(tmp_path, monkeypatch):
    monkeypatch.setattr(feed, "HEARTBEAT_SECONDS", 0.05)

    def slow(request):
        time.sleep(0.4)
        return "at last"

    with gateway(tmp_path, ScriptedProvider(default=slow), raw=OPENAI) as client:
        response = client.post("/api/sessions/main/messages", json={"text": "hi"},
                               headers=AUTH)
        assert ": keep-alive" in response.text
        assert events(response)[-1]["type"] == "done"
        streamed = client.post("/v1/chat/completions", headers=AUTH, json={
            "model": "clawd", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        assert ": keep-alive" in streamed.text and streamed.text.endswith("data: [DONE]\n\n")


def test_history_reads_the_store_off_the_event_loop(tmp_path, monkeypatch):
    import asyncio

    from clawd.storage.files.sessions import SessionStore

    on_loop = []
    real_get = SessionStore.get

    def get(self, key):
        try:
            asyncio.get_running_loop()
            on_loop.append(key)
        except RuntimeError:
            pass
        return real_get(self, key)

    monkeypatch.setattr(SessionStore, "get", get)
    with gateway(tmp_path, ScriptedProvider(default="ok")) as client:
        send(client, "hello")
        assert user_texts(client, "main") == ["hello"]
        assert client.get("/api/sessions/main/context", headers=AUTH).status_code == 200
    assert on_loop == []


# --- 9. paths that are not what they seem -----------------------------------------------------

def test_a_path_with_a_line_break_or_nul_is_logged_in_one_escaped_line(tmp_path, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="clawd.access")
    forged = "/api/x%0A2025-01-01 GET /api/sessions 200 1 ms%00%E2%80%AE"
    with gateway(tmp_path, ScriptedProvider()) as client:
        assert client.get(forged, headers=AUTH).status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "clawd.access"]
    assert len(lines) == 1 and not any(ch in lines[0] for ch in "\n\r\x00\u202e")
    # when, pid, client, person, method, path, status, time: the path one field, escaped
    fields = lines[0].split(" ")
    assert len(fields) == 8 and fields[3:7] == [
        "-", "GET", "/api/x%0A2025-01-01%20GET%20/api/sessions%20200%201%20ms%00%E2%80%AE",
        "404"]


@pytest.mark.parametrize("turn", ["%00", "%0A", "a%00b", "%7F"])
def test_a_turn_id_no_turn_can_have_is_a_json_404(tmp_path, turn, capfd):
    with gateway(tmp_path, ScriptedProvider()) as client:
        for _ in range(2):  # under two workers: each of them
            missing = client.get(f"/api/turns/{turn}/events", headers=AUTH)
            assert missing.status_code == 404, missing.text
            assert missing.json()["error"]["type"] == "not_found"
    assert "Traceback" not in capfd.readouterr().err


def test_an_idempotency_key_with_a_nul_is_a_400_and_nothing_runs(tmp_path, capfd):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider) as client:
        refused = client.post("/api/sessions/main/messages", headers=AUTH,
                              json={"text": "hi", "idempotencyKey": "send\u00001"})
        assert refused.status_code == 400, refused.text
        assert "idempotency key" in refused.json()["error"]["message"]
    assert provider.requests == []
    assert "Traceback" not in capfd.readouterr().err
