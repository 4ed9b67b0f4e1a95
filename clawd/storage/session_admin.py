"""An agent's sessions as both front ends list, find, delete and set them aside, over any
storage (``AgentStorage``): the command line's ``clawd sessions`` and the gateway's session
routes call the same functions.

A ``Row`` is one session of a listing: its summary (read from its transcript) and the key
pointing at it (None: ended). ``resolve`` finds a session by key, id or id prefix;
``delete`` removes a session from the store and sets its transcript aside (or removes it);
``set_aside`` does that for the session a key points at, its transcript kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawd.core.errors import ClawdError
from clawd.core.messages import utc_iso
from clawd.sessions.files import TranscriptSummary, find_session, summary_of
from clawd.sessions.store import main_key

if TYPE_CHECKING:
    from clawd.sessions.interface import TranscriptLog
    from clawd.storage.interface import AgentStorage


@dataclass
class Row:
    """One session in a listing: its summary and the key pointing at it (None: ended)."""

    summary: TranscriptSummary
    key: str | None

    def to_json(self) -> dict[str, Any]:
        s = self.summary
        return {"sessionId": s.session_id, "key": self.key or s.key, "current": bool(self.key),
                "title": s.title, "messages": s.messages, "model": s.model,
                "createdAt": utc_iso(s.created), "lastActivity": utc_iso(s.last_activity),
                "sessionFile": s.location}


def rows(storage: AgentStorage, *, ended: bool) -> list[Row]:
    """The sessions keys point at (and with ``ended`` every other transcript), newest first."""
    data = storage.sessions.entries()
    current = {e.get("sessionId"): key for key, e in data.items() if isinstance(e, dict)}
    found = []
    for session_id in storage.session_ids():
        if not ended and session_id not in current:
            continue
        summary = summary_of(storage.transcript(session_id))
        if summary is None:
            continue
        key = current.get(summary.session_id)
        if key is not None or ended:
            found.append(Row(summary, key))
    return sorted(found, key=lambda r: r.summary.last_activity or "", reverse=True)


def resolve(storage: AgentStorage, agent_id: str, wanted: str) -> Row:
    """``ID|KEY``: a session key (full or short) first, then a session id or its prefix."""
    data = storage.sessions.entries()
    for key in (wanted, main_key(agent_id, wanted)):
        entry = data.get(key)
        if isinstance(entry, dict) and entry.get("sessionId"):
            log = storage.transcript(entry["sessionId"])
            summary = summary_of(log)
            if summary is None:
                raise ClawdError(f"session {key} has no readable transcript at {log.location}")
            return Row(summary, key)
    return resolve_by_id(storage, wanted)


def resolve_by_id(storage: AgentStorage, wanted: str) -> Row:
    session_id = find_session(storage.session_ids(), wanted, storage.location)
    log = storage.transcript(session_id)
    summary = summary_of(log)
    if summary is None:
        raise ClawdError(f"{log.location} is not a session transcript (no header line)")
    data = storage.sessions.entries()
    current = {e.get("sessionId"): k for k, e in data.items() if isinstance(e, dict)}
    return Row(summary, current.get(summary.session_id))


def delete(storage: AgentStorage, row: Row, *, purge: bool) -> str:
    """Remove the session from the store and set its transcript aside (or remove it)."""
    s = row.summary
    # a session in use by another process is not deleted under it
    held = (storage.hold(row.key, wait=0, hint="leave that chat first, then delete it")
            if row.key else None)
    try:
        for k, e in storage.sessions.entries().items():
            if isinstance(e, dict) and e.get("sessionId") == s.session_id:
                storage.sessions.update(k, lambda old: None)
        return storage.set_aside(s.session_id, purge=purge)
    finally:
        if held is not None:
            held.release()


def current_transcript(storage: AgentStorage, key: str) -> TranscriptLog | None:
    """The transcript of the session ``key`` points at, when it holds anything."""
    found = (storage.sessions.get(key) or {}).get("sessionId")
    return storage.transcript(found) if found and found in storage.session_ids() else None


def set_aside(storage: AgentStorage, key: str) -> str | None:
    """Delete the session ``key`` points at, keeping its transcript apart (a session nobody
    can come back to: an OpenAI request with no chat id, user or key). What was done, or
    None when the key points at nothing."""
    log = current_transcript(storage, key)
    summary = summary_of(log) if log is not None else None
    return delete(storage, Row(summary, key), purge=False) if summary else None
