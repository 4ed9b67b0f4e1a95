"""The embedded session store: ``sessions.json`` maps session keys to small entries.

Every change is a read-modify-write under an exclusive lock on ``sessions.json.lock``,
written to a temporary file and renamed into place, so two clawd processes never lose each
other's updates and a crash never leaves a half-written store. Counters are increments
applied under that lock to what is on disk, never absolute values from a stale copy.

The store is an index; the transcripts are the record. A store that cannot be parsed is
moved aside (``sessions.json.corrupt-<time>``, every byte kept) with a warning, and a
missing or set-aside store is rebuilt from the transcripts' header lines and entries. An
update to an entry that vanished re-creates it from the writer's copy. Entries written
before the fields took OpenClaw's meanings are migrated once (the old file kept aside).
The fields are documented in docs/sessions.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import orjson

from clawd.core.messages import now_iso
from clawd.sessions.entry import (
    COUNTERS,
    SessionEntry,
    bad_fields,
    malformed,
    migrate_entry,
    needs_migration,
)
from clawd.sessions.files import TranscriptSummary
from clawd.sessions.store import normalize_key, patched, recounted
from clawd.storage.files.locking import locked_file
from clawd.storage.files.transcripts import read_summary, rebuild, transcripts

log = logging.getLogger(__name__)


class SessionStore:
    """``sessions.json`` with locked, atomic updates."""

    def __init__(self, path: Path, now: Callable[[], str] = now_iso):
        self.path = path
        self.location = str(path)
        self.now = now  # the clock behind createdAt/updatedAt (injectable for tests)
        self.lock_path = path.with_name(path.name + ".lock")

    def read(self) -> dict[str, Any]:
        """The whole store as it is on disk (without locking: a consistent snapshot thanks to
        rename); {} when there is none."""
        return self._load() or {}

    def _load(self) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = orjson.loads(raw) if raw.strip() else {}
            if not isinstance(data, dict):
                raise ValueError("top level is not an object")
        except ValueError as exc:
            raise _Corrupt(str(exc)) from None
        return _normalized(data)

    def entries(self) -> dict[str, SessionEntry]:
        """Every entry; the store first rebuilt, repaired or migrated when it needs it."""
        try:
            data = self._load()
            if data is None and not transcripts(self.path.parent):
                return {}
            if data is not None and not malformed(data) and not any(
                    needs_migration(e) or bad_fields(e) for e in data.values()):
                return data
        except _Corrupt:
            pass
        with self._locked():
            return self._read_repairing()

    def rebuild(self) -> tuple[int, int]:
        """Recount every entry from its transcript and add the keys only transcripts know;
        returns (entries recounted, entries added). Fields only the store knows (a pinned
        model, pruning decisions) are kept; a key keeps the session it points at."""
        with self._locked():
            data = self._read_repairing()
            found = _normalized(rebuild(self.path.parent))

            def summary(entry: dict[str, Any]) -> TranscriptSummary | None:
                path = Path(entry.get("sessionFile") or "")
                return read_summary(path) if path.is_file() else None

            done = recounted(data, summary, found)
            self._write(data)
            return done

    def get(self, key: str) -> SessionEntry | None:
        return self.entries().get(normalize_key(key))

    def count(self) -> int:
        return len(self.entries())

    def page(self, limit: int, after: tuple[str, str] | None = None
             ) -> list[tuple[str, SessionEntry]]:
        from clawd.sessions.paging import page_of

        return page_of(self.entries(), limit, after)

    def update(self, key: str, change: Callable[[SessionEntry | None], SessionEntry | None],
               *, touch: bool = True) -> SessionEntry | None:
        """Apply ``change`` to one entry under the lock; return the new entry.

        ``change`` receives the current entry (or None) and returns the new one (None
        removes it). ``updatedAt`` (the last activity, which idle resets read) is set on
        every write unless ``touch`` is false (housekeeping that is no activity).
        """
        key = normalize_key(key)
        with self._locked():
            data = self._read_repairing()
            entry = change(cast(SessionEntry, dict(data[key])) if key in data else None)
            if entry is None:
                data.pop(key, None)
            else:
                if touch or not entry.get("updatedAt"):
                    entry["updatedAt"] = self.now()
                data[key] = entry
            self._write(data)
            return entry

    def patch(self, key: str, base: SessionEntry | None = None,
              add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
              touch: bool = True, **fields: Any) -> SessionEntry | None:
        """Set ``fields`` and add ``add`` to counters of one entry, against what is on disk;
        ``copy`` sets fields to the value another field has there (``{target: source}``).

        An entry that is missing (the store was deleted or set aside meanwhile) is
        re-created from ``base``, the writer's own copy; without ``base`` nothing is written.
        """
        def change(stored: SessionEntry | None) -> SessionEntry | None:
            return patched(stored, base, add, copy, fields, f"{self.path}: {key}")
        return self.update(key, change, touch=touch)

    def _read_repairing(self) -> dict[str, Any]:
        """The store, repaired (under the lock): an unparseable file is moved aside and a
        missing one rebuilt from the transcripts; entries of the wrong shape are dropped
        and old-meaning entries migrated, each after the whole file is copied aside."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            data = self._load()
        except _Corrupt as exc:
            os.replace(self.path, aside)
            log.warning("%s could not be parsed (%s); moved it to %s and rebuilt the store "
                        "from the transcripts", self.path, exc, aside.name)
            data = None
        if data is None:
            data = _normalized(rebuild(self.path.parent))
            if data:
                self._write(data)
                log.warning("%s: rebuilt %d %s from the transcripts", self.path, len(data),
                            "entry" if len(data) == 1 else "entries")
            return data
        bad = malformed(data)
        if bad:
            shutil.copy2(self.path, aside)
            for key in bad:
                data.pop(key)
            self._write(data)
            log.warning("%s: dropped malformed entries %s (the file as it was is kept as %s)",
                        self.path, ", ".join(map(repr, bad)), aside.name)
        old = [key for key, entry in data.items() if needs_migration(entry)]
        if old:
            kept = self.path.with_name(f"{self.path.name}.pre-migration")
            if not kept.exists():
                shutil.copy2(self.path, kept)
            for key in old:
                data[key] = migrate_entry(data[key], _latest(data[key]))
            self._write(data)
            log.info("%s: %d entries now use OpenClaw's field meanings (the old file is kept "
                     "as %s)", self.path, len(old), kept.name)
        wrong = {key: bad_fields(entry) for key, entry in data.items()}
        wrong = {key: names for key, names in wrong.items() if names}
        if wrong:
            shutil.copy2(self.path, aside)
            for key, names in wrong.items():
                for name in names:
                    if name in COUNTERS:  # a counter is always there: it starts again
                        data[key][name] = 0
                    else:
                        data[key].pop(name)
            self._write(data)
            dropped = "; ".join(f"{k}: {', '.join(n)}" for k, n in wrong.items())
            log.warning("%s: dropped fields of the wrong type (%s; counters start again at "
                        "0); the file as it was is kept as %s", self.path, dropped, aside.name)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked_file(self.lock_path)


class _Corrupt(ValueError):
    pass


def _normalized(data: dict[str, Any]) -> dict[str, Any]:
    """The store with every key in its normal spelling (a store written before keys were
    normalised may hold ``agent:main:Telegram:Group:42``); the next write saves it so. Of two
    keys that differ only in case, the entry updated last wins; the other is logged."""
    if all(key == normalize_key(key) for key in data):
        return data
    merged: dict[str, Any] = {}
    for key, entry in data.items():
        norm = normalize_key(key)
        other = merged.get(norm)
        if other is not None and _updated(other) > _updated(entry):
            entry, other = other, entry
        if other is not None:
            log.warning("sessions.json: %r and another spelling of it name two sessions; "
                        "keeping the newer, session %s is no longer listed", key,
                        other.get("sessionId") if isinstance(other, dict) else other)
        merged[norm] = entry
    return merged


def _updated(entry: Any) -> str:
    return str(entry.get("updatedAt") or "") if isinstance(entry, dict) else ""


def _latest(entry: dict[str, Any]) -> dict[str, Any]:
    """The OpenClaw-named latest figures of an old entry, from its transcript."""
    path = Path(entry.get("sessionFile") or "")
    summary = read_summary(path) if path.is_file() else None
    return summary.latest if summary is not None else {}
