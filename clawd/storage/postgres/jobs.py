"""``JobStore`` as rows: ``jobs`` (a job's JSON, its ``next_run`` and ``enabled`` beside it
for the due query) and ``job_runs`` (keyed by job and ``scheduled_for``: the primary key is
what makes an occurrence run once).

``claim_due`` takes the due jobs ``FOR UPDATE SKIP LOCKED`` in one transaction, records
their runs (``ON CONFLICT DO NOTHING``: a run already there is not claimed again) and moves
each job's ``next_run`` on; another worker skips the rows meanwhile and finds them not due
after. ``claim_deliveries`` takes runs whose delivery is due the same way.

Saving a run deletes, in the same transaction, the job's rows past the newest
``automation.keepRuns`` that are not ``automation.runs.needed`` (against the committed
``nextRun``: one a claim moves on meanwhile only keeps more).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from clawd.automation import runs as runlog
from clawd.automation.jobs import find
from clawd.automation.runs import Claimed
from clawd.core.errors import ClawdError
from clawd.storage.jobs import Change


class PgJobs:
    def __init__(self, db: Any, keep: int = runlog.KEEP_RUNS):
        self.db = db
        self.location = f"{db.location} (jobs)"
        self.keep = keep  # runs kept per job besides those still needed

    def add(self, job: dict[str, Any]) -> dict[str, Any]:
        with self.db.connection() as conn:
            made = conn.execute(
                "INSERT INTO jobs (id, agent_id, job, next_run, enabled) VALUES "
                "(%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                (job["id"], job["agentId"], Jsonb(job), job.get("nextRun"),
                 bool(job.get("enabled")))).fetchone()
        if not made:
            raise ClawdError(f"there is a job {job['id']} already")
        return job

    def all(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT job FROM jobs WHERE %(a)s::text IS NULL OR lower(agent_id) = %(a)s "
                "ORDER BY created, id",
                {"a": agent_id.lower() if agent_id else None}).fetchall()
        return [row[0] for row in rows]

    def get(self, wanted: str) -> dict[str, Any]:
        return find(self.all(), wanted)

    def update(self, job_id: str, change: Change) -> dict[str, Any]:
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute("SELECT job FROM jobs WHERE id = %s FOR UPDATE",
                               (job_id,)).fetchone()
            if row is None:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            job = change(row[0])
            _store(conn, job)
        return job

    def remove(self, job_id: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            row = conn.execute("DELETE FROM jobs WHERE id = %s RETURNING job",
                               (job_id,)).fetchone()
        if row is None:
            raise ClawdError(f"no job {job_id} (clawd jobs list)")
        return dict(row[0])

    def claim_due(self, now: datetime, agents: set[str] | None = None,
                  limit: int | None = None) -> list[Claimed]:
        claimed = []
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT job FROM jobs WHERE enabled AND next_run <= %s AND (%s::text[] IS NULL "
                "OR lower(agent_id) = ANY(%s::text[])) ORDER BY next_run LIMIT %s "
                "FOR UPDATE SKIP LOCKED",
                (now, _list(agents), _list(agents), limit)).fetchall()
            for (job,) in rows:
                taken = {r[0] for r in conn.execute(
                    "SELECT run->>'scheduledFor' FROM job_runs WHERE job_id = %s AND "
                    "scheduled_for >= %s", (job["id"], job["nextRun"])).fetchall()}
                run, missed, updated = runlog.claim(job, now, taken)
                if run is not None:
                    run["worker"] = self.db.worker
                for line in missed:
                    _insert(conn, line)
                if run is not None and _insert(conn, run):
                    claimed.append(Claimed(updated, run))
                _store(conn, updated)
        return claimed

    def claim_now(self, job_id: str, now: datetime) -> Claimed | None:
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute("SELECT job FROM jobs WHERE id = %s FOR UPDATE",
                               (job_id,)).fetchone()
            if row is None:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            run = runlog.new_run(row[0], now, now, manual=True)
            run["worker"] = self.db.worker
            return Claimed(row[0], run) if _insert(conn, run) else None

    def interrupted(self, now: datetime) -> list[dict[str, Any]]:
        """A ``running`` run whose worker has no connection to the database any more (every
        worker's connections carry its name, ``application_name``) is closed."""
        from clawd.storage.jobs import INTERRUPTED

        closed = []
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT run FROM job_runs WHERE run->>'status' = 'running' AND NOT EXISTS "
                "(SELECT 1 FROM pg_stat_activity WHERE application_name = run->>'worker') "
                "FOR UPDATE SKIP LOCKED").fetchall()
            for (run,) in rows:
                run = runlog.finished(run, "error", now, error=INTERRUPTED)
                conn.execute("UPDATE job_runs SET run = %s WHERE job_id = %s AND "
                             "scheduled_for = %s",
                             (Jsonb(run), run["jobId"], run["scheduledFor"]))
                closed.append(run)
        return closed

    def save_run(self, run: dict[str, Any]) -> None:
        with self.db.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO job_runs (job_id, scheduled_for, run) VALUES (%s, %s, %s) "
                         "ON CONFLICT (job_id, scheduled_for) DO UPDATE SET run = "
                         "EXCLUDED.run", (run["jobId"], run["scheduledFor"], Jsonb(run)))
            _compact(conn, run["jobId"], self.keep)

    def compact(self, job_id: str) -> int:
        """Cut ``job_id``'s history to what the bound keeps now; the runs dropped."""
        with self.db.connection() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM jobs WHERE id = %s", (job_id,)).fetchone() is None:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            return _compact(conn, job_id, self.keep)

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT run FROM job_runs WHERE job_id = %s ORDER BY "
                                "scheduled_for DESC LIMIT %s", (job_id, limit)).fetchall()
        return [row[0] for row in rows]

    def history(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of ``job_id``, oldest ``scheduledFor`` first."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT run FROM job_runs WHERE job_id = %s ORDER BY "
                                "scheduled_for", (job_id,)).fetchall()
        return [row[0] for row in rows]

    def restore(self, jobs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> int:
        """Add ``jobs`` (listed after those there, in this order) and ``runs`` (of these or
        of jobs there) in one transaction (``clawd storage migrate``); a job or a run there
        already is left as it is. How many runs were added."""
        added = 0
        with self.db.connection() as conn, conn.transaction():
            for order, job in enumerate(jobs):
                conn.execute(
                    "INSERT INTO jobs (id, agent_id, job, next_run, enabled, created) VALUES "
                    "(%s, %s, %s, %s, %s, now() + %s * interval '1 microsecond') "
                    "ON CONFLICT DO NOTHING",
                    (job["id"], job["agentId"], Jsonb(job), job.get("nextRun"),
                     bool(job.get("enabled")), order))
            for run in runs:
                added += _insert(conn, run)
        return added

    def claim_deliveries(self, now: datetime, agents: set[str] | None = None,
                         kinds: frozenset[str] | None = None) -> list[Claimed]:
        taken = []
        with self.db.connection() as conn, conn.transaction():
            rows = conn.execute(
                "SELECT j.job, r.run FROM job_runs r JOIN jobs j ON j.id = r.job_id WHERE "
                "r.run->'delivery'->>'status' IN ('pending', 'failed', 'sending') AND "
                "(%s::text[] IS NULL OR lower(j.agent_id) = ANY(%s::text[])) AND "
                "(%s::text[] IS NULL OR split_part(r.run->'delivery'->>'target', ':', 1) = "
                "ANY(%s::text[])) FOR UPDATE OF r SKIP LOCKED",
                (_list(agents), _list(agents), _list(kinds), _list(kinds))).fetchall()
            for job, run in rows:
                if runlog.deliverable(run, now):
                    run = runlog.sending(run, now)
                    conn.execute("UPDATE job_runs SET run = %s WHERE job_id = %s AND "
                                 "scheduled_for = %s",
                                 (Jsonb(run), run["jobId"], run["scheduledFor"]))
                    taken.append(Claimed(job, run))
        return taken


def _list(agents: set[str] | frozenset[str] | None) -> list[str] | None:
    return sorted(agents) if agents is not None else None


def _insert(conn: Any, run: dict[str, Any]) -> bool:
    """Record a new run; False when the occurrence is recorded already."""
    return conn.execute(
        "INSERT INTO job_runs (job_id, scheduled_for, run) VALUES (%s, %s, %s) "
        "ON CONFLICT DO NOTHING RETURNING 1",
        (run["jobId"], run["scheduledFor"], Jsonb(run))).fetchone() is not None


def _compact(conn: Any, job_id: str, keep: int) -> int:
    """Delete ``job_id``'s runs past the newest ``keep`` that are not still needed."""
    row = conn.execute("SELECT job FROM jobs WHERE id = %s", (job_id,)).fetchone()
    if row is None:
        return 0
    older = conn.execute("SELECT run FROM job_runs WHERE job_id = %s ORDER BY scheduled_for "
                         "DESC OFFSET %s", (job_id, keep)).fetchall()
    gone = [run["scheduledFor"] for (run,) in older if not runlog.needed(run, row[0])]
    if gone:
        conn.execute("DELETE FROM job_runs WHERE job_id = %s AND scheduled_for = "
                     "ANY(%s::timestamptz[])", (job_id, gone))
    return len(gone)


def _store(conn: Any, job: dict[str, Any]) -> None:
    conn.execute("UPDATE jobs SET job = %s, next_run = %s, enabled = %s WHERE id = %s",
                 (Jsonb(job), job.get("nextRun"), bool(job.get("enabled")), job["id"]))
