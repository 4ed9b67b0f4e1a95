"""What every session store shares: the spelling of session keys, and how an entry is
patched and recounted from its transcript.

The stores themselves are ``storage.files.sessions.SessionStore`` (``sessions.json``) and
``storage.postgres.sessions.PgSessions`` (rows); the fields are documented in
docs/sessions.md.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from typing import Any, cast

from clawd.sessions.entry import SessionEntry
from clawd.sessions.files import TranscriptSummary, entry_from

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
        entry[name] = as_count(entry.get(name)) + delta
    for target, source in (copy or {}).items():
        entry[target] = entry.get(source, 0)
    return cast(SessionEntry, entry)


def recounted(data: dict[str, Any], summary: Callable[[dict[str, Any]], TranscriptSummary | None],
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


def as_count(value: Any) -> int:
    """A counter's stored value as a number: an integer is, anything else counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _store_only(entry: dict[str, Any]) -> dict[str, Any]:
    """What a transcript cannot tell: kept when an entry is recounted from it."""
    return {k: v for k, v in entry.items()
            if k in ("modelOverride", "prunedResults", "tokenRatio", "contextTokens",
                     "contextUsedTokens", "invalidLines", "lastModelCallAt", "createdAt")}
