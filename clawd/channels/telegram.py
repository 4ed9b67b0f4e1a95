"""Telegram, through python-telegram-bot (the SDK is imported in this module only).

``TelegramApi`` is the Bot API as the service uses it: ``start`` (``getMe``: who the bot
is, and the token checked), ``updates`` (long polling ``getUpdates`` from an offset, each
update read into an ``Inbound`` or None for one clawd does not take; an ``edited_message``
is an ``Inbound`` marked ``edited``), ``send`` (``sendMessage``: Telegram's message id
back, which is what "delivered" means), ``edit`` (``editMessageText``; a preview's edit is
not waited for: a 429 is ``Throttled`` at once), ``typing`` (``sendChatAction``),
``set_commands`` (``setMyCommands``) and ``image`` (``getFile`` and the download). A 429 is
waited out for its ``retry_after`` and the call made again (up to ``RETRIES`` times).
``apiRoot`` points it at a local Bot API server or a test stand-in. The token is part of
every URL the SDK asks for: ``Redact`` takes it out of the log lines of the HTTP client and
the SDK, and ``redact`` out of any error text clawd keeps or shows.
"""

from __future__ import annotations

import asyncio
import base64
import html
import logging
import os
import re
import warnings
from datetime import timedelta
from typing import Any

from clawd.channels.base import Inbound, Kind, Throttled
from clawd.core.messages import ImagePart

log = logging.getLogger(__name__)
RETRIES = 5
MAX_WAIT_SECONDS = 300.0  # a retry_after beyond this is an error, not a wait
LOGGERS = ("httpx", "httpcore", "telegram", "telegram.Bot", "telegram.ext")


def redact(text: str, token: str | None) -> str:
    """``text`` with the bot token (and its secret half) replaced by ``<token>``."""
    if not token:
        return text
    text = text.replace(token, "<token>")
    secret = token.partition(":")[2]
    return text.replace(secret, "<token>") if len(secret) >= 8 else text


class Redact(logging.Filter):
    """Takes the token out of a record of the HTTP client's or the SDK's loggers."""

    def __init__(self, token: str):
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        """The message made now, without the token: the SDK logs objects it changes
        later (a file's path becomes a URL holding the token)."""
        record.msg, record.args = redact(record.getMessage(), self.token), None
        return True


class TelegramApi:
    """One bot's Bot API (see the module docstring)."""

    name = "telegram"

    def __init__(self, token: str, api_root: str, *, poll_seconds: float = 30.0):
        self.token, self.root = token, api_root.rstrip("/")
        self.poll_seconds = poll_seconds
        self.bot: Any = None
        self.username = ""
        self.bot_id = 0
        self._filter = Redact(token)

    async def start(self) -> dict[str, Any]:
        """Connect and ask ``getMe``; the bot's id, username and name."""
        if self.bot is not None:  # connecting again, after a failure
            await self.bot.shutdown()
        # the SDK's periods as timedelta now (its next major version's only type), rather
        # than an int with a deprecation warning at every 429
        os.environ.setdefault("PTB_TIMEDELTA", "1")
        from telegram import Bot
        from telegram.request import HTTPXRequest

        for name in LOGGERS:
            logging.getLogger(name).addFilter(self._filter)
        self.bot = Bot(self.token, base_url=f"{self.root}/bot",
                       base_file_url=f"{self.root}/file/bot",
                       request=HTTPXRequest(connection_pool_size=16, read_timeout=30.0),
                       get_updates_request=HTTPXRequest(connection_pool_size=1,
                                                        read_timeout=10.0))
        me = await self._call(self.bot.get_me)
        self.bot_id, self.username = int(me.id), str(me.username or "")
        return {"id": me.id, "username": me.username, "name": me.first_name}

    async def close(self) -> None:
        if self.bot is not None:
            try:
                await self.bot.shutdown()
            finally:
                for name in LOGGERS:
                    logging.getLogger(name).removeFilter(self._filter)

    # --- in -------------------------------------------------------------------------------

    async def updates(self, offset: int | None) -> list[tuple[int, Inbound | None]]:
        """The next updates from ``offset`` (long polling ``poll_seconds``): each id with
        its message, or None for an update clawd does not take."""
        found = await self._call(self.bot.get_updates, offset=offset,
                                 timeout=int(self.poll_seconds),
                                 allowed_updates=["message", "edited_message"])
        return [(int(update.update_id), self.inbound(update)) for update in found]

    def inbound(self, update: Any) -> Inbound | None:
        """An update as an ``Inbound`` message (None: not a message of a person to a
        private chat, group or supergroup, nor an edit of one)."""
        edited = update.message is None and update.edited_message is not None
        message = update.edited_message if edited else update.message
        if message is None or message.from_user is None or message.from_user.is_bot:
            return None
        chat = message.chat
        if chat.type not in ("private", "group", "supergroup"):
            return None
        text = message.text or message.caption or ""
        mentioned, text = self._mention(message, text)
        kind: Kind = "text"
        file_id = None
        if message.photo:
            kind, file_id = "image", message.photo[-1].file_id
        elif message.voice or message.audio or message.video_note:
            kind = "voice"
        elif message.document or message.video or message.sticker or message.animation:
            kind = "file"
        elif not message.text:
            kind = "other"
        sender = message.from_user
        return Inbound(
            channel="telegram", update_id=int(update.update_id), chat_id=str(chat.id),
            chat_type="dm" if chat.type == "private" else "group", sender_id=str(sender.id),
            sender_name=f"@{sender.username}" if sender.username else None, text=text,
            message_id=int(message.message_id),
            thread=int(message.message_thread_id) if message.is_topic_message else None,
            mentioned=mentioned, kind=kind, file_id=file_id, edited=edited)

    def _mention(self, message: Any, text: str) -> tuple[bool, str]:
        """Whether the message names the bot (an @mention, a /command@bot, a reply to the
        bot), and its text without the @mention."""
        handle = f"@{self.username}".lower()
        mentioned = bool(message.reply_to_message and message.reply_to_message.from_user
                         and message.reply_to_message.from_user.id == self.bot_id)
        for entity in message.entities or message.caption_entities or ():
            said = text[entity.offset:entity.offset + entity.length]
            if entity.type == "mention" and said.lower() == handle:
                mentioned = True
                text = (text[:entity.offset] + text[entity.offset + entity.length:])
            elif entity.type == "text_mention" and entity.user and \
                    entity.user.id == self.bot_id:
                mentioned = True
            elif entity.type == "bot_command" and entity.offset == 0 and said.lower() \
                    .endswith(handle):
                mentioned = True
                text = said[:-len(handle)] + text[entity.length:]
        return mentioned, re.sub(r"[ \t]{2,}", " ", text).strip()

    async def image(self, file_id: str) -> ImagePart:
        """The photo ``file_id``, downloaded."""
        found = await self._call(self.bot.get_file, file_id)
        data = await found.download_as_bytearray()
        path = str(found.file_path or "")
        mime = "image/png" if path.endswith(".png") else "image/webp" if \
            path.endswith(".webp") else "image/jpeg"
        return ImagePart(base64.b64encode(bytes(data)).decode("ascii"), mime)

    # --- out ------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, *, thread: int | None = None,
                   html: bool = True) -> int:
        """``sendMessage``; HTML Telegram will not parse goes again as plain text."""
        from telegram.error import BadRequest

        try:
            sent = await self._call(self.bot.send_message, chat_id=chat_id, text=text,
                                    parse_mode="HTML" if html else None,
                                    message_thread_id=thread)
        except BadRequest as exc:
            if not html or "parse entities" not in str(exc):
                raise
            log.warning("telegram refused a message's HTML (%s); sent as plain text", exc)
            sent = await self._call(self.bot.send_message, chat_id=chat_id,
                                    text=plain(text), message_thread_id=thread)
        return int(sent.message_id)

    async def edit(self, chat_id: str, message_id: int, text: str, *,
                   html: bool = True, wait: bool = True) -> None:
        """``editMessageText``; without ``wait`` a 429 raises ``Throttled`` at once."""
        from telegram.error import BadRequest

        retries = RETRIES if wait else 0
        try:
            await self._call(self.bot.edit_message_text, text, chat_id=chat_id,
                             message_id=message_id, parse_mode="HTML" if html else None,
                             retries=retries)
        except BadRequest as exc:
            if "not modified" in str(exc):
                return
            if not html or "parse entities" not in str(exc):
                raise
            await self._call(self.bot.edit_message_text, plain(text), chat_id=chat_id,
                             message_id=message_id, retries=retries)

    async def typing(self, chat_id: str, *, thread: int | None = None) -> None:
        await self._call(self.bot.send_chat_action, chat_id=chat_id, action="typing",
                         message_thread_id=thread)

    async def set_commands(self, commands: list[tuple[str, str]]) -> None:
        from telegram import BotCommand

        await self._call(self.bot.set_my_commands,
                         [BotCommand(name, about) for name, about in commands])

    async def _call(self, method: Any, *args: Any, retries: int = RETRIES,
                    **kwargs: Any) -> Any:
        """``method``, a 429 waited out for its ``retry_after`` (up to ``retries`` times;
        with none, a 429 is ``Throttled``)."""
        from telegram.error import RetryAfter

        for attempt in range(retries + 1):
            try:
                return await method(*args, **kwargs)
            except RetryAfter as exc:
                wait = retry_seconds(exc)
                if not retries:
                    raise Throttled(wait) from None
                if attempt == retries or wait > MAX_WAIT_SECONDS:
                    raise
                log.info("telegram asks to wait %.0f s (429); waiting", wait)
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")


def plain(markup_text: str) -> str:
    """Telegram HTML as the text it shows."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup_text))


def retry_seconds(exc: Any) -> float:
    """The seconds a ``RetryAfter`` asks for (an int or a timedelta, by SDK version)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def error_text(exc: BaseException, token: str | None) -> str:
    """An SDK or network error in one line, without the token."""
    first = (str(exc).splitlines() or [""])[0]
    return redact(f"{type(exc).__name__}: {first}", token)
