"""The ``channels`` section of the config: where clawd talks besides its own front ends
(docs/channels.md).

``channels.telegram``: ``enabled`` (run inside ``clawd serve``), ``botToken`` (else env
``TELEGRAM_BOT_TOKEN``), ``apiRoot`` (the Bot API's base URL), ``dmPolicy`` (who may talk
in direct messages), ``allowFrom`` (user ids or ``@names`` let in without pairing),
``groups`` (``{"<chatId>" or "*": {requireMention, allowFrom}}``; a group not listed is
ignored; a group's ``allowFrom`` names who is answered there, ``"*"`` everyone, and when it
is not set the channel's ``allowFrom`` is the default) and ``agent`` (which agent answers).
The token is a secret: it is never part of a message or a log line (``Telegram.token``
returns it).
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, field_validator

from clawd.config.sections import BaseUrl, Bool, Model

TELEGRAM_TOKEN_ENV = "TELEGRAM_BOT_TOKEN"
TELEGRAM_API_ROOT = "https://api.telegram.org"

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]


ANYONE = "*"  # in a group's ``allowFrom``: every member


def senders(value: list[str], *, anyone: bool = False) -> list[str]:
    """``allowFrom`` entries, trimmed: user ids (digits) or ``@names`` (and, with ``anyone``,
    ``"*"``); a ``ValueError`` naming the first bad one."""
    found = [s.strip() for s in value]
    for sender, text in zip(value, found, strict=True):
        if text.lstrip("-").isdigit() or text.startswith("@") and len(text) > 1:
            continue
        if anyone and text == ANYONE:
            continue
        also = ', nor "*" (every member)' if anyone else ""
        raise ValueError(f"{sender!r} is neither a Telegram user id (digits) nor an "
                         f"@name{also}")
    return found


class GroupRule(Model):
    """What a listed group needs before clawd answers there: a mention (unless
    ``requireMention`` is false), and a sender its ``allowFrom`` names (None: the
    channel's ``allowFrom``, see ``access.group_member``)."""

    require_mention: Bool = True
    allow_from: list[str] | None = None

    @field_validator("allow_from")
    @classmethod
    def _senders(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else senders(value, anyone=True)


class Telegram(Model):
    enabled: Bool = False
    bot_token: str | None = Field(None, repr=False)  # a secret: never in a repr or log
    api_root: BaseUrl = TELEGRAM_API_ROOT
    dm_policy: DmPolicy = "pairing"
    allow_from: list[str] = []
    groups: dict[str, GroupRule] = {}
    agent: str | None = None

    @field_validator("allow_from")
    @classmethod
    def _senders(cls, value: list[str]) -> list[str]:
        return senders(value)

    @field_validator("groups")
    @classmethod
    def _groups(cls, value: dict[str, GroupRule]) -> dict[str, GroupRule]:
        for chat in value:
            if chat != "*" and not chat.lstrip("-").isdigit():
                raise ValueError(f"{chat!r} is not a chat id (digits, a group's start with "
                                 f"-) nor \"*\"")
        return value

    def token(self) -> str | None:
        """``TELEGRAM_BOT_TOKEN``, else ``botToken`` (None: neither is set)."""
        return os.environ.get(TELEGRAM_TOKEN_ENV, "").strip() or self.bot_token or None


class Channels(Model):
    telegram: Telegram = Telegram()
