"""Rules per sender in groups (``channels.telegram.groups.<chatId>.allowFrom``): in a group
only the senders its list names are answered, the channel's ``allowFrom`` standing in for a
group without one; anyone else is ignored silently (no refusal, no pairing code, no model,
no session). Against the Bot API stand-in through the real client library."""

from __future__ import annotations

import time

import pytest
from test_telegram_service import served

from telegram_standin import BotApi

pytestmark = pytest.mark.slow  # a poller, worker threads, a stand-in server


def test_only_the_senders_a_group_names_are_answered_there(tmp_path):
    rules = {"dmPolicy": "open", "groups": {
        "-100500": {"allowFrom": ["@ann"]},
        "-100600": {"requireMention": False, "allowFrom": ["2002"]}}}
    with BotApi() as api, served(tmp_path, api, rules) as (provider, runtime, _):
        api.group("@clawd_test_bot hello from a stranger", user=3003, username="eve")
        api.group("/status@clawd_test_bot", user=3003, username="eve")  # no command either
        api.group("no mention needed here", chat=-100600, user=1001, username="ann")
        api.group("@clawd_test_bot hello from ann", user=1001, username="ann")
        assert api.wait_sent(1)[0]["text"] == "echo: @ann: hello from ann"
        api.group("no mention needed here", chat=-100600, user=2002, username="bob")
        assert api.wait_sent(2)[1] == {**api.sent[1], "chat_id": "-100600",
                                       "text": "echo: @bob: no mention needed here"}
        api.dm("hi, eve here", user=3003, username="eve")  # a direct message: open
        api.wait_sent(3)
        time.sleep(0.3)
        assert api.texts(-100500) == ["echo: @ann: hello from ann"]
        assert api.texts(-100600) == ["echo: @bob: no mention needed here"]
        said = " ".join(r.messages[-1].text for r in provider.requests)
        assert "stranger" not in said and "@ann: no mention" not in said
        assert len(provider.requests) == 3


def test_without_a_list_of_its_own_a_group_takes_the_channel_s(tmp_path):
    rules = {"allowFrom": ["@ann"], "groups": {"*": {}, "-100600": {"allowFrom": ["*"]}}}
    with BotApi() as api, served(tmp_path, api, rules) as (provider, _, _):
        api.group("@clawd_test_bot hi, I'm new", user=3003, username="eve")
        api.group("@clawd_test_bot hi from the owner", user=1001, username="ann")
        assert api.wait_sent(1)[0]["text"] == "echo: @ann: hi from the owner"
        api.group("@clawd_test_bot anyone here", chat=-100600, user=3003, username="eve")
        assert api.wait_sent(2)[1]["text"] == "echo: @eve: anyone here"
        time.sleep(0.3)
        assert len(api.sent) == 2 and len(provider.requests) == 2
