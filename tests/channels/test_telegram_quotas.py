"""A Telegram message is a turn like any other: it counts against the per-person quotas of
``gateway.quotas`` (turns per minute, sessions). Past them the sender is told once, in one
line, when to try again, and the model is not asked. A person linked to the sender shares
one budget between the API and the chat; a stranger is a person of their own; the owner
(``allowFrom``) is held only with ``quotas.operator``. Against the Bot API stand-in, the
first once on files and once as two workers on one PostgreSQL database."""

from __future__ import annotations

import re
import time

import pytest
from starlette.testclient import TestClient
from test_telegram_service import echo, served, wait

from clawd.channels.access import counted_as
from clawd.channels.base import Inbound
from clawd.config import Config
from clawd.frontends.hub.quotas import OPERATOR
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.people import FilePeople

from conftest import make_runtime
from gateway_client import BASE, TOKEN, served_app
from telegram_standin import TOKEN as BOT_TOKEN
from telegram_standin import BotApi

WAIT_LINE = re.compile(r"^You're sending messages faster than I can take them; try again "
                       r"in (\d+) s\.$")


def _dm(sender: str, name: str | None = None) -> Inbound:
    return Inbound("telegram", 1, sender, "dm", sender, name, "hi")


def test_whose_turns_a_message_counts_against():
    assert counted_as(_dm("7007"), "alice", [], operator=False) == "alice"
    assert counted_as(_dm("3003", "@eve"), None, ["@ann"], operator=False) == "telegram:3003"
    assert counted_as(_dm("1001", "@Ann"), None, ["@ann"], operator=False) is None
    assert counted_as(_dm("1001", "@ann"), None, ["@ann"], operator=True) == OPERATOR
    assert counted_as(_dm("1001"), "alice", ["1001"], operator=False) == "alice"


@pytest.mark.slow
def test_turns_past_the_minute_s_quota_are_refused_and_told_once(
        tmp_path, one_or_two_workers):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 quotas={"turnsPerMinute": 2}) as (provider, _, _):
        for n in range(4):
            api.dm(f"message {n}", user=1001)
        api.wait_sent(3)
        api.dm("from bob", user=2002, username="bob")  # another sender: a budget of his own
        api.wait_sent(4)
        time.sleep(0.5)
        mine = api.texts(1001)
        assert len(mine) == 3  # two answers and one line: told once
        told = [t for t in mine if WAIT_LINE.match(t)]
        assert len(told) == 1 and 1 <= int(WAIT_LINE.match(told[0]).group(1)) <= 60
        assert sorted(t for t in mine if t != told[0]) == ["echo: message 0",
                                                           "echo: message 1"]
        assert api.texts(2002) == ["echo: from bob"]
        said = [r.messages[-1].text for r in provider.requests]
        assert "message 2" not in said and "message 3" not in said  # no model asked


@pytest.mark.slow
def test_the_owner_is_not_held_without_quotas_operator(tmp_path):
    rules = {"dmPolicy": "allowlist", "allowFrom": ["@ann"]}
    with BotApi() as api, served(tmp_path, api, rules, quotas={"turnsPerMinute": 1}) as _:
        for n in range(3):
            api.dm(f"owner {n}", user=1001, username="ann")
        api.wait_sent(3)
        assert sorted(api.texts()) == [f"echo: owner {n}" for n in range(3)]


@pytest.mark.slow
def test_the_owner_is_held_with_quotas_operator(tmp_path):
    rules = {"dmPolicy": "allowlist", "allowFrom": ["@ann"]}
    with BotApi() as api, served(tmp_path, api, rules,
                                 quotas={"turnsPerMinute": 1, "operator": True}) as _:
        api.dm("owner 0", user=1001, username="ann")
        api.dm("owner 1", user=1001, username="ann")
        sent = api.wait_sent(2)
        time.sleep(0.3)
        assert len(api.sent) == 2 and "echo: owner 0" in [m["text"] for m in sent]
        assert any(WAIT_LINE.match(m["text"]) for m in sent)


@pytest.mark.slow
def test_a_linked_person_shares_one_budget_between_the_api_and_the_chat(tmp_path):
    main = make_runtime(tmp_path, ScriptedProvider(default=echo))
    people = FilePeople(tmp_path / "people.json")
    _, token = people.add("alice", ("main",))
    people.link("alice", "telegram:7007")
    with BotApi() as api:
        config = Config.model_validate({
            "gateway": {"idleSessionSeconds": 0, "shutdownGraceSeconds": 0,
                        "quotas": {"turnsPerMinute": 2}},
            "channels": {"telegram": {"enabled": True, "botToken": BOT_TOKEN,
                                      "apiRoot": api.url}}})
        app = served_app(config, [main], TOKEN, people)
        with TestClient(app, base_url=BASE) as client:
            alice = {"Authorization": f"Bearer {token}"}
            sent = client.post("/api/sessions/web/messages", json={"text": "from the web"},
                               headers=alice)
            assert sent.status_code == 200
            api.dm("first from the chat", user=7007, username="alice")
            api.dm("second from the chat", user=7007, username="alice")
            api.wait_sent(2)
            time.sleep(0.3)
            texts = api.texts(7007)
            assert "echo: first from the chat" in texts
            assert len(texts) == 2 and WAIT_LINE.match(
                next(t for t in texts if t != "echo: first from the chat"))
            # and the chat's turns count on the API: the third of the minute is a 429
            refused = client.post("/api/sessions/web/messages", json={"text": "again"},
                                  headers=alice)
            assert refused.status_code == 429


@pytest.mark.slow
def test_a_new_session_past_the_sessions_quota_is_refused_in_one_line(tmp_path):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 quotas={"sessions": 1}) as (provider, runtime, _):
        api.dm("first", user=3003, username="eve")
        api.wait_sent(1)
        api.dm("me too", user=4004, username="zed")  # a second session: no room
        api.dm("hello?", user=4004, username="zed")  # told once
        api.dm("again", user=3003, username="eve")  # eve's session exists: answered
        wait(lambda: "echo: again" in api.texts(3003))
        time.sleep(0.3)
        assert api.texts(4004) == ["I can't start a new conversation here right now: there "
                                   "are too many already."]
        assert not [k for k in runtime.store.entries() if "4004" in k]
        assert len(provider.requests) == 2
