"""A turn whose worker died (killed, say) while it ran: ended for whoever follows it, and
what its reply had said kept in its session, as Ctrl-C keeps a reply cut short."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def end(conn: Any, turn_id: str, stopped: list[dict[str, Any]]) -> str:
    """End the turn of a worker that is gone: what it said is kept, then the lines
    ``stopped`` (the front end's error and ``done``). The reply's text so far."""
    with conn.transaction():
        rows = conn.execute("SELECT seq, line FROM turn_events WHERE turn_id = %s "
                            "ORDER BY seq", (turn_id,)).fetchall()
        last = rows[-1][0] if rows else -1
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO turn_events (turn_id, seq, line) VALUES "
                            "(%s, %s, %s::json) ON CONFLICT DO NOTHING",
                            [(turn_id, last + n, orjson.dumps(line).decode())
                             for n, line in enumerate(stopped, start=1)])
        conn.execute("UPDATE gateway_turns SET state = 'done' WHERE turn_id = %s", (turn_id,))
    return "".join(str(line.get("text") or "") for _, line in rows
                   if isinstance(line, dict) and line.get("type") == "delta")


def keep_partial(db: Any, agent_id: str, key: str, asked: str, partial: str) -> None:
    """Write what a dead worker's reply had said into the session, marked interrupted as
    Ctrl-C marks it, when the session's last message is still that turn's own (no other
    turn came since: ``asked`` is its text's hash) and nobody holds the session."""
    from clawd.core.messages import Message
    from clawd.sessions.lock import SessionBusyError

    if not partial.strip():
        return
    storage = db.agent(agent_id)
    try:
        lease = storage.hold(key, wait=0)
    except SessionBusyError:
        return  # someone has the session: the next turn folds the message in
    try:
        entry = storage.sessions.get(key) or {}
        if not entry.get("sessionId"):
            return
        log = storage.transcript(entry["sessionId"])
        said = [e for e in log.load(quiet=True).entries if e.get("type") == "message"
                and not e.get("flush")]
        if said and said[-1].get("role") == "user" \
                and text_hash(Message.from_entry(said[-1]).text) == asked:
            log.append_message(Message.assistant(partial, aborted=True))
    finally:
        lease.release()
