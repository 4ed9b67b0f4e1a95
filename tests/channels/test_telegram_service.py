"""The Telegram channel inside the gateway, against the Bot API stand-in through the real
client library: who may talk (allow-list, pairing, groups when mentioned), a session per
person, long replies in parts, an update answered once, the bot commands, photos, voice,
and the status ``clawd channels status`` reads. The ones marked so run once on files and
once as two workers on one PostgreSQL database (one of them polls)."""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from clawd.config import Config
from clawd.core.messages import ImagePart
from clawd.frontends.cli import main
from clawd.providers.scripted import ScriptedProvider
from clawd.storage import open_channels

from conftest import make_runtime
from gateway_client import BASE, TOKEN, served_app
from telegram_standin import TOKEN as BOT_TOKEN
from telegram_standin import BotApi

pytestmark = pytest.mark.slow  # a poller, worker threads, a stand-in server


def echo(request) -> str:
    return f"echo: {request.messages[-1].text}"


@contextmanager
def served(tmp_path, api: BotApi, rules: dict | None = None, *, provider=None,
           session: dict | None = None, quotas: dict | None = None):
    """The gateway with the Telegram channel on ``api`` (and ``gateway.quotas``); yields
    (provider, runtime, app)."""
    provider = provider or ScriptedProvider(default=echo)
    raw = {"gateway": {"idleSessionSeconds": 0, "shutdownGraceSeconds": 0,
                       "quotas": quotas or {}},
           "session": session or {},
           "channels": {"telegram": {"enabled": True, "botToken": BOT_TOKEN,
                                     "apiRoot": api.url, **(rules or {})}}}
    config = Config.model_validate(raw)
    runtime = make_runtime(tmp_path, provider)
    if runtime.storage.kind == "postgresql":  # what clawd pairing, in "another process", reads
        raw["storage"] = {"url": runtime.storage.db.url}
    state = Path(os.environ["CLAWD_HOME"])
    state.mkdir(parents=True, exist_ok=True)
    (state / "clawd.json").write_text(json.dumps(raw))
    app = served_app(config, [runtime], TOKEN)
    with TestClient(app, base_url=BASE):
        yield provider, runtime, app


def wait(condition, timeout: float = 20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_people_on_the_allow_list_are_answered_each_in_their_own_session(
        tmp_path, one_or_two_workers):
    with BotApi() as api, served(tmp_path, api, {"allowFrom": ["@ann", "2002"]}) as (
            provider, runtime, _):
        api.dm("hello from ann", user=1001, username="ann")
        assert api.wait_sent(1)[0]["text"] == "echo: hello from ann"
        api.dm("hello from bob", user=2002, username="bob")
        sent = api.wait_sent(2)
        assert sent[1] == {**sent[1], "chat_id": "2002", "text": "echo: hello from bob"}
        keys = set(runtime.store.entries())
        assert {"agent:main:telegram:dm:1001", "agent:main:telegram:dm:2002"} <= keys
        # bob's session never saw ann's words
        assert all("ann" not in m.text for m in provider.requests[-1].messages
                   if m.role == "user")
        assert api.actions and api.actions[0]["action"] == "typing"
        assert [c["command"] for c in api.commands] == ["new", "compact", "status", "stop"]


def test_a_stranger_gets_a_pairing_code_and_is_answered_once_approved(
        tmp_path, one_or_two_workers, capsys):
    with BotApi() as api, served(tmp_path, api) as (provider, _, _):
        api.dm("hi, who are you?", user=3003, username="eve")
        said = api.wait_sent(1)[0]["text"]
        code = said.split("clawd pairing approve ")[1].split()[0]
        assert len(code) == 8 and provider.requests == []
        api.dm("hello?", user=3003, username="eve")  # told once: no second code
        api.dm("still there?", user=3003, username="eve")
        time.sleep(0.5)
        assert len(api.sent) == 1
        assert main(["pairing", "list"]) == 0
        assert code in capsys.readouterr().out
        assert main(["pairing", "approve", code]) == 0
        assert "approved @eve (3003)" in capsys.readouterr().out
        assert api.wait_sent(2)[1]["text"].startswith("You're in")  # told by the CLI
        api.dm("now?", user=3003, username="eve")
        assert api.wait_sent(3)[2]["text"] == "echo: now?"


def test_a_group_is_answered_only_when_mentioned_in_a_group_session(
        tmp_path, one_or_two_workers):
    with BotApi() as api, served(tmp_path, api, {"groups": {"-100500": {}}}) as (
            provider, runtime, _):
        (runtime.workspace / "MEMORY.md").write_text("The owner's bank PIN is 4321.\n")
        api.group("nice weather today")
        api.group("hello", chat=-100999)  # not listed
        api.group("@clawd_test_bot what do you know?", thread=12)
        sent = api.wait_sent(1)
        time.sleep(0.3)
        assert len(api.sent) == 1 and sent[0]["text"] == "echo: @ann: what do you know?"
        assert str(sent[0]["thread"]) == "12"
        assert "agent:main:telegram:group:-100500:topic:12" in runtime.store.entries()
        assert "4321" not in provider.requests[0].system  # a group session: no MEMORY.md


def test_an_update_delivered_twice_is_answered_once(tmp_path, one_or_two_workers):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"}) as (provider, _, _):
        first = api.dm("only once please")
        api.wait_sent(1)
        api.push_again(first)  # as after a crash before the offset was confirmed
        api.dm("and this one")
        sent = api.wait_sent(2)
        time.sleep(0.3)
        assert [m["text"] for m in api.sent] == ["echo: only once please", "echo: and this one"]
        assert len(provider.requests) == 2 and sent


def test_messages_of_one_chat_run_in_arrival_order(tmp_path):
    def slow_echo(request):
        time.sleep(0.2)
        return echo(request)

    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 provider=ScriptedProvider(default=slow_echo)) as _:
        for n in range(4):
            api.dm(f"message {n}")
        api.wait_sent(4)
        assert api.texts() == [f"echo: message {n}" for n in range(4)]


def test_a_7000_character_reply_arrives_in_parts_under_4096(tmp_path):
    long = "\n\n".join(f"Paragraph {n}. " + "All work and no play. " * 12 for n in range(27))
    assert len(long) > 7000
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 provider=ScriptedProvider(default=long)) as _:
        api.dm("tell me a lot")
        wait(lambda: len(api.sent) >= 2)
        time.sleep(0.3)
        assert all(len(m["text"]) < 4096 and m["parse_mode"] == "HTML" for m in api.sent)
        joined = " ".join(m["text"] for m in api.sent)
        assert " ".join(joined.split()) == " ".join(long.split())


def test_bot_commands_map_onto_the_slash_commands(tmp_path):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"}) as (_, runtime, app):
        api.dm("first")
        api.wait_sent(1)
        api.dm("/status")
        status = api.wait_sent(2)[1]["text"]
        assert status.startswith("<pre><code>") and "context" in status.lower()
        slots = app.state.gateway.hub.slots  # /status is sent before its turn has ended
        wait(lambda: all(slot.running is None for slot in slots.values()))
        api.dm("/stop")
        assert api.wait_sent(3)[2]["text"] == "Nothing is running."
        before = runtime.store.get("agent:main:telegram:dm:1001")["sessionId"]
        api.dm("/new")
        wait(lambda: runtime.store.get("agent:main:telegram:dm:1001")["sessionId"] != before)
        api.dm("/model other")
        wait(lambda: any("Commands here" in m["text"] for m in api.sent))


def test_a_photo_reaches_the_model_and_voice_is_not_supported_yet(tmp_path):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"}) as (provider, _, _):
        api.photo(data=b"PNG-BYTES", caption="what is in this picture?")
        assert api.wait_sent(1)[0]["text"] == "echo: what is in this picture?"
        images = [p for p in provider.requests[0].messages[-1].content
                  if isinstance(p, ImagePart)]
        assert [i.data for i in images] == ["UE5HLUJZVEVT"]
        api.voice()
        assert "not supported yet" in api.wait_sent(2)[1]["text"]


def test_a_refused_sender_is_told_once_and_429s_are_waited_out(tmp_path, capsys):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "allowlist",
                                                 "allowFrom": ["1001"]}) as _:
        api.dm("let me in", user=4004, username="mallory")
        api.dm("please", user=4004, username="mallory")
        api.wait_sent(1)
        api.throttle("sendMessage", 1)
        api.dm("hello", user=1001)
        sent = api.wait_sent(2)
        time.sleep(0.3)
        assert [m["text"] for m in sent] == ["Sorry, I'm not taking messages from you here.",
                                             "echo: hello"]
        assert api.calls.count("sendMessage") == 3  # the 429 and the retry
        status = open_channels(Config()).status()["telegram"]
        assert (status["connected"], status["messagesIn"], status["messagesOut"]) == (
            True, 3, 2)
    assert main(["channels", "status"]) == 0
    out = capsys.readouterr().out
    assert "in 3 · out 2" in out and BOT_TOKEN.partition(":")[2] not in out


def test_dm_scope_main_folds_the_owners_messages_into_the_main_session(tmp_path):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open", "allowFrom": ["@ann"]},
                                 session={"dmScope": "main"}) as (_, runtime, _):
        api.dm("from the owner", user=1001, username="ann")
        api.wait_sent(1)
        api.dm("from someone else", user=6006, username="zed")
        api.wait_sent(2)
        keys = set(runtime.store.entries())
        assert "agent:main:main" in keys and "agent:main:telegram:dm:6006" in keys
        assert "agent:main:telegram:dm:1001" not in keys
