"""Delivering a text to a channel target, for automation's outbox (docs/automation.md,
docs/channels.md).

``deliver(config, "telegram:<chatId>", text)`` sends ``text`` (Markdown, rendered and cut
at the limit) and returns the message id Telegram gave its last part: "delivered" means
that id exists. It uses the running channel of this process when there is one
(``service``), else connects for the one delivery (``clawd jobs tick``, say). A failure
raises (a ``ClawdError`` saying why, without the token) and the outbox retries; a 429 is
waited out inside.
"""

from __future__ import annotations

from typing import Any

from clawd.channels import split
from clawd.config import Config
from clawd.core.errors import ClawdError


def parse_target(target: str) -> tuple[str, str]:
    """``telegram:<chatId>`` as (channel, chat id); a ``ClawdError`` otherwise."""
    channel, _, chat = target.partition(":")
    if channel != "telegram" or not chat.lstrip("-").isdigit():
        raise ClawdError(f"{target!r} is not a channel target (telegram:<chatId>)")
    return channel, chat


async def deliver(config: Config, target: str, text: str, *, service: Any = None) -> int:
    """Send ``text`` to ``target``; the message id of its last part."""
    _, chat = parse_target(target)
    if service is not None:
        return int(await service.deliver(target, text))
    from clawd.channels.telegram import TelegramApi, error_text

    rules = config.channels.telegram
    token = rules.token()
    if not token:
        raise ClawdError("no Telegram bot token: set channels.telegram.botToken or "
                         "TELEGRAM_BOT_TOKEN")
    api = TelegramApi(token, rules.api_root)
    number = 0
    try:
        await api.start()
        for part in split.parts(text):
            number = await api.send(chat, part)
    except ClawdError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line, no token; the outbox retries
        raise ClawdError(f"telegram delivery to {chat} failed: {error_text(exc, token)}"
                         ) from None
    finally:
        await api.close()
    if not number:
        raise ClawdError("nothing to deliver: the text is empty")
    return number
