"""One ``sessions.json`` entry: its fields, a new one, and the checks and migration of old ones.

An entry is small: which transcript holds the session, its model, the latest turn's figures
(OpenClaw's ``inputTokens``, ``totalTokens`` & co.) and counters that are only ever
incremented. ``new_entry`` makes one; ``bad_fields`` and ``malformed`` find hand edits no
reader should trip over; ``migrate_entry`` gives an entry written when ``inputTokens`` & co.
were session totals today's meanings. The store (``sessions``) and the transcripts' reader
(``sessions.files``) both build on this. The fields are documented in docs/sessions.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from clawd.core.messages import now_iso


class SessionEntry(TypedDict, total=False):
    """One session key's entry in the store (docs/sessions.md says what each field means).
    Stored as JSON; readers go through these names, so a misspelt field is a type error."""

    sessionId: str
    sessionFile: str
    createdAt: str | None
    updatedAt: str | None
    model: str | None
    modelOverride: str | None
    inputTokens: int
    outputTokens: int
    totalTokens: int
    totalTokensFresh: bool
    contextTokens: int | None
    compactionCount: int
    memoryFlushAt: str | None
    memoryFlushCompactionCount: int | None
    memoryFlushCount: int
    cumulativeInputTokens: int
    cumulativeOutputTokens: int
    cumulativeCacheReadTokens: int
    cumulativeCacheWriteTokens: int
    contextUsedTokens: int | None
    tokenRatio: float
    lastModelCallAt: float | None
    prunedResults: dict[str, str]
    invalidLines: list[int]
    mcpOff: list[str]  # MCP servers switched off in this session (``/mcp off``)


# Only ever incremented (``patch(add=...)``), so concurrent writers add up.
COUNTERS = ("cumulativeInputTokens", "cumulativeOutputTokens", "cumulativeCacheReadTokens",
            "cumulativeCacheWriteTokens", "compactionCount", "memoryFlushCount")
# Old cumulative field -> its own name now (before, inputTokens etc. were session totals and
# contextTokens the context in use; OpenClaw's meanings are the latest turn and the window).
_RENAMED = {"inputTokens": "cumulativeInputTokens", "outputTokens": "cumulativeOutputTokens",
            "cacheReadTokens": "cumulativeCacheReadTokens",
            "cacheWriteTokens": "cumulativeCacheWriteTokens", "contextTokens": "contextUsedTokens"}


def new_entry(session_id: str, session_file: str | Path, model: str, now: str | None = None, *,
              context_window: int | None = None) -> SessionEntry:
    now = now or now_iso()
    return SessionEntry(
        sessionId=session_id, sessionFile=str(session_file), createdAt=now, updatedAt=now,
        model=model, inputTokens=0, outputTokens=0, totalTokens=0, totalTokensFresh=False,
        contextTokens=context_window, contextUsedTokens=None, cumulativeInputTokens=0,
        cumulativeOutputTokens=0, cumulativeCacheReadTokens=0, cumulativeCacheWriteTokens=0,
        compactionCount=0, memoryFlushCount=0, memoryFlushAt=None,
        memoryFlushCompactionCount=None, lastModelCallAt=None)


def needs_migration(entry: Any) -> bool:
    """An entry written when ``inputTokens`` & co. were session totals."""
    return (isinstance(entry, dict) and "cumulativeInputTokens" not in entry
            and any(name in entry for name in _RENAMED))


def migrate_entry(entry: dict[str, Any], latest: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The entry with OpenClaw's meanings: the old totals under their own names, and the
    OpenClaw-named fields from ``latest`` (what the transcript says of the latest call and
    turn: ``totalTokens``, ``totalTokensFresh``, ``inputTokens``, ``outputTokens``) or unset."""
    new = {k: v for k, v in entry.items() if k not in _RENAMED and k != "totalTokens"}
    for old, name in _RENAMED.items():
        if old in entry:
            new[name] = entry[old]
    new.update({"inputTokens": 0, "outputTokens": 0, "totalTokens": 0,
                "totalTokensFresh": False, "contextTokens": None})
    new.update(latest or {})
    for name in COUNTERS:
        new.setdefault(name, 0)
    return new


_INT = (int,)
_NUMBER = (int, float)
# What each known field holds (None is allowed for all but the counters); a field of another
# type (a hand edit) is dropped, so no reader trips over it.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **{name: _INT for name in (*COUNTERS, "inputTokens", "outputTokens", "totalTokens")},
    "contextTokens": _INT, "contextUsedTokens": _INT, "memoryFlushCompactionCount": _INT,
    "createdAt": (str,), "updatedAt": (str,), "memoryFlushAt": (str,), "model": (str,),
    "modelOverride": (str,), "totalTokensFresh": (bool,), "lastModelCallAt": _NUMBER,
    "tokenRatio": _NUMBER, "prunedResults": (dict,), "invalidLines": (list,)}
_OPTIONAL = {"contextTokens", "contextUsedTokens", "memoryFlushCompactionCount", "createdAt",
             "updatedAt", "memoryFlushAt", "model", "modelOverride", "lastModelCallAt"}


def bad_fields(entry: dict[str, Any]) -> list[str]:
    """Known fields of an entry that hold a value of the wrong type."""
    bad = []
    for name, kinds in _FIELD_TYPES.items():
        if name not in entry or entry[name] is None and name in _OPTIONAL:
            continue
        value = entry[name]
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if ok and name == "tokenRatio":
            ok = 0.01 <= value <= 100
        elif ok and name == "prunedResults":
            ok = all(isinstance(v, str) for v in value.values())
        elif ok and name == "invalidLines":
            ok = all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        elif ok and kinds is _INT:
            ok = value >= 0
        if not ok:
            bad.append(name)
    return bad


def malformed(data: dict[str, Any]) -> list[str]:
    """Keys whose entry cannot be a session entry (hand-edited): not an object, or a
    ``sessionId`` that is not a string or comes without a string ``sessionFile``."""
    return [key for key, entry in data.items()
            if not isinstance(entry, dict) or "sessionId" in entry and (
                not isinstance(entry["sessionId"], str)
                or not isinstance(entry.get("sessionFile"), str))]
