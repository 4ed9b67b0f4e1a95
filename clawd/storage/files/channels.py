"""``ChannelState`` as ``<state>/channels.json`` (``storage.channels``): replaced whole under a
lock; one process polls, so an update id above the highest taken is a new one."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clawd.storage.channels import MAX_WAITING, PAIRING_SECONDS, Pairing, new_code, no_request
from clawd.storage.files.jsondoc import changing, read_object


class FileChannels:
    """``ChannelState`` as ``channels.json`` in the state folder."""

    def __init__(self, path: Path):
        self.path = path
        self.location = str(path)
        self._polling: dict[str, Any] = {}  # bot -> the open, locked file

    def try_poll(self, bot: str) -> bool:
        """A lock on ``channels-<bot>.poll`` beside the file, not waited for."""
        if bot in self._polling:
            return True
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path.with_name(f"channels-{bot}.poll"), "a+b")  # noqa: SIM115
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._polling[bot] = handle
        return True

    def stop_polling(self, bot: str) -> None:
        handle = self._polling.pop(bot, None)
        if handle is not None:
            handle.close()  # the lock goes with it

    def first_time(self, channel: str, update_id: int) -> bool:
        with self._changing() as data:
            mine = data.setdefault(channel, {})
            if update_id <= int(mine.get("lastUpdate", -1)):
                return False
            mine["lastUpdate"] = update_id
            return True

    def request(self, channel: str, sender: str, name: str | None, chat: str,
                now: float) -> tuple[Pairing | None, bool]:
        with self._changing() as data:
            waiting = {code: p for code, p in data.get("pairing", {}).items()
                       if p["created"] + PAIRING_SECONDS > now}
            data["pairing"] = waiting
            mine = [p for p in waiting.values() if p["channel"] == channel]
            for found in mine:
                if found["sender"] == sender:
                    return Pairing(**found), False
            if len(mine) >= MAX_WAITING:
                return None, False
            made = Pairing(new_code(), channel, sender, name, chat, now)
            waiting[made.code] = asdict(made)
            return made, True

    def pending(self, now: float) -> list[Pairing]:
        return sorted((Pairing(**p) for p in self._read().get("pairing", {}).values()
                       if p["created"] + PAIRING_SECONDS > now), key=lambda p: p.created)

    def approve(self, code: str, now: float) -> Pairing:
        return self._settle(code, "approved", now)

    def deny(self, code: str, now: float) -> Pairing:
        return self._settle(code, "denied", now)

    def _settle(self, code: str, state: str, now: float) -> Pairing:
        with self._changing() as data:
            found = data.get("pairing", {}).pop(code.strip().upper(), None)
            if found is None or found["created"] + PAIRING_SECONDS <= now:
                raise no_request(code)
            senders = data.setdefault(found["channel"], {}).setdefault("senders", {})
            senders[found["sender"]] = state
            return Pairing(**found)

    def approved(self, channel: str) -> set[str]:
        senders = self._read().get(channel, {}).get("senders", {})
        return {sender for sender, state in senders.items() if state == "approved"}

    def was_denied(self, channel: str, sender: str) -> bool:
        return self._read().get(channel, {}).get("senders", {}).get(sender) == "denied"

    def told(self, channel: str, sender: str) -> bool:
        with self._changing() as data:
            told = data.setdefault(channel, {}).setdefault("told", [])
            if sender in told:
                return False
            told.append(sender)
            return True

    def note(self, channel: str, *, connected: bool | None = None,
             error: str | None = None, inbound: int = 0, outbound: int = 0) -> None:
        with self._changing() as data:
            status = data.setdefault(channel, {}).setdefault("status", {
                "connected": False, "lastError": None, "messagesIn": 0, "messagesOut": 0})
            if connected is not None:
                status["connected"] = connected
            if error is not None:
                status["lastError"] = error or None
            status["messagesIn"] += inbound
            status["messagesOut"] += outbound
            status["updatedAt"] = time.time()

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: dict(mine["status"]) for name, mine in self._read().items()
                if isinstance(mine, dict) and "status" in mine}

    def _read(self) -> dict[str, Any]:
        return read_object(self.path)

    def _changing(self) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return changing(self.path, indent=1)
