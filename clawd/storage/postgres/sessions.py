"""Sessions and transcripts in PostgreSQL: ``PgSessions`` (``SessionRecords``) and
``PgTranscript`` (``TranscriptLog``).

A session is one ``sessions`` row per (agent, key) whose ``entry`` is the ``sessions.json``
entry as JSONB, with the same fields and meanings. Every change runs in one transaction that
first takes a transaction-scoped advisory lock on the key (so even the first write of a new
key is serialised), reads the row (locking it), applies the change to what is stored and
writes it back: counters are increments against the stored value, as in the file store. A
turn's ``patch`` of a stored row is one fenced ``UPDATE`` that does the same in SQL, so it
waits for such a change under way and adds to what it wrote. A transcript is the
``transcript_lines`` rows of its session in ``seq`` order, each the JSONL line as written;
an append is one committed insert, so a line is whole or absent, never torn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import orjson
from psycopg.types.json import Jsonb

from clawd.core.messages import Message, new_id, now_iso
from clawd.sessions.entry import SessionEntry
from clawd.sessions.files import entries_from, summary_of
from clawd.sessions.interface import Loaded
from clawd.sessions.store import as_count, normalize_key, patched, recounted
from clawd.sessions.transcript import parse_lines
from clawd.storage.postgres import fencing

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections


# one counter added to, in SQL as ``as_count`` (name four times, then what is added)
COUNTER = (" || jsonb_build_object(%s::text, CASE WHEN jsonb_typeof(entry -> %s::text) = "
           "'number' AND entry ->> %s::text ~ '^-?[0-9]+$' THEN (entry ->> %s::text)::numeric "
           "ELSE 0 END + %s)")
# the list's order, as Python sorts text (index ``sessions_recent``)
RECENT, KEY = "(coalesce(entry->>'updatedAt', '') COLLATE \"C\")", "key COLLATE \"C\""


def page_query(agent_id: str, limit: int, after: tuple[str, str] | None
               ) -> tuple[str, tuple[Any, ...]]:
    """The statement (and its values) of one page of an agent's sessions."""
    where, args = "", [agent_id]
    if after is not None:
        where = f"AND ({RECENT}, {KEY}) < (%s, %s)"
        args += [after[0], after[1]]
    return (f"SELECT key, entry FROM sessions WHERE agent_id = %s {where} ORDER BY {RECENT} "
            f"DESC, {KEY} DESC LIMIT %s", (*args, max(limit, 0)))


def key_lock(agent_id: str, key: str, purpose: str) -> int:
    """A signed 64-bit advisory-lock number for one session key of one agent and one
    ``purpose`` (``entry``: a change of its row; ``lease``: the session held)."""
    import hashlib

    digest = hashlib.blake2b(f"{purpose}\n{agent_id}\n{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgSessions:
    """The session store of one agent: ``sessions`` rows."""

    def __init__(self, db: Connections, agent_id: str, now: Callable[[], str],
                 transcript: Callable[[str], PgTranscript],
                 session_ids: Callable[[], list[str]], session_file: Callable[[str], str]):
        """``transcript``, ``session_ids`` and ``session_file``: the agent's storage's own,
        which ``rebuild`` reads the transcripts through."""
        self.db, self.agent_id, self.now = db, agent_id, now
        self.location = f"{db.location} (sessions of agent {agent_id})"
        self._transcript, self._ids, self._file = transcript, session_ids, session_file

    def entries(self) -> dict[str, SessionEntry]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT key, entry FROM sessions WHERE agent_id = %s",
                                (self.agent_id,)).fetchall()
        return {key: cast(SessionEntry, entry) for key, entry in rows}

    def get(self, key: str) -> SessionEntry | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT entry FROM sessions WHERE agent_id = %s AND key = %s",
                               (self.agent_id, normalize_key(key))).fetchone()
        return cast(SessionEntry, row[0]) if row else None

    def count(self) -> int:
        with self.db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM sessions WHERE agent_id = %s",
                               (self.agent_id,)).fetchone()
        return int(row[0]) if row else 0

    def page(self, limit: int, after: tuple[str, str] | None = None
             ) -> list[tuple[str, SessionEntry]]:
        """One indexed walk (``sessions_recent``) that stops after ``limit`` rows."""
        with self.db.connection() as conn:
            rows = conn.execute(*page_query(self.agent_id, limit, after)).fetchall()
        return [(key, cast(SessionEntry, entry)) for key, entry in rows]

    def update(self, key: str, change: Callable[[SessionEntry | None], SessionEntry | None],
               *, touch: bool = True) -> SessionEntry | None:
        key = normalize_key(key)
        # pipelined: the lock, the fence and the read go out together, the write and the
        # commit together (two round trips, not six); the row locked as it is read, so a
        # ``patch`` made in one statement meanwhile waits for this write and adds to it
        with self.db.connection() as conn, conn.pipeline(), conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)",
                         (key_lock(self.agent_id, key, "entry"),))
            fencing.check(conn, self.db, self.agent_id, key)
            row = conn.execute("SELECT entry FROM sessions WHERE agent_id = %s AND key = %s "
                               "FOR UPDATE", (self.agent_id, key)).fetchone()
            entry = change(cast(SessionEntry, row[0]) if row else None)
            if entry is None:
                conn.execute("DELETE FROM sessions WHERE agent_id = %s AND key = %s",
                             (self.agent_id, key))
                return None
            if touch or not entry.get("updatedAt"):
                entry["updatedAt"] = self.now()
            conn.execute("INSERT INTO sessions (agent_id, key, entry) VALUES (%s, %s, %s) "
                         "ON CONFLICT (agent_id, key) DO UPDATE SET entry = EXCLUDED.entry",
                         (self.agent_id, key, Jsonb(entry)))
            return entry

    def patch(self, key: str, base: SessionEntry | None = None,
              add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
              touch: bool = True, **fields: Any) -> SessionEntry | None:
        if touch and not copy:  # a turn's: one statement on the stored row, if there is one
            done = self._patched_in_place(normalize_key(key), add or {}, fields)
            if done is not None:
                return done
        where = f"{self.location}: {key}"
        return self.update(key, lambda stored: patched(stored, base, add, copy, fields, where),
                           touch=touch)

    def _patched_in_place(self, key: str, add: dict[str, int], fields: dict[str, Any]
                          ) -> SessionEntry | None:
        """``patched`` (fields set, counters added, ``updatedAt`` now) as one fenced
        ``UPDATE`` of the stored row, which it locks; None when it changed nothing (no row,
        or the fence refused it): ``update`` then does it, and says why."""
        fields = dict(fields)
        counters, counted = "", []
        for name, delta in add.items():
            if name in fields:  # set and added to in one patch: known here
                fields[name] = as_count(fields[name]) + delta
            else:
                counters += COUNTER
                counted += [name, name, name, name, delta]
        fields["updatedAt"] = self.now()
        fence, held = fencing.condition(self.db, self.agent_id, key)
        with self.db.connection() as conn:
            row = conn.execute(
                f"UPDATE sessions SET entry = entry || %s::jsonb{counters} WHERE agent_id = %s "
                f"AND key = %s AND {fence} RETURNING entry",
                (Jsonb(fields), *counted, self.agent_id, key, *held)).fetchone()
        return cast(SessionEntry, row[0]) if row else None

    def rebuild(self) -> tuple[int, int]:
        """Recount every entry from its transcript and add the keys only transcripts know."""
        summaries = {i: summary_of(self._transcript(i)) for i in self._ids()}
        found = entries_from(summaries.values(), self.agent_id, self._file)
        data: dict[str, Any] = dict(self.entries())
        done = recounted(data, lambda e: summaries.get(str(e.get("sessionId"))), found)
        for key, entry in data.items():
            self.update(key, _replace(cast(SessionEntry, entry)), touch=False)
        return done


def _replace(entry: SessionEntry) -> Callable[[SessionEntry | None], SessionEntry]:
    return lambda _stored: entry


def _is_json(line: str) -> bool:
    try:
        orjson.loads(line)
    except ValueError:
        return False
    return True


class PgTranscript:
    """One session's ``transcript_lines`` rows."""

    def __init__(self, db: Connections, agent_id: str, session_id: str, key: str | None = None):
        """``key``: the session's, when it is written as that session (fenced)."""
        self.db, self.agent_id, self.session_id, self.key = db, agent_id, session_id, key
        self.location = f"{db.location} (transcript {session_id} of agent {agent_id})"
        self._known = False  # its session_logs row exists

    def append(self, entry: dict[str, Any]) -> None:
        entry.setdefault("id", new_id())
        entry.setdefault("timestamp", now_iso())
        self.append_lines([orjson.dumps(entry).decode()])

    def append_message(self, message: Message) -> None:
        self.append(message.to_entry())

    def append_lines(self, lines: list[str]) -> None:
        """Add JSONL lines as they are, in order, in one statement and one round trip,
        fenced in it (a line that is not JSON, as a migrated file may hold, is kept as text
        in ``torn``)."""
        kept = [(line, None) if _is_json(line) else (None, line) for line in lines]
        fence, held = fencing.condition(self.db, self.agent_id, self.key)
        with self.db.connection() as conn, conn.pipeline():  # one implicit transaction
            if not self._known:
                conn.execute("INSERT INTO session_logs (agent_id, session_id) VALUES (%s, %s) "
                             "ON CONFLICT DO NOTHING", (self.agent_id, self.session_id))
            written = conn.execute(
                "INSERT INTO transcript_lines (agent_id, session_id, line, torn) SELECT %s, "
                "%s, u.line::json, u.torn FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY "
                f"AS u(line, torn, n) WHERE {fence} ORDER BY u.n",
                (self.agent_id, self.session_id, [k[0] for k in kept], [k[1] for k in kept],
                 *held))
        if written.rowcount != len(kept):
            raise fencing.refused(self.db, self.agent_id, self.key)
        self._known = True

    def raw_text(self) -> str:
        """The transcript as a JSONL file holds it: every stored line and a newline."""
        return "".join(f"{line}\n" for line in self.raw_lines())

    def raw_lines(self) -> list[str]:
        """Every line as stored, in order (torn ones too)."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT coalesce(line::text, torn) FROM transcript_lines "
                                "WHERE agent_id = %s AND session_id = %s ORDER BY seq",
                                (self.agent_id, self.session_id)).fetchall()
        return [row[0] for row in rows]

    def load(self, *, quiet: bool = False) -> Loaded:
        # numbered as the lines of a JSONL file, whose last line ends with a newline
        return parse_lines(enumerate([*self.raw_lines(), ""], start=1), self.location,
                           quiet=quiet)
