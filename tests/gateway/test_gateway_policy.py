"""The gateway's pure rules: binding, tokens, Host and Origin, failed-auth limits, and the
history a client is shown."""

from __future__ import annotations

import pytest

from clawd.config import Config
from clawd.config.gateway import Gateway
from clawd.core.errors import ConfigError
from clawd.core.messages import Message, TextPart, ToolCall
from clawd.frontends.gateway.history import items, page
from clawd.frontends.gateway.policy import (
    AcceptedTokens,
    bind_host,
    check_bind,
    host_allowed,
    origin_allowed,
)
from clawd.frontends.hub.sign_ins import FailedAuth

TOKEN = "s3cret-token-0123456789"


def gateway(**raw) -> Gateway:
    return Config.model_validate({"gateway": raw}).gateway


def test_the_defaults_are_the_spec_s():
    gw = Gateway()
    assert (gw.port, gw.bind, gw.auth.mode, gw.auth.token) == (18789, "loopback", "token", None)
    assert gw.http.endpoints.chat_completions.enabled is False
    assert bind_host(gw) == "127.0.0.1" and bind_host(gw, "::1") == "::1"


def test_beyond_loopback_needs_a_token():
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, Gateway(), None)  # loopback: fine without one
    with pytest.raises(ConfigError, match="needs a token to listen on 0.0.0.0"):
        check_bind("0.0.0.0", Gateway(), None)
    check_bind("0.0.0.0", Gateway(), TOKEN)
    with pytest.raises(ConfigError, match="loopback only"):
        check_bind("192.168.1.5", gateway(auth={"mode": "none"}), TOKEN)


def test_a_scoped_token_reaches_only_its_agents():
    work = "work-scoped-token-5678"
    scoped = gateway(auth={"tokens": [{"token": work, "agents": ["Work"]}]})
    tokens = AcceptedTokens.of(scoped, TOKEN)
    assert tokens.agents(f"Bearer {TOKEN}") is None  # every agent
    assert tokens.agents("bearer " + work) == frozenset({"work"})
    for wrong in (None, "", "Bearer", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer " + work[:-1]):
        assert tokens.agents(wrong) is False
    assert AcceptedTokens.of(gateway(auth={"mode": "none"}), None).agents(None) is None


def test_a_token_too_short_or_an_empty_scope_is_a_config_error():
    for raw in ({"auth": {"token": "short"}},
                {"auth": {"tokens": [{"token": "x" * 20, "agents": ["main"]}]}},
                {"auth": {"tokens": [{"token": "work-scoped-token-5678", "agents": []}]}}):
        with pytest.raises(ValueError):
            gateway(**raw)


def test_host_names_are_checked_against_dns_rebinding():
    allowed = ["clawd.lan"]
    for host in ("127.0.0.1:18789", "localhost:18789", "[::1]:18789", "192.168.1.5",
                 "CLAWD.lan:80"):
        assert host_allowed(host, allowed), host
    for host in (None, "", "evil.example:18789", "127.0.0.1.nip.io", "localhost.evil.com"):
        assert not host_allowed(host, allowed), host


def test_state_changing_requests_from_another_origin_are_refused():
    own = ("http", "127.0.0.1:18789")
    assert origin_allowed("POST", None, own[1], own[0], [])  # not a browser
    assert origin_allowed("GET", "https://evil.example", own[1], own[0], [])
    assert origin_allowed("POST", "http://127.0.0.1:18789", own[1], own[0], [])
    assert not origin_allowed("POST", "https://evil.example", own[1], own[0], [])
    assert not origin_allowed("PUT", "null", own[1], own[0], [])
    assert not origin_allowed("POST", "http://localhost:18789", own[1], own[0], [])
    assert origin_allowed("POST", "http://localhost:3000", own[1], own[0],
                          ["http://localhost:3000"])


def test_failed_authentication_locks_an_address_out_for_a_while():
    now = [0.0]
    limit = gateway(auth={"rateLimit": {"maxAttempts": 3, "windowSeconds": 10,
                                        "lockoutSeconds": 30}}).auth.rate_limit
    failed = FailedAuth(limit, clock=lambda: now[0])
    assert failed.failed("a") is None and failed.failed("a") is None
    assert failed.retry_after("a") is None
    assert failed.failed("a") == 30
    assert failed.retry_after("a") == 30 and failed.retry_after("b") is None
    now[0] = 29.2
    assert failed.retry_after("a") == 1
    now[0] = 30.5
    assert failed.retry_after("a") is None
    failed.failed("a")
    now[0] = 45  # outside the window: the count starts again
    assert failed.failed("a") is None


def test_a_lockout_is_written_down_and_lifted_from_the_command_line(tmp_path, monkeypatch):
    from clawd.storage.files import lockouts
    from clawd.storage.files.lockouts import FileLockouts

    monkeypatch.setattr(lockouts, "LOOK_SECONDS", 0.0)
    limit = gateway(auth={"rateLimit": {"maxAttempts": 2, "windowSeconds": 10,
                                        "lockoutSeconds": 30}}).auth.rate_limit
    path = tmp_path / "lockouts.json"
    failed = FailedAuth(limit, kept=FileLockouts(path))
    for client in ("a", "b"):
        failed.failed(client)
        assert failed.failed(client) == 30
        assert failed.retry_after(client) == 30
    monkeypatch.setattr(lockouts, "LOOK_SECONDS", 60.0)  # the file just looked at
    failed.failed("c")
    assert failed.failed("c") == 30 and failed.retry_after("c") == 30  # held all the same
    monkeypatch.setattr(lockouts, "LOOK_SECONDS", 0.0)
    assert (path.stat().st_mode & 0o777) == 0o600
    other = FileLockouts(path)  # the command line's
    assert set(other.lockouts()) == {"a", "b", "c"}
    assert other.unlock("a") is not None and other.unlock("a") is None
    assert failed.retry_after("a") is None and failed.retry_after("b") == 30
    assert failed.failed("a") is None  # its wrong tokens were forgotten too

    def full(client: str, until: float) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failed.kept, "lock", full)  # a lockout not written holds all the same
    failed.failed("d")
    assert failed.failed("d") == 30 and failed.retry_after("d") == 30


def _entry(message: Message) -> dict:
    return message.to_entry()


def test_history_leaves_out_flush_turns_and_no_reply_and_marks_compactions_and_undos():
    call = ToolCall("c1", "read", {"path": "x"})
    hello = Message.user("hello")
    undone = Message.user("take this back")
    entries = [
        _entry(hello),
        _entry(Message.assistant("hi there")),
        _entry(Message.user("store notes", flush=True)),
        _entry(Message.assistant("NO_REPLY", flush=True)),
        {"type": "compaction", "id": "k1", "summary": "they said hello", "tokensBefore": 900,
         "tokensAfter": 100, "method": "single"},
        _entry(Message.user("read x")),
        _entry(Message("assistant", [TextPart("NO_REPLY"), call])),
        _entry(Message.tool_result(call, "x's text")),
        _entry(Message.assistant("NO_REPLY")),
        _entry(Message.assistant("The quick", aborted=True)),
        _entry(undone),
        _entry(Message.assistant("sure")),
        {"type": "undo", "messageId": undone.id, "reason": "undo"},
    ]
    found = items(entries)
    assert [i["type"] for i in found] == ["user", "assistant", "compaction", "user",
                                          "assistant", "toolResult", "assistant", "user",
                                          "assistant"]
    assert [i["index"] for i in found] == list(range(9))
    assert found[2]["summary"] == "they said hello"
    assert found[4]["text"] == "" and found[4]["toolCalls"][0]["name"] == "read"
    assert found[6] == {**found[6], "text": "The quick", "interrupted": True}
    assert found[7]["undone"] == found[8]["undone"] == "undo"
    assert "NO_REPLY" not in str(found) and "store notes" not in str(found)


def test_history_pages_go_back_from_the_newest():
    found = [{"index": n} for n in range(7)]
    first = page(found, None, 3)
    assert [i["index"] for i in first["items"]] == [4, 5, 6] and first["before"] == 4
    second = page(found, first["before"], 3)
    assert [i["index"] for i in second["items"]] == [1, 2, 3] and second["before"] == 1
    last = page(found, second["before"], 3)
    assert [i["index"] for i in last["items"]] == [0] and last["before"] is None
    assert page([], None, 50) == {"items": [], "before": None, "total": 0}
