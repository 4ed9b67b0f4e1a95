"""What several ``clawd serve`` workers on one database share (docs/hosting.md): one queue of turns
per session (``gateway_turns``, in arrival order: whichever worker a message reaches, the
worker holding the session's lease runs it, after the turns that came before it; a retried
send with the same idempotency key never runs twice), every turn's event lines (so
``GET /api/turns/{id}/events`` follows a turn from any worker, ``Last-Event-ID`` included),
aborts (asked for on any worker, heard by the one running the turn through
``LISTEN``/``NOTIFY``, as new turns are heard by the session's holder). The failed sign-ins
per client address are in ``storage.postgres.auth``.

A turn is ``queued`` until the holder of its session claims it (``claim``: the oldest
queued turn of the session; ``running``, its worker now the claimer's, its text no longer
kept), then ``done``. Queued turns belong to nobody: any worker that holds the session runs
them, so a worker that received a message and died leaves it to the next holder. Running
turns belong to their worker while it is connected.

A worker writes its turns' lines through a writer thread in small batches (what came within
``GATHER_SECONDS`` of a line, one pipelined transaction each), so the event loop never waits
on the database; a follower on another worker reads the lines after its last when told of
new ones. A turn's deltas go when it ends (its ``reply`` holds the text), as in-process.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from psycopg.types.json import Jsonb

from clawd.core.errors import StoreUnavailable
from clawd.storage.postgres import answers, orphans
from clawd.storage.postgres.orphans import text_hash

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

log = logging.getLogger(__name__)
ALIVE = "worker IN (SELECT application_name FROM pg_stat_activity)"  # its worker connected
# a turn not ended: queued, or running on a worker still connected (not a dead worker's)
UNFINISHED = f"(state = 'queued' OR (state = 'running' AND {ALIVE}))"
WAITING = f"SELECT count(*) FROM gateway_turns WHERE agent_id = %s AND key = %s AND {UNFINISHED}"
BATCH = 200  # lines written in one statement at most
GATHER_SECONDS = 0.005  # the writer waits this long after a line for the lines behind it
ABORTS = "clawd_abort"  # the channel aborts are asked for on
TURNS = "clawd_turn"  # "a turn was queued for this session": agent\nkey
RELEASES = "clawd_release"  # "let go of this session if you hold it idle": agent\nkey
LINES = "clawd_lines"  # "lines of this turn were written": turn id (followers wake)
KEEP_TURNS_SECONDS = 24 * 3600  # a turn's record is kept this long
SWEEP_SECONDS = 60.0  # a worker removes older turns' records at most this often
# a claimed turn: id, text, ephemeral, asks, seconds it waited, the job's run it is (or None)
Claimed = tuple[str, str, bool, bool, float, "dict[str, Any] | None"]


class PgShared:
    """The shared turns and event lines of one database's workers."""

    def __init__(self, db: Connections, stopped: Callable[[str], list[dict[str, Any]]],
                 worker: str | None = None):
        """``stopped(key)``: the lines that end a turn whose worker died (the front end's
        own error and ``done`` lines, so a follower reads them as any other)."""
        self.db, self.stopped, self.worker = db, stopped, worker or db.worker
        self._lines: queue.Queue[tuple[str, int, dict[str, Any]] | tuple[str, None, str]] = \
            queue.Queue()
        self._writer = threading.Thread(target=self._write, daemon=True,
                                        name="clawd-shared-writer")
        self._writer.start()
        self.listening = threading.Event()  # the abort listener is connected
        self.closed = threading.Event()
        self._started: set[str] = set()  # the writer's: turns marked running; last sweep
        self._swept = 0.0

    def close(self) -> None:
        """Stop listening; the writer ends once the lines handed in are written."""
        self.closed.set()
        self._lines.put(("", None, "stop"))

    # --- turns ------------------------------------------------------------------------------

    def begin(self, turn_id: str, agent_id: str, key: str, text: str,
              idempotency: str | None, ephemeral: bool = False, asks: bool = False,
              job: dict[str, Any] | None = None) -> tuple[tuple[str, bool] | None, int]:
        """Queue a new turn behind the session's others (``asks``: its sender answers its
        tools' questions wherever it runs; ``job``: a job's run) in one round trip: (None,
        the session's turns not ended, this one too). With an idempotency key some worker
        used for this session: (that turn's id, whether its text was the same), nothing
        recorded; unless that turn ended never run (its send failed), which this replaces."""
        with self.db.connection() as conn:
            with conn.pipeline():  # one implicit transaction: the count sees the turn
                if idempotency is not None:
                    conn.execute("DELETE FROM gateway_turns WHERE agent_id = %s AND key = %s "
                                 "AND idempotency = %s AND state = 'done' AND started IS NULL",
                                 (agent_id, key, idempotency))
                made = conn.execute(  # and the session's holder told, in one statement
                    "WITH made AS (INSERT INTO gateway_turns (turn_id, agent_id, key, "
                    "idempotency, text_hash, worker, state, text, ephemeral, asks, job) VALUES "
                    "(%s, %s, %s, %s, %s, %s, 'queued', %s, %s, %s, %s) ON CONFLICT DO NOTHING "
                    "RETURNING turn_id) SELECT turn_id, pg_notify(%s, %s) FROM made",
                    (turn_id, agent_id, key, idempotency, text_hash(text), self.worker, text,
                     ephemeral, asks, None if job is None else Jsonb(job), TURNS,
                     f"{agent_id}\n{key}"))
                waiting = conn.execute(WAITING, (agent_id, key))
            if made.fetchone() or idempotency is None:
                return None, int(waiting.fetchone()[0])
            row = conn.execute("SELECT turn_id, text_hash FROM gateway_turns WHERE "
                               "agent_id = %s AND key = %s AND idempotency = %s",
                               (agent_id, key, idempotency)).fetchone()
        if row is None:  # the other turn was just removed: try once more
            return self.begin(turn_id, agent_id, key, text, None, ephemeral, asks, job)
        return (str(row[0]), row[1] == text_hash(text)), 0

    def claim(self, agent_id: str, key: str) -> Claimed | None:
        """The session's oldest queued turn, now running on this worker (``Claimed``);
        None when none waits. Only the session's holder claims."""
        with self.db.connection() as conn:
            row = conn.execute(
                "WITH next AS (SELECT turn_id, text FROM gateway_turns WHERE agent_id = %s "
                "AND key = %s AND state = 'queued' ORDER BY seq LIMIT 1 FOR UPDATE SKIP "
                "LOCKED) UPDATE gateway_turns t SET state = 'running', worker = %s, text = "
                "NULL, started = now() FROM next WHERE t.turn_id = next.turn_id RETURNING "
                "t.turn_id, next.text, t.ephemeral, t.asks, "
                "extract(epoch FROM now() - t.created), t.job", (agent_id, key, self.worker)
            ).fetchone()
        return ((str(row[0]), str(row[1] or ""), bool(row[2]), bool(row[3]), float(row[4]),
                 row[5]) if row else None)

    def taken_elsewhere(self, turn_ids: list[str]) -> list[str]:
        """Those of ``turn_ids`` (this worker's) another worker claimed, or ended unrun."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT turn_id FROM gateway_turns WHERE turn_id = ANY(%s) "
                                "AND state <> 'queued' AND (worker <> %s OR state = 'done')",
                                (turn_ids, self.worker)).fetchall()
        return [str(row[0]) for row in rows]

    def queued(self, agent_id: str, key: str) -> bool:
        """Whether a turn of the session waits to be claimed."""
        with self.db.connection() as conn:
            return conn.execute("SELECT 1 FROM gateway_turns WHERE agent_id = %s AND key = %s "
                                "AND state = 'queued' LIMIT 1", (agent_id, key)).fetchone() \
                is not None

    def waiting_sessions(self, older: float) -> list[tuple[str, str]]:
        """The sessions with a turn queued for more than ``older`` seconds (their holder
        may have let go or died: a worker that can take the session runs them)."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT DISTINCT agent_id, key FROM gateway_turns WHERE "
                                "state = 'queued' AND created < now() - make_interval("
                                "secs => %s)", (older,)).fetchall()
        return [(str(a), str(k)) for a, k in rows]

    def expire(self, older: float, lines: Callable[[str], list[dict[str, Any]]]) -> int:
        """End the turns queued for more than ``older`` seconds (nobody took their session),
        each with the lines ``lines(key)`` gives; how many."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute("UPDATE gateway_turns SET state = 'done', text = NULL WHERE "
                                "state = 'queued' AND created < now() - make_interval(secs "
                                "=> %s) RETURNING turn_id, key", (older,)).fetchall()
            _end(conn, rows, lines)
        return len(rows)

    def refuse_unserved(self, agent_id: str, key: str, older: float,
                        lines: Callable[[str], list[dict[str, Any]]]) -> int:
        """End the session's queued turns, with ``lines(key)``, when the oldest has waited
        ``older`` seconds while no worker ran a turn of it: whoever holds the session does
        not run its queue (a chat in a terminal), as one process's turn would give up."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                "UPDATE gateway_turns SET state = 'done', text = NULL WHERE agent_id = %s AND "
                "key = %s AND state = 'queued' AND NOT EXISTS (SELECT 1 FROM gateway_turns "
                f"WHERE agent_id = %s AND key = %s AND state = 'running' AND {ALIVE}) AND "
                "(SELECT min(created) FROM gateway_turns WHERE agent_id = %s AND key = %s AND "
                "state = 'queued') < now() - make_interval(secs => %s) RETURNING turn_id, key",
                (agent_id, key) * 3 + (older,)).fetchall()
            _end(conn, rows, lines)
        return len(rows)

    def waiting(self, agent_id: str, key: str) -> int:
        """The session's turns not ended yet, on every living worker (the running one
        included; a dead worker's turns wait for nobody)."""
        with self.db.connection() as conn:
            return int(conn.execute(WAITING, (agent_id, key)).fetchone()[0])

    def busy(self, agent_id: str, keys: list[str]) -> dict[str, dict[str, Any]]:
        """Each session's running turn (its id, or None) and how many turns wait behind
        it, on every living worker."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT key, max(turn_id) FILTER (WHERE state = 'running'), count(*) FILTER "
                "(WHERE state = 'queued') FROM gateway_turns WHERE agent_id = %s AND key = "
                f"ANY(%s) AND {UNFINISHED} GROUP BY key", (agent_id, keys)).fetchall()
        found = {key: {"running": running, "queued": int(queued)}
                 for key, running, queued in rows}
        return {key: found.get(key, {"running": None, "queued": 0}) for key in keys}

    def drop(self, turn_id: str) -> bool:
        """Forget a turn refused as it was queued; False if a worker claimed it already."""
        with self.db.connection() as conn:
            return conn.execute("DELETE FROM gateway_turns WHERE turn_id = %s AND state = "
                                "'queued' RETURNING 1", (turn_id,)).fetchone() is not None

    def unsend(self, turn_ids: list[str], lines: Callable[[str], list[dict[str, Any]]]
               ) -> None:
        """End those of ``turn_ids`` still queued with ``lines(key)``, never run."""
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute("UPDATE gateway_turns SET state = 'done', text = NULL WHERE "
                                "turn_id = ANY(%s) AND state = 'queued' RETURNING turn_id, "
                                "key", (turn_ids,)).fetchall()
            _end(conn, rows, lines)

    def withdraw(self, turn_id: str) -> bool:
        """Take a queued turn out of its session's queue (its lines, written next, say
        why); False if a worker claimed it already."""
        with self.db.connection() as conn:
            return conn.execute("UPDATE gateway_turns SET state = 'running', text = NULL "
                                "WHERE turn_id = %s AND state = 'queued' RETURNING 1",
                                (turn_id,)).fetchone() is not None

    def turn(self, turn_id: str) -> dict[str, Any] | None:
        """A turn any worker recorded: its agent, session key and state."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT agent_id, key, state, worker FROM gateway_turns WHERE "
                               "turn_id = %s", (turn_id,)).fetchone()
        return (dict(zip(("agent", "key", "state", "worker"), row)) if row else None)

    # --- aborts -----------------------------------------------------------------------------

    def request_abort(self, agent_id: str, key: str) -> str | None:
        """Ask whichever worker runs the session's turn to stop it (the running one, not
        one waiting behind it); the turn's id, or None when no worker runs one."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT turn_id FROM gateway_turns WHERE agent_id = %s AND "
                               f"key = %s AND state = 'running' AND {ALIVE} ORDER BY seq "
                               "DESC LIMIT 1", (agent_id, key)).fetchone()
            if row is not None:
                conn.execute("SELECT pg_notify(%s, %s)", (ABORTS, row[0]))
        return str(row[0]) if row else None

    def listen(self, on_abort: Callable[[str], None],
               on_release: Callable[[str, str], None] | None = None,
               on_turn: Callable[[str, str], None] | None = None,
               on_lines: Callable[[str], None] | None = None,
               on_answer: Callable[[str, int, dict[str, Any]], None] | None = None) -> None:
        """Call ``on_abort(turn_id)`` (on a thread of its own) for each abort any worker
        asks for, ``on_release(agent_id, key)`` for each session another process waits
        for, ``on_turn(agent_id, key)`` for each turn queued, ``on_lines(turn_id)`` for
        each batch of a turn's lines written and ``on_answer(turn_id, number, answer)`` for
        each answer to a question (``answers``); a lost connection is made again."""

        def run() -> None:
            import psycopg

            lost = False
            while not self.closed.is_set():
                try:
                    with psycopg.connect(self.db.url, autocommit=True, connect_timeout=3,
                                         application_name=self.db.worker) as conn:
                        conn.execute(f"LISTEN {ABORTS}")
                        conn.execute(f"LISTEN {RELEASES}")
                        conn.execute(f"LISTEN {TURNS}")
                        if on_lines is not None:
                            conn.execute(f"LISTEN {LINES}")
                        if on_answer is not None:
                            conn.execute(f"LISTEN {answers.ANSWERS}")
                        if lost:
                            log.warning("hearing other workers again")
                        lost = False
                        self.listening.set()
                        while not self.closed.is_set():
                            for note in conn.notifies(timeout=0.5):
                                if note.channel == ABORTS:
                                    on_abort(note.payload)
                                    continue
                                if note.channel == LINES:
                                    if on_lines is not None:
                                        on_lines(note.payload)
                                    continue
                                if note.channel == answers.ANSWERS:
                                    if on_answer is not None:
                                        answers.hear(note.payload, on_answer)
                                    continue
                                hear = on_release if note.channel == RELEASES else on_turn
                                if hear is not None and "\n" in note.payload:
                                    hear(*note.payload.split("\n", 1))
                except Exception as exc:  # noqa: BLE001 - listen again after a pause
                    if self.listening.is_set():  # once an outage, not once a second
                        log.warning("not hearing other workers (%s); trying each second",
                                    " ".join(str(exc).split()))
                        lost = True
                    self.listening.clear()
                    self.closed.wait(1.0)

        threading.Thread(target=run, daemon=True, name="clawd-aborts").start()

    def publish(self, turn_id: str, seq: int, line: dict[str, Any]) -> None:
        """Keep one event line of a turn (written by the writer thread, in order)."""
        self._lines.put((turn_id, seq, line))

    def finish(self, turn_id: str) -> None:
        """The turn ended (after its last line is written)."""
        self._lines.put((turn_id, None, "done"))

    def events_after(self, turn_id: str, after: int) -> tuple[list[tuple[int, Any]], bool]:
        """The lines numbered above ``after``, and whether the turn has ended (a turn whose
        worker is gone, killed say, is ended here with a line that says so)."""
        with self.db.connection() as conn:
            # one snapshot: the last lines commit with ``done``, read in the same statement
            found = conn.execute("SELECT t.state, t.worker, t.key, t.agent_id, t.text_hash, "
                                 "e.seq, e.line FROM (SELECT 1) one LEFT JOIN gateway_turns t "
                                 "ON t.turn_id = %(id)s LEFT JOIN turn_events e ON e.turn_id "
                                 "= %(id)s AND e.seq > %(after)s ORDER BY e.seq",
                                 {"id": turn_id, "after": after}).fetchall()
            state = tuple(found[0][:5]) if found[0][0] is not None else ()
            rows = [(int(seq), line) for *_, seq, line in found if seq is not None]
            orphaned = bool(not rows and state and state[0] == "running" and not conn.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name=%s", state[1:2]).fetchone())
            if orphaned:
                partial = orphans.end(conn, turn_id, self.stopped(state[2]))
        if orphaned:
            orphans.keep_partial(self.db, state[3], state[2], state[4], partial)
            return self.events_after(turn_id, after)
        return rows, not state or state[0] == "done"

    def wait_written(self, timeout: float = 5.0) -> None:
        """Wait until every line handed in so far is written (tests, shutdown)."""
        done = threading.Event()
        self._lines.put(("", None, done))  # type: ignore[arg-type]
        done.wait(timeout)

    def _write(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._lines.get()]
            if batch[0][1] is not None:  # a line: the turn's next lines are a moment away
                time.sleep(GATHER_SECONDS)
            while len(batch) < BATCH:
                try:
                    batch.append(self._lines.get_nowait())
                except queue.Empty:
                    break
            stopping = any(s is None and what == "stop" for _, s, what in batch)
            for attempt in itertools.count():
                try:
                    self._flush(batch)
                    break
                except StoreUnavailable as exc:  # kept, and written once the server is back
                    if attempt == 0:
                        log.warning("turn lines wait for the database: %s", exc)
                    if stopping or self.closed.wait(min(5.0, 0.5 * (attempt + 1))):
                        break
                except Exception as exc:  # noqa: BLE001 - a lost line must not stop the writer
                    log.warning("shared turn lines not written: %s", exc)
                    break

    def _flush(self, batch: list[Any]) -> None:
        """One pipelined transaction: the lines, the turns they start (marked once), the
        followers woken, the turns ended, old turns removed (every ``SWEEP_SECONDS``)."""
        lines = [(t, s, orjson.dumps(line).decode()) for t, s, line in batch if s is not None]
        ended = [t for t, s, what in batch if s is None and what == "done"]
        running = list({t for t, _, _ in lines})
        starting = [t for t in running if t not in self._started]
        sweep = ended and time.monotonic() - self._swept >= SWEEP_SECONDS
        with self.db.connection() as conn, conn.pipeline(), conn.transaction():
            if lines:  # one statement, however many lines
                turns, seqs, texts = zip(*lines, strict=True)
                conn.execute("INSERT INTO turn_events (turn_id, seq, line) SELECT * FROM "
                             "unnest(%s::text[], %s::int[], %s::text[]::json[]) "
                             "ON CONFLICT DO NOTHING", (list(turns), list(seqs), list(texts)))
            if starting:
                conn.execute("UPDATE gateway_turns SET state = 'running', started = now() "
                             "WHERE turn_id = ANY(%s) AND state = 'queued'", (starting,))
            # delivered at commit: a follower on another worker reads them at once
            conn.execute("SELECT pg_notify(%s, t) FROM unnest(%s::text[]) t",
                         (LINES, list({*running, *ended})))
            if ended:
                conn.execute("DELETE FROM turn_events WHERE turn_id = ANY(%s) AND "
                             "line->>'type' = 'delta'", (ended,))
                conn.execute("UPDATE gateway_turns SET state = 'done', ended = now() WHERE "
                             "turn_id = ANY(%s)", (ended,))
            if sweep:
                conn.execute("DELETE FROM gateway_turns WHERE created < now() - "
                             "make_interval(secs => %s)", (KEEP_TURNS_SECONDS,))
        self._started = (self._started | set(starting)) - set(ended)
        self._swept = time.monotonic() if sweep else self._swept
        for _, s, what in batch:
            if s is None and isinstance(what, threading.Event):
                what.set()


def _end(conn: Any, turns: list[tuple[str, str]],
         lines: Callable[[str], list[dict[str, Any]]]) -> None:
    """Write the lines that end each of ``turns`` (turn id, session key), never run."""
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO turn_events (turn_id, seq, line) VALUES (%s, %s, %s::json) "
                        "ON CONFLICT DO NOTHING",
                        [(turn_id, n, orjson.dumps(line).decode()) for turn_id, key in turns
                         for n, line in enumerate(lines(key))])
