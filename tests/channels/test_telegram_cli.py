"""The Telegram channel from the command line and for the outbox: ``doctor`` checks the
token with getMe (never showing it), and ``deliver`` sends to ``telegram:<chatId>`` and
returns the message id Telegram gave."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from clawd.channels.delivery import deliver
from clawd.config import Config
from clawd.core.errors import ClawdError
from clawd.frontends.cli.admin import doctor_checks

from telegram_standin import TOKEN, BotApi

SECRET = TOKEN.partition(":")[2]


@pytest.fixture
def api():
    with BotApi() as standin:
        yield standin


def configure(api: BotApi, token: str | None = TOKEN) -> Config:
    raw = {"channels": {"telegram": {"enabled": True, "apiRoot": api.url,
                                     **({"botToken": token} if token else {})}}}
    state = Path(os.environ["CLAWD_HOME"])
    state.mkdir(parents=True, exist_ok=True)
    (state / "clawd.json").write_text(json.dumps(raw))
    return Config.model_validate(raw)


def telegram_check(limit: int = 20):
    for ok, what, text in doctor_checks(None):
        if what == "telegram":
            return ok, text
    raise AssertionError("no telegram check")


def test_doctor_checks_the_token_with_getme_and_never_shows_it(api, monkeypatch):
    configure(api)
    ok, text = telegram_check()
    assert ok and text.startswith("the token works: @clawd_test_bot")
    configure(api, "999:a-wrong-secret-token-value")
    ok, text = telegram_check()
    assert not ok and "getMe failed" in text and "a-wrong-secret" not in text
    configure(api, None)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    ok, text = telegram_check()
    assert ok and SECRET not in text


def test_the_outbox_delivers_to_a_chat_and_gets_a_message_id(api):
    config = configure(api)
    number = asyncio.run(deliver(config, "telegram:1001", "**Reminder**: stand up"))
    assert number == 1 and api.sent[0]["text"] == "<b>Reminder</b>: stand up"
    long = "\n\n".join("A paragraph of a long digest. " * 10 for _ in range(30))
    number = asyncio.run(deliver(config, "telegram:-100500", long))
    assert number == len([m for m in api.sent if m["chat_id"] == "-100500"]) >= 2
    with pytest.raises(ClawdError, match="not a channel target"):
        asyncio.run(deliver(config, "slack:C1", "hi"))
    api.throttle("sendMessage", 1)  # a 429 is waited out: still delivered
    assert asyncio.run(deliver(config, "telegram:1001", "after a wait")) == 2


def test_a_failed_delivery_raises_without_the_token(api):
    config = configure(api, "999:another-wrong-token-abc")
    with pytest.raises(ClawdError) as caught:
        asyncio.run(deliver(config, "telegram:1001", "hello"))
    assert "another-wrong-token" not in str(caught.value)
