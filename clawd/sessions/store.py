"""The session store: ``sessions.json`` maps session keys to small entries.

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
import unicodedata
from collections.abc import Callable, Iterator
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
from clawd.sessions.files import Summary, entry_from, read_summary, rebuild, transcripts

log = logging.getLogger(__name__)


def normalize_key(key: str) -> str:
    """Session keys are case-insensitive: one spelling (lowercase) wherever a key is made
    or looked up, so ``Telegram:Group:42`` is the same (group) session as ``telegram:group:42``."""
    return key.strip().lower()


MAX_KEY_CHARS = 256


def key_problem(key: str) -> str | None:
    """Why ``key`` can never name a session (None: it can): empty, over ``MAX_KEY_CHARS``,
    or holding a control character (CR, LF, NUL …) or half of a UTF-16 surrogate pair,
    which no file, header or JSON store carries. Any other Unicode is a key."""
    text = key.strip()
    if not text:
        return "the session key is empty"
    if len(text) > MAX_KEY_CHARS:
        return f"the session key is {len(text):,} characters; at most {MAX_KEY_CHARS}"
    bad = next((ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs")), None)
    if bad is not None:
        return f"the session key holds the character U+{ord(bad):04X}, which no key may hold"
    return None


def main_key(agent_id: str, name: str = "main") -> str:
    """The full session key for a short name (``agent:<agentId>:<name>``)."""
    key = normalize_key(name)
    return key if key.startswith("agent:") else normalize_key(f"agent:{agent_id}:{key}")


def is_group_key(key: str) -> bool:
    """A group or channel session: never sees MEMORY.md, daily logs or private notes."""
    key = normalize_key(key)
    return ":group:" in key or ":channel:" in key


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

            def summary(entry: dict[str, Any]) -> Summary | None:
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


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold an exclusive OS lock on ``path`` (made, with its folder, if missing): the
    read-modify-write of a file several processes change goes under it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        _lock(handle)
        try:
            yield
        finally:
            _unlock(handle)


def patched(stored: SessionEntry | None, base: SessionEntry | None,
            add: dict[str, int] | None, copy: dict[str, str] | None, fields: dict[str, Any],
            where: str) -> SessionEntry | None:
    """``patch``'s change of one entry: ``fields`` set, ``add`` added to counters, ``copy``
    copied (``{target: source}``); a missing entry re-created from ``base`` (None without
    it: nothing is written)."""
    if stored is None:
        if base is None:
            return None
        log.warning("%s: the entry was missing; re-created it", where)
        stored = base
    entry: dict[str, Any] = {**stored, **fields}  # the names are the caller's
    for name, delta in (add or {}).items():
        entry[name] = _count(entry.get(name)) + delta
    for target, source in (copy or {}).items():
        entry[target] = entry.get(source, 0)
    return cast(SessionEntry, entry)


def recounted(data: dict[str, Any], summary: Callable[[dict[str, Any]], Summary | None],
              found: dict[str, Any]) -> tuple[int, int]:
    """``rebuild`` over ``data`` (changed in place): each entry recounted from its
    transcript's ``summary`` (store-only fields kept), and the keys of ``found`` (entries
    from the transcripts) added when neither the key nor its session is known;
    (recounted, added)."""
    counted = added = 0
    for key, entry in data.items():
        about = summary(entry)
        if about is not None:
            data[key] = {**entry, **entry_from(about, entry.get("model") or "",
                                               entry.get("sessionFile")),
                         **_store_only(entry)}
            counted += 1
    known = {e.get("sessionId") for e in data.values()}
    for key, entry in found.items():
        if key not in data and entry["sessionId"] not in known:
            data[key] = dict(entry)
            added += 1
    return counted, added


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


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _store_only(entry: dict[str, Any]) -> dict[str, Any]:
    """What a transcript cannot tell: kept when an entry is recounted from it."""
    return {k: v for k, v in entry.items()
            if k in ("modelOverride", "prunedResults", "tokenRatio", "contextTokens",
                     "contextUsedTokens", "invalidLines", "lastModelCallAt", "createdAt")}


def _latest(entry: dict[str, Any]) -> dict[str, Any]:
    """The OpenClaw-named latest figures of an old entry, from its transcript."""
    path = Path(entry.get("sessionFile") or "")
    summary = read_summary(path) if path.is_file() else None
    return summary.latest if summary is not None else {}


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
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                time.sleep(0.01)

    def _unlock(handle: Any) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
