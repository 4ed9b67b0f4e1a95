"""Edited messages (Telegram's ``edited_message`` updates): an edit is answered as a new
message of the same session, marked ``(edited)`` so the model reads it as a correction,
whether the first version was answered already or still waits its turn; an edit delivered
twice is answered once; an edit of a command or of a file, and an edit nobody may talk
with, is not answered. Against the Bot API stand-in through the real client library."""

from __future__ import annotations

import threading
import time

import pytest
from test_telegram_service import echo, served

from clawd.channels.base import Inbound
from clawd.channels.said import model_text
from clawd.providers.scripted import ScriptedProvider

from telegram_standin import BotApi


def test_what_the_model_reads_of_an_edit():
    dm = Inbound("telegram", 1, "42", "dm", "42", "@ann", "2+3?", edited=True)
    assert model_text(dm, "2+3?") == "(edited) 2+3?"
    group = Inbound("telegram", 1, "-100", "group", "42", "@ann", "", kind="image",
                    edited=True)
    assert model_text(group, "") == "@ann: (edited) (a photo)"
    assert model_text(Inbound("telegram", 1, "42", "dm", "42", None, "hi"), "hi") == "hi"


def _users(request) -> list[str]:
    return [m.text for m in request.messages if m.role == "user"]


@pytest.mark.slow
def test_an_edit_of_an_answered_message_is_answered_again_once(tmp_path, one_or_two_workers):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"}) as (provider, _, _):
        first = api.dm("what is 2+2")
        api.wait_sent(1)
        edit = api.edit(first, "what is 2+3")
        assert api.wait_sent(2)[1]["text"] == "echo: (edited) what is 2+3"
        api.push_again(edit)  # delivered again: answered once
        api.dm("thanks")
        api.wait_sent(3)
        time.sleep(0.3)
        assert api.texts() == ["echo: what is 2+2", "echo: (edited) what is 2+3",
                               "echo: thanks"]
        # one session: the model saw the first version, then the correction
        assert _users(provider.requests[-1])[-3:] == ["what is 2+2", "(edited) what is 2+3",
                                                      "thanks"]


@pytest.mark.slow
def test_an_edit_while_its_first_version_waits_is_answered_after_it(tmp_path):
    gate = threading.Event()

    def held(request):
        if request.messages[-1].text.startswith("hold"):
            gate.wait(20)
        return echo(request)

    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 provider=ScriptedProvider(default=held)) as (provider, _, _):
        api.dm("hold on")
        second = api.dm("second")
        api.edit(second, "second, fixed")
        time.sleep(0.5)
        assert api.sent == []  # both versions wait behind the held turn
        gate.set()
        api.wait_sent(3)
        assert api.texts() == ["echo: hold on", "echo: second",
                               "echo: (edited) second, fixed"]


@pytest.mark.slow
def test_edits_of_commands_files_and_of_those_not_answered_are_not_answered(tmp_path):
    rules = {"dmPolicy": "open", "groups": {"-100500": {"allowFrom": ["@ann"]}}}
    with BotApi() as api, served(tmp_path, api, rules) as (provider, runtime, _):
        status = api.dm("/status")
        api.wait_sent(1)
        before = runtime.store.get("agent:main:telegram:dm:1001")["sessionId"]
        api.edit(status, "/new")  # the command ran on its first version
        voice = api.voice()
        assert "not supported yet" in api.wait_sent(2)[1]["text"]
        api.edit(voice, "a caption")
        stranger = api.group("@clawd_test_bot hi", user=3003, username="eve")
        api.edit(stranger, "@clawd_test_bot hi again")  # still not named by the group
        quiet = api.group("hello everyone")  # ann, not mentioning the bot: ignored
        api.edit(quiet, "@clawd_test_bot hello everyone")  # now she does
        assert api.wait_sent(3)[2]["text"] == "echo: @ann: (edited) hello everyone"
        time.sleep(0.3)
        assert len(api.sent) == 3 and len(provider.requests) == 1
        assert runtime.store.get("agent:main:telegram:dm:1001")["sessionId"] == before
