"""One agent's storage in PostgreSQL (``PgStorage``) and its session lease (``PgLease``).

The lease is a session-level advisory lock on the (agent, key) number, taken on the
process's one lease connection (``Database.lease_connection``; every session this process
holds is a lock on it, so a thousand held sessions cost one connection): the server lets go
of them the moment that connection ends, so a holder that exits or is killed never blocks
anyone, across processes and hosts. Who holds a session (and, when it says, until when) is written
in ``leases`` for a waiter's message, as the file lock writes it in its file. Within one
process a key held again is counted, as with the file lock. A waiter first asks, on the
``clawd_release`` channel, that whoever holds the session idle let it go: a gateway worker
does at once (``storage.postgres.shared``), a chat in a terminal does not.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import Jsonb

from clawd.core.errors import StoreUnavailable
from clawd.core.messages import now_iso
from clawd.core.metrics import METRICS
from clawd.core.paths import state_dir
from clawd.sessions import lock
from clawd.sessions.lock import CHAT_HINT, busy_error
from clawd.storage.postgres import fencing
from clawd.storage.postgres.errors import unreachable
from clawd.storage.postgres.files import PgBackups, PgFiles
from clawd.storage.postgres.memory import PgIndexStore
from clawd.storage.postgres.memory_sources import PgMemorySources
from clawd.storage.postgres.sessions import PgSessions, PgTranscript, key_lock
from clawd.storage.postgres.shared import RELEASES, UNFINISHED
from clawd.storage.session_ids import checked_id

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

_held: dict[tuple[int, str, str], int] = {}  # sessions this process holds, and how often
_acquiring: set[tuple[int, str, str]] = set()  # being waited for by a thread of ours
ASK_EVERY_SECONDS = 0.5  # how often a waiter asks again
_changed = threading.Condition(threading.RLock())


class PgLease:
    """A hold on one session key: an advisory lock on the process's lease connection."""

    def __init__(self, db: Connections, agent_id: str, key: str, wait: float | None, hint: str):
        self.db, self.agent_id, self.key = db, agent_id, key
        self._slot = (id(db), agent_id, key)  # one process, one Database per URL
        self._released = False
        with _changed:
            while self._slot in _acquiring:  # another thread of ours is getting it
                _changed.wait()
            if self._slot in _held:  # held by this process already: counted
                _held[self._slot] += 1
                return
            _acquiring.add(self._slot)
        started, taken = time.monotonic(), False
        try:  # waited for without the process's guard: other sessions open meanwhile
            self._acquire(wait, hint)
            taken = True
            with _changed:
                _held[self._slot] = 1
        finally:
            METRICS.lease(time.monotonic() - started, taken)
            with _changed:
                _acquiring.discard(self._slot)
                _changed.notify_all()
        if _held.get(self._slot) == 1:  # taken now, not counted again: a new epoch
            fencing.taken(self.db, agent_id, key, self._take())

    def _acquire(self, wait: float | None, hint: str) -> None:
        number = key_lock(self.agent_id, self.key, "lease")
        started = time.monotonic()
        deadline = started + (lock.WAIT_SECONDS if wait is None else wait)
        asked = 0.0
        while not _one(self.db.lease_connection(), "SELECT pg_try_advisory_lock(%s)",
                       (number,)):
            with self.db.connection() as conn:
                if wait != 0 and time.monotonic() - asked >= ASK_EVERY_SECONDS:
                    # a gateway worker holding it idle lets go when asked (its turn done)
                    conn.execute("SELECT pg_notify(%s, %s)",
                                 (RELEASES, f"{self.agent_id}\n{self.key}"))
                    asked = time.monotonic()
                holder = conn.execute("SELECT holder, pid, until FROM leases WHERE "
                                      "agent_id = %s AND key = %s",
                                      (self.agent_id, self.key)).fetchone()
                runs = _turn_runs(conn, self.agent_id, self.key, self.db.worker)
            # a long wait is for another worker's turn to end, not for a chat elsewhere
            patient = time.monotonic() - started < lock.WAIT_SECONDS or runs
            who, pid, until = holder or ("", None, None)
            # while a turn runs, no time to let go is known (``describe``)
            left = until - time.time() if until is not None and not runs else None
            # an idle worker asked to let go does so at once: give it a moment to answer
            answered = time.monotonic() - started >= ASK_EVERY_SECONDS
            if wait == 0:  # a try: nobody is asked to let go (a gateway worker's take)
                raise busy_error(self.key, str(pid or ""), who, left, hint)
            if time.monotonic() >= deadline or not patient or (
                    answered and left is not None and time.monotonic() + left > deadline):
                raise busy_error(self.key, str(pid or ""), who, left, hint)
            time.sleep(lock.POLL_SECONDS)

    @property
    def lost(self) -> bool:
        return fencing.lost(self.db, self.agent_id, self.key)

    def describe(self, until: float | None) -> None:
        """Write when this process lets go of the session if no other turn comes; a turn
        starting (``until`` None) writes nothing: its row in ``gateway_turns`` tells a
        waiter that a turn runs (``_acquire``), so a turn costs one write here, not two."""
        if until is None:
            return
        with _changed:
            held = self._slot in _held and not self._released
        epoch = fencing.lease_epoch(self.db, self.agent_id, self.key)
        if held and epoch is not None:
            with self.db.connection() as conn:
                conn.execute("UPDATE leases SET until = %s WHERE agent_id = %s AND key = %s "
                             "AND epoch = %s", (until, self.agent_id, self.key, epoch))

    def release(self) -> None:
        with _changed:
            if self._released or self._slot not in _held:
                return
            self._released = True
            _held[self._slot] -= 1
            if _held[self._slot] > 0:
                return
            del _held[self._slot]
            epoch = fencing.lease_epoch(self.db, self.agent_id, self.key)
            fencing.let_go(self.db, self.agent_id, self.key)
            try:
                with self.db.connection() as conn:  # not the row of whoever took it since
                    conn.execute("DELETE FROM leases WHERE agent_id = %s AND key = %s AND "
                                 "epoch = %s", (self.agent_id, self.key, epoch))
                self.db.lease_connection().execute(
                    "SELECT pg_advisory_unlock(%s)", (key_lock(self.agent_id, self.key,
                                                              "lease"),))
            except (psycopg.Error, StoreUnavailable):
                pass  # the connection is gone, and the server let go of the lock with it

    def _take(self) -> int:
        """Say who holds the session now, under a new epoch (``fencing``): the epoch."""
        with self.db.connection() as conn:
            return int(_one(conn, "INSERT INTO leases (agent_id, key, holder, pid, until, "
                            "epoch) VALUES (%s, %s, %s, %s, NULL, 1) ON CONFLICT (agent_id, "
                            "key) DO UPDATE SET holder = EXCLUDED.holder, pid = EXCLUDED.pid, "
                            "until = NULL, epoch = leases.epoch + 1 RETURNING epoch",
                            (self.agent_id, self.key, lock.HOLDER, os.getpid())))


def _turn_runs(conn: Any, agent_id: str, key: str, worker: str) -> bool:
    """Whether another living gateway worker runs (or is about to run) a turn of the
    session."""
    return bool(_one(conn, "SELECT EXISTS (SELECT 1 FROM gateway_turns WHERE agent_id = %s "
                     f"AND key = %s AND worker <> %s AND {UNFINISHED})",
                     (agent_id, key, worker)))


def _one(conn: Any, sql: str, params: tuple[Any, ...]) -> Any:
    try:
        row = conn.execute(sql, params).fetchone()
    except Exception as exc:
        if not unreachable(exc):
            raise
        raise StoreUnavailable(f"the database does not answer ({exc}); try again in a "
                               f"moment") from None
    return row[0] if row else None


class PgRecords:
    """``KeyValue`` as ``records`` rows."""

    def __init__(self, db: Connections, agent_id: str):
        self.db, self.agent_id = db, agent_id

    def get(self, name: str) -> dict[str, Any] | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT value FROM records WHERE agent_id = %s AND name = %s",
                               (self.agent_id, name)).fetchone()
        return row[0] if row and isinstance(row[0], dict) else None

    def items(self) -> dict[str, dict[str, Any]]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT name, value FROM records WHERE agent_id = %s",
                                (self.agent_id,)).fetchall()
        return {name: value for name, value in rows}

    def claim(self, name: str, token: str) -> bool:
        """One statement: set ``{claim: token}`` unless it is already that; whichever
        worker's statement sets it gets the row back."""
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO records (agent_id, name, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (agent_id, name) DO UPDATE SET value = EXCLUDED.value "
                "WHERE records.value->>'claim' IS DISTINCT FROM EXCLUDED.value->>'claim' "
                "RETURNING 1", (self.agent_id, name, Jsonb({"claim": token}))).fetchone()
        return row is not None

    def put(self, name: str, value: dict[str, Any]) -> None:
        with self.db.connection() as conn:
            conn.execute("INSERT INTO records (agent_id, name, value) VALUES (%s, %s, %s) "
                         "ON CONFLICT (agent_id, name) DO UPDATE SET value = EXCLUDED.value",
                         (self.agent_id, name, Jsonb(value)))


class PgStorage:
    """One agent's sessions, transcripts, workspace files and records in one database."""

    kind = "postgresql"

    def __init__(self, db: Connections, agent_id: str, now: Callable[[], str] = now_iso):
        self.db, self.agent_id = db, agent_id
        self.location = f"{db.location} (agent {agent_id})"
        self.sessions = PgSessions(db, agent_id, now, self.transcript, self.session_ids,
                                   self.session_file)
        self.files = PgFiles(db, agent_id)
        self.backups = PgBackups(db, agent_id, self.files)
        self.records = PgRecords(db, agent_id)
        self.memory_sources = PgMemorySources(db, agent_id, self.files, self.transcript)
        self.memory_index = partial(PgIndexStore, db, agent_id)  # rows of the database
        self.index_home = state_dir()

    def transcript(self, session_id: str, key: str | None = None) -> PgTranscript:
        return PgTranscript(self.db, self.agent_id, checked_id(session_id), key)

    def session_file(self, session_id: str) -> str:
        return f"{checked_id(session_id)}.jsonl"  # its name in an exported folder

    def session_ids(self) -> list[str]:
        return self._ids(deleted=False)

    def deleted_ids(self) -> list[str]:
        """The sessions deleted (their transcripts kept apart), sorted."""
        return self._ids(deleted=True)

    def _ids(self, *, deleted: bool) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT session_id FROM session_logs WHERE agent_id = %s AND "
                                "(deleted_at IS NOT NULL) = %s ORDER BY session_id",
                                (self.agent_id, deleted)).fetchall()
        return [row[0] for row in rows]

    def set_aside(self, session_id: str, *, purge: bool = False) -> str:
        with self.db.connection() as conn, conn.transaction():
            if purge:
                conn.execute("DELETE FROM transcript_lines WHERE agent_id = %s AND "
                             "session_id = %s", (self.agent_id, session_id))
                conn.execute("DELETE FROM session_logs WHERE agent_id = %s AND "
                             "session_id = %s", (self.agent_id, session_id))
                return f"deleted session {session_id} and its transcript"
            conn.execute("UPDATE session_logs SET deleted_at = now() WHERE agent_id = %s AND "
                         "session_id = %s", (self.agent_id, session_id))
        return (f"deleted session {session_id}; its transcript is kept in the database "
                f"(deleted, out of every listing)")

    def hold(self, key: str, wait: float | None = None, hint: str = CHAT_HINT) -> PgLease:
        return PgLease(self.db, self.agent_id, key, wait, hint)

    def workspace_exists(self) -> bool:
        return True  # rows: there is nothing to create first

    def check(self, access: str) -> Iterator[tuple[bool, str, str]]:
        """The database: reached, its schema, pgvector, a record written and read back."""
        db = self.db
        yield True, "storage", (f"{db.location}: schema version {db.schema_version}, vector "
                                f"{db.vector_version}")
        try:
            self.records.put("doctor", {"checkedAt": time.time()})
            ok = self.records.get("doctor") is not None
            yield ok, "workspace", (f"{self.files.location} can be written" + (
                "" if access == "rw" else f" (workspaceAccess {access!r}: clawd will not "
                "write it)") if ok else "a record written to the database did not read back")
        except Exception as exc:  # noqa: BLE001 - the doctor says what failed, in one line
            yield False, "workspace", f"{self.location}: {str(exc).splitlines()[0]}"
