"""The Telegram adapter through python-telegram-bot against the Bot API stand-in: who the
bot is, long polling from an offset, messages read into ``Inbound``, sending, editing,
typing, commands, images, and a 429 waited out for its ``retry_after``."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from clawd.channels.telegram import TelegramApi, error_text, redact

from telegram_standin import TOKEN, BotApi


@pytest.fixture
def api():
    with BotApi() as standin:
        yield standin


def run(coro):
    return asyncio.run(coro)


def test_the_bot_reads_updates_from_an_offset_and_long_polls(api):
    async def go():
        bot = TelegramApi(TOKEN, api.url, poll_seconds=1)
        me = await bot.start()
        api.dm("hello there")
        api.group("@clawd_test_bot what's up?", thread=7)
        api.group("just chatting")
        first = await bot.updates(None)
        started = time.monotonic()
        empty = await bot.updates(first[-1][0] + 1)  # nothing new: waits out the poll
        waited = time.monotonic() - started
        await bot.close()
        return me, first, empty, waited

    me, first, empty, waited = run(go())
    assert me["username"] == "clawd_test_bot"
    assert [uid for uid, _ in first] == [1, 2, 3] and empty == [] and waited >= 0.9
    dm, topic, chatter = (m for _, m in first)
    assert (dm.chat_type, dm.chat_id, dm.sender_id, dm.sender_name, dm.text) == (
        "dm", "1001", "1001", "@ann", "hello there")
    assert (topic.chat_type, topic.thread, topic.mentioned, topic.text) == (
        "group", 7, True, "what's up?")
    assert chatter.mentioned is False
    assert api.confirmed == 4  # the offset confirmed what came before it


def test_send_edit_typing_commands_and_an_image(api, caplog):
    caplog.set_level(logging.DEBUG)

    async def go():
        bot = TelegramApi(TOKEN, api.url, poll_seconds=0)
        await bot.start()
        number = await bot.send("1001", "<b>hi</b> &amp; bye")
        await bot.edit("1001", number, "<b>hi</b> again")
        await bot.typing("1001")
        await bot.set_commands([("new", "start a new session"), ("status", "the session")])
        api.photo(data=b"PNGDATA", caption="what is this?")
        [(_, photo)] = await bot.updates(None)
        image = await bot.image(photo.file_id)
        await bot.close()
        return number, photo, image

    number, photo, image = run(go())
    assert number == 1 and api.sent[0]["parse_mode"] == "HTML"
    assert api.sent[0]["text"] == "<b>hi</b> again" and api.edits[0]["message_id"] == 1
    assert api.actions == [{"chat_id": "1001", "action": "typing"}]
    assert [c["command"] for c in api.commands] == ["new", "status"]
    assert (photo.kind, photo.text) == ("image", "what is this?")
    assert image.data == "UE5HREFUQQ==" and image.mime_type == "image/png"
    secret = TOKEN.partition(":")[2]
    assert [r.getMessage() for r in caplog.records if secret in r.getMessage()] == []


def test_a_429_is_waited_out_for_its_retry_after(api):
    async def go():
        bot = TelegramApi(TOKEN, api.url, poll_seconds=0)
        await bot.start()
        api.throttle("sendMessage", 1)
        started = time.monotonic()
        number = await bot.send("1001", "after the wait")
        took = time.monotonic() - started
        await bot.close()
        return number, took

    number, took = run(go())
    assert number == 1 and took >= 1.0
    assert api.calls.count("sendMessage") == 2


def test_a_wrong_token_fails_in_a_line_without_the_token(api):
    async def go():
        bot = TelegramApi("999:wrong-token-value-xyz", api.url)
        with pytest.raises(Exception) as caught:
            await bot.start()
        await bot.close()
        return error_text(caught.value, bot.token)

    said = run(go())
    assert "wrong-token-value-xyz" not in said and "InvalidToken" in said
    assert redact(f"GET /bot{TOKEN}/getMe", TOKEN) == "GET /bot<token>/getMe"


def test_voice_and_files_are_read_as_what_clawd_cannot_take_yet(api):
    async def go():
        bot = TelegramApi(TOKEN, api.url, poll_seconds=0)
        await bot.start()
        api.voice()
        found = await bot.updates(None)
        await bot.close()
        return found

    [(_, voice)] = run(go())
    assert voice.kind == "voice"
