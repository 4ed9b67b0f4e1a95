"""``clawd users link NAME telegram:<userId>``: what a linked person writes to the bot goes
to their own agent's session (``agent:<theirAgent>:telegram:dm:<userId>``), no pairing
asked, and the operator's agent never sees it; an unlinked stranger still gets a pairing
code. Against the Bot API stand-in through the real client library, once on files and once
as two workers on one PostgreSQL database."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from starlette.testclient import TestClient
from test_telegram_service import echo, wait

from clawd.config import Config
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.people import FilePeople
from clawd.storage.files.storage import FileStorage
from clawd.storage.postgres.people import PgPeople

from conftest import make_runtime
from gateway_client import BASE, TOKEN, served_app
from telegram_standin import TOKEN as BOT_TOKEN
from telegram_standin import BotApi

pytestmark = pytest.mark.slow  # a poller, worker threads, a stand-in server


def noted(request) -> str:
    """The stand-in model: says how many words it got (an echo of a long message would be
    asked again, as a reply that only repeats it)."""
    return f"noted: {len(request.messages[-1].text.split())} words"


def _said(runtime) -> str:
    """Every transcript of the runtime's agent, as one text."""
    storage = runtime.storage
    return "\n".join(json.dumps(entry) for sid in storage.session_ids()
                     for entry in storage.transcript(sid).load(quiet=True).entries)


def test_a_linked_person_talks_to_their_own_agent_and_a_stranger_still_pairs(
        tmp_path, one_or_two_workers):
    provider = ScriptedProvider(default=noted)
    main = make_runtime(tmp_path, provider)
    db = getattr(main.storage, "db", None)
    workspace = tmp_path / "ws-alice"
    (workspace / "memory").mkdir(parents=True)
    alice_rt = dataclasses.replace(main, agent_id="alice", workspace=workspace,
                                   storage=db.agent("alice") if db is not None else FileStorage(
                                       "alice", workspace,
                                       tmp_path / "state" / "agents" / "alice" / "sessions"))
    people = PgPeople(db) if db is not None else FilePeople(tmp_path / "people.json")
    people.add("alice", ("alice",))
    people.link("alice", "telegram:7007")
    with BotApi() as api:
        config = Config.model_validate({
            "gateway": {"idleSessionSeconds": 0, "shutdownGraceSeconds": 0},
            "channels": {"telegram": {"enabled": True, "botToken": BOT_TOKEN,
                                      "apiRoot": api.url}}})  # dmPolicy: pairing
        with TestClient(served_app(config, [main, alice_rt], TOKEN, people), base_url=BASE):
            api.dm("hello from alice, my PIN is 2468", user=7007, username="alice")
            assert api.wait_sent(1)[0] == {**api.sent[0], "chat_id": "7007",
                                           "text": "noted: 7 words"}
            assert "agent:alice:telegram:dm:7007" in alice_rt.store.entries()
            assert "2468" in _said(alice_rt)
            assert not [k for k in main.store.entries() if "7007" in k]
            assert "2468" not in _said(main)  # the operator's agent never saw it

            api.dm("hi, who are you?", user=8008, username="eve")  # a stranger
            said = api.wait_sent(2)[1]["text"]
            assert "clawd pairing approve " in said
            time.sleep(0.3)
            assert len(provider.requests) == 1  # the stranger reached no model
            assert not [k for k in main.store.entries() if "8008" in k]

            people.unlink("alice", "telegram:7007")  # unlinked: a stranger like any other
            api.dm("still me", user=7007, username="alice")
            assert "clawd pairing approve " in api.wait_sent(3)[2]["text"]
            assert len(provider.requests) == 1
            people.link("alice", "telegram:7007")
            api.dm("back again", user=7007, username="alice")
            assert api.wait_sent(4)[3]["text"] == "noted: 2 words"
            wait(lambda: "back again" in _said(alice_rt))
            assert "back again" not in _said(main) and "still me" not in _said(alice_rt)


def test_a_linked_person_in_a_group_is_the_groups_and_disabled_still_refuses(tmp_path):
    main = make_runtime(tmp_path, ScriptedProvider(default=echo))
    people = FilePeople(tmp_path / "people.json")
    people.add("alice", ("main",))  # sharing the operator's agent is allowed too
    people.link("alice", "telegram:7007")
    with BotApi() as api:
        config = Config.model_validate({
            "gateway": {"idleSessionSeconds": 0, "shutdownGraceSeconds": 0},
            "channels": {"telegram": {"enabled": True, "botToken": BOT_TOKEN,
                                      "apiRoot": api.url, "dmPolicy": "disabled",
                                      "groups": {"-100500": {}}}}})
        with TestClient(served_app(config, [main], TOKEN, people), base_url=BASE):
            api.dm("let me in", user=7007, username="alice")
            assert api.wait_sent(1)[0]["text"] == "Sorry, I'm not taking messages from you here."
            api.group("@clawd_test_bot hello group", user=7007)
            assert api.wait_sent(2)[1]["text"] == "echo: @ann: hello group"
            assert "agent:main:telegram:group:-100500" in main.store.entries()
            assert not [k for k in main.store.entries() if ":dm:" in k]
