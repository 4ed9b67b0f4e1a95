"""``clawd pairing list | approve CODE | deny CODE`` and ``clawd channels status``
(docs/channels.md).

A stranger who writes to the bot gets an 8-character code; the operator lets them in with
``clawd pairing approve CODE`` (they are told so on the channel when its token is at hand)
or keeps them out with ``deny``. ``channels status`` shows each channel as the process
running it last recorded it: connected or not, the last error, messages in and out; and
each configured channel whether it is enabled. Nothing here prints a token.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

WELCOME = "You're in: an operator approved you. Say hello."


def add_parsers(command: Any, pairing_sub: Any, channels_sub: Any) -> None:
    command(pairing_sub, "list", "the requests waiting (code, channel, sender, expiry)")
    command(pairing_sub, "approve", "let the sender of a request talk to clawd") \
        .add_argument("code", metavar="CODE")
    command(pairing_sub, "deny", "refuse a request (its sender is not asked again)") \
        .add_argument("code", metavar="CODE")
    status = command(channels_sub, "status", "each channel: connected, last error, messages "
                     "in and out")
    status.add_argument("--json", action="store_true")


def cmd_pairing(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.storage import open_channels

    config = load_config()
    state = open_channels(config)
    now = time.time()
    action = args.pairing_command
    if action == "approve":
        found = state.approve(args.code, now)
        print(f"approved {_who(found)} on {found.channel}: their messages are answered now")
        told = _tell(config, found.chat, WELCOME) if found.channel == "telegram" else None
        if told:
            print(f"(not told on {found.channel}: {told})")
        return 0
    if action == "deny":
        found = state.deny(args.code, now)
        print(f"denied {_who(found)} on {found.channel}: they are not asked again")
        return 0
    waiting = state.pending(now)
    if not waiting:
        print("no pairing requests waiting")
    for request in waiting:
        minutes = max(0, int((request.expires - now) // 60))
        print(f"{request.code}  {request.channel:<9} {_who(request):<28} expires in "
              f"{minutes} min")
    return 0


def _who(request: Any) -> str:
    return f"{request.name} ({request.sender})" if request.name else request.sender


def _tell(config: Any, chat: str, text: str) -> str | None:
    """Send ``text`` to a Telegram chat with the configured bot; why not (None: sent)."""
    rules = config.channels.telegram
    token = rules.token()
    if not token:
        return "no bot token configured"
    from clawd.channels.telegram import TelegramApi, error_text

    async def send() -> None:
        api = TelegramApi(token, rules.api_root)
        try:
            await api.start()
            await api.send(chat, text, html=False)
        finally:
            await api.close()

    try:
        asyncio.run(send())
    except ImportError:
        return "python-telegram-bot is not installed (pip install 'clawd[telegram]')"
    except Exception as exc:  # noqa: BLE001 - said in one line; the approval stands
        return error_text(exc, token)
    return None


def cmd_channels(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.storage import open_channels

    config = load_config()
    recorded = open_channels(config).status()
    rules = config.channels.telegram
    rows = {"telegram": {"enabled": rules.enabled, "token": bool(rules.token()),
                         **recorded.get("telegram", {"connected": False, "lastError": None,
                                                     "messagesIn": 0, "messagesOut": 0})}}
    for name, found in recorded.items():
        rows.setdefault(name, {"enabled": False, **found})
    if getattr(args, "json", False):
        print(json.dumps({"channels": rows}))
        return 0
    for name, row in rows.items():
        state = ("connected" if row.get("connected") else "not connected") if \
            row["enabled"] else "disabled"
        if row["enabled"] and not row.get("token", True):
            state += " (no bot token: set channels.telegram.botToken or TELEGRAM_BOT_TOKEN)"
        print(f"{name:<9} {state} · in {row.get('messagesIn', 0)} · out "
              f"{row.get('messagesOut', 0)}"
              + (f" · last error: {row['lastError']}" if row.get("lastError") else ""))
    return 0


def doctor_checks(config: Any):
    """(ok, what, text) for the Telegram channel when enabled: its token, asked ``getMe``
    (the token itself is never shown)."""
    rules = config.channels.telegram
    if not rules.enabled:
        return
    token = rules.token()
    if not token:
        yield False, "telegram", ("enabled, but no bot token: set channels.telegram.botToken "
                                  "or TELEGRAM_BOT_TOKEN")
        return
    from clawd.channels.telegram import TelegramApi, error_text

    async def ask() -> dict[str, Any]:
        api = TelegramApi(token, rules.api_root)
        try:
            return await api.start()
        finally:
            await api.close()

    try:
        me = asyncio.run(ask())
    except ImportError:
        yield False, "telegram", "python-telegram-bot is not installed (pip install " \
            "'clawd[telegram]')"
        return
    except Exception as exc:  # noqa: BLE001 - one line, no token
        yield False, "telegram", f"getMe failed: {error_text(exc, token)}"
        return
    yield True, "telegram", f"the token works: @{me['username']} (dmPolicy {rules.dm_policy})"
