"""The session store: ``sessions.json`` maps session keys to small entries.

Every change is a read-modify-write under an exclusive lock on ``sessions.json.lock``,
written to a temporary file and renamed into place, so two clawd processes never lose each
other's updates and a crash never leaves a half-written store. A store that cannot be parsed
is moved aside (``sessions.json.corrupt-<time>``, every byte kept) with a warning, and a
fresh one is started; the transcripts themselves are untouched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from clawd.messages import now_iso

log = logging.getLogger(__name__)

COUNTERS = ("inputTokens", "outputTokens", "totalTokens", "contextTokens",
            "cacheReadTokens", "cacheWriteTokens", "compactionCount")


def main_key(agent_id: str, name: str = "main") -> str:
    """The full session key for a short name (``agent:<agentId>:<name>``)."""
    return name if name.startswith("agent:") else f"agent:{agent_id}:{name}"


def is_group_key(key: str) -> bool:
    """A group or channel session: never sees MEMORY.md."""
    return ":group:" in key or ":channel:" in key


def new_entry(session_id: str, session_file: Path, model: str, now: str | None = None
              ) -> dict[str, Any]:
    now = now or now_iso()
    entry: dict[str, Any] = {"sessionId": session_id, "sessionFile": str(session_file),
                             "createdAt": now, "updatedAt": now, "model": model}
    entry.update({name: 0 for name in COUNTERS})
    entry.update({"memoryFlushAt": None, "memoryFlushCompactionCount": None,
                  "lastModelCallAt": None})
    return entry


class SessionStore:
    """``sessions.json`` with locked, atomic updates."""

    def __init__(self, path: Path, now: Callable[[], str] = now_iso):
        self.path = path
        self.now = now  # the clock behind createdAt/updatedAt (injectable for tests)
        self.lock_path = path.with_name(path.name + ".lock")

    def read(self) -> dict[str, Any]:
        """The whole store (without locking: a consistent snapshot thanks to rename)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = orjson.loads(raw) if raw.strip() else {}
            if not isinstance(data, dict):
                raise ValueError("top level is not an object")
            return data
        except ValueError as exc:
            raise _Corrupt(str(exc)) from None

    def entries(self) -> dict[str, Any]:
        """Every entry, the store repaired first if it is corrupt or malformed."""
        try:
            data = self.read()
            if not _malformed(data):
                return data
        except _Corrupt:
            pass
        with self._locked():
            return self._read_repairing()

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries().get(key)

    def update(self, key: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]
               ) -> dict[str, Any] | None:
        """Apply ``change`` to one entry under the lock; return the new entry.

        ``change`` receives the current entry (or None) and returns the new one (None
        removes it). ``updatedAt`` is set on every write.
        """
        with self._locked():
            data = self._read_repairing()
            entry = change(dict(data[key]) if key in data else None)
            if entry is None:
                data.pop(key, None)
            else:
                entry["updatedAt"] = self.now()
                data[key] = entry
            self._write(data)
            return entry

    def patch(self, key: str, **fields: Any) -> dict[str, Any] | None:
        """Set fields of an existing entry."""
        def change(entry: dict[str, Any] | None) -> dict[str, Any] | None:
            if entry is None:
                return None
            entry.update(fields)
            return entry
        return self.update(key, change)

    def _read_repairing(self) -> dict[str, Any]:
        """The store, repaired: an unparseable file is moved aside and a new one started;
        entries of the wrong shape are dropped after the whole file is copied aside."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            data = self.read()
        except _Corrupt as exc:
            os.replace(self.path, aside)
            log.warning("%s could not be parsed (%s); moved it to %s and started a new store",
                        self.path, exc, aside.name)
            return {}
        bad = _malformed(data)
        if bad:
            shutil.copy2(self.path, aside)
            for key in bad:
                data.pop(key)
            self._write(data)
            log.warning("%s: dropped malformed entries %s (the file as it was is kept as %s)",
                        self.path, ", ".join(map(repr, bad)), aside.name)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as handle:
            _lock(handle)
            try:
                yield
            finally:
                _unlock(handle)


class _Corrupt(ValueError):
    pass


def _malformed(data: dict[str, Any]) -> list[str]:
    """Keys whose entry cannot be a session entry (hand-edited): not an object, or a
    ``sessionId`` that is not a string or comes without a string ``sessionFile``."""
    return [key for key, entry in data.items()
            if not isinstance(entry, dict) or "sessionId" in entry and (
                not isinstance(entry["sessionId"], str)
                or not isinstance(entry.get("sessionFile"), str))]


try:
    import fcntl

    def _lock(handle: Any) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)

    def _unlock(handle: Any) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
except ImportError:  # Windows
    import msvcrt

    def _lock(handle: Any) -> None:
        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                return
            except OSError:
                time.sleep(0.01)

    def _unlock(handle: Any) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
