"""What a store does with a job found due, and with a run when it ends: pure functions over
the stored shapes (``jobs``), so the files and PostgreSQL decide alike.

``claim`` turns a due job into the run to make now (or none), the missed runs to record and
the job with its next occurrence; the store writes all three at once (under its lock, in one
transaction), so an occurrence is claimed by one process only and never again. ``ended``
counts failures in a row: the third tells the owner, the tenth pauses the job. ``kept``
is how much of a job's history a store keeps: the newest ``automation.keepRuns`` runs and
every run still ``needed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clawd.automation import schedule as sched
from clawd.automation.jobs import FAILURES_PAUSED, FAILURES_TOLD, delivery, session_key_for
from clawd.automation.zones import iso_utc, parse_iso

MAX_ATTEMPTS = 5  # deliveries tried at most, a failed one again after RETRY_SECONDS × attempts
RETRY_SECONDS = 30
SENDING_SECONDS = 120  # a delivery being sent is another process's for this long
KEEP_RUNS = 500  # runs kept per job (``automation.keepRuns``), besides those still needed


@dataclass
class Claimed:
    """A run claimed for a job: the job as it was claimed and the run's record."""

    job: dict[str, Any]
    run: dict[str, Any]


def new_run(job: dict[str, Any], scheduled_for: datetime, now: datetime, *,
            status: str = "running", late: bool = False, missed_count: int = 0,
            manual: bool = False) -> dict[str, Any]:
    run: dict[str, Any] = {
        "jobId": job["id"], "scheduledFor": iso_utc(scheduled_for),
        "startedAt": iso_utc(now) if status == "running" else None, "finishedAt": None,
        "status": status, "sessionKey": session_key_for(job) if status == "running" else None,
        "reply": None, "error": None,
        "delivery": delivery((job.get("deliver") or "none") if status == "running" else "none")}
    if late:
        run["late"] = True
    if missed_count:
        run["missedCount"] = missed_count
    if manual:
        run["manual"] = True
    return run


def claim(job: dict[str, Any], now: datetime, taken: set[str]
          ) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, Any]]:
    """(the run to make, the missed runs to record, the job as it is to be stored) for a job
    whose ``nextRun`` is at or before ``now``. ``taken``: the ``scheduledFor`` of runs the
    store already has; such an occurrence is never claimed again."""
    schedule = sched.Schedule.from_json(job["schedule"])
    due = parse_iso(job["nextRun"])
    decided = sched.plan(schedule, due, now, job.get("missed") or "once")
    updated = {**job, "nextRun": iso_utc(decided.next_run) if decided.next_run else None}
    if decided.next_run is None:
        updated["enabled"] = False
        updated["done"] = True
    missed = [new_run(job, moment, now, status="missed") for moment in decided.missed
              if iso_utc(moment) not in taken]
    run = None
    if decided.run is not None and iso_utc(decided.run) not in taken:
        run = new_run(job, decided.run, now, late=decided.late,
                      missed_count=decided.missed_count)
    return run, missed, updated


def finished(run: dict[str, Any], status: str, now: datetime, *, reply: str | None = None,
             error: str | None = None) -> dict[str, Any]:
    """The run ended: ``ok``, ``error`` or ``skipped`` (its delivery: nothing to send when
    there is no reply)."""
    done = {**run, "status": status, "finishedAt": iso_utc(now), "reply": reply,
            "error": error}
    if not reply and done["delivery"]["status"] == "pending":
        done["delivery"] = {**done["delivery"], "status": "none"}
    return done


def ended(job: dict[str, Any], status: str) -> tuple[dict[str, Any], str | None]:
    """The job after a run of ``status``, and what the owner is to be told (None: nothing)."""
    if status != "error":
        return {**job, "failures": 0}, None
    failures = int(job.get("failures") or 0) + 1
    updated = {**job, "failures": failures}
    if failures >= FAILURES_PAUSED:
        updated["enabled"] = False
        updated["pausedReason"] = f"{failures} failed runs in a row"
        return updated, (f"job {job['id']} ({job.get('name') or job['message'][:40]}) failed "
                         f"{failures} times in a row and is paused; clawd jobs runs "
                         f"{job['id']} shows why, clawd jobs resume {job['id']} restarts it")
    if failures == FAILURES_TOLD:
        return updated, (f"job {job['id']} ({job.get('name') or job['message'][:40]}) failed "
                         f"{failures} times in a row; clawd jobs runs {job['id']} shows why "
                         f"(after {FAILURES_PAUSED} it is paused)")
    return updated, None


def deliverable(run: dict[str, Any], now: datetime) -> bool:
    """A run whose delivery is to be tried now: pending, failed and due a retry, or being
    sent by a process that went quiet."""
    sent = run.get("delivery") or {}
    if run.get("status") == "running" or sent.get("attempts", 0) >= MAX_ATTEMPTS:
        return False
    state = sent.get("status")
    if state == "pending":
        return True
    if state in ("failed", "sending"):
        retry_at = sent.get("retryAt")
        return retry_at is None or parse_iso(retry_at) <= now
    return False


def sending(run: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The run with its delivery taken for sending by this process."""
    from datetime import timedelta

    until = now + timedelta(seconds=SENDING_SECONDS)
    return {**run, "delivery": {**run["delivery"], "status": "sending",
                                "retryAt": iso_utc(until)}}


def sent(run: dict[str, Any], now: datetime, message_id: str | None, error: str | None
         ) -> dict[str, Any]:
    """The run after one try at delivering it: ``delivered`` with the target's message id,
    or ``failed`` (tried again later, up to ``MAX_ATTEMPTS``)."""
    from datetime import timedelta

    was = run["delivery"]
    attempts = int(was.get("attempts") or 0) + 1
    if error is None:
        now_delivery = {**was, "status": "delivered", "messageId": message_id,
                        "attempts": attempts, "error": None, "retryAt": None,
                        "deliveredAt": iso_utc(now)}
    else:
        retry = now + timedelta(seconds=RETRY_SECONDS * attempts)
        now_delivery = {**was, "status": "failed", "attempts": attempts, "error": error,
                        "retryAt": iso_utc(retry) if attempts < MAX_ATTEMPTS else None}
    return {**run, "delivery": now_delivery}


def needed(run: dict[str, Any], job: dict[str, Any]) -> bool:
    """Whether ``run`` must stay whatever the bound: it is being run; its delivery is still
    to be made (pending, being sent, or failed with tries left: the outbox takes it from
    the record); or its occurrence is at or after the job's ``nextRun``, the one moment a
    claim looks from (``claim`` never reaches back before it), so only there does the
    record keep an occurrence from running twice."""
    if run.get("status") == "running":
        return True
    sent = run.get("delivery") or {}
    if sent.get("status") in ("pending", "sending") or (
            sent.get("status") == "failed" and int(sent.get("attempts") or 0) < MAX_ATTEMPTS):
        return True
    next_run = job.get("nextRun")
    return bool(next_run) and parse_iso(str(run["scheduledFor"])) >= parse_iso(str(next_run))


def kept(runs: list[dict[str, Any]], job: dict[str, Any], keep: int = KEEP_RUNS
         ) -> list[dict[str, Any]]:
    """The runs of ``job`` a store keeps, oldest first: the newest ``keep`` and every one
    still ``needed``."""
    ordered = sorted(runs, key=lambda run: str(run["scheduledFor"]))
    cut = len(ordered) - keep
    return [run for place, run in enumerate(ordered) if place >= cut or needed(run, job)]
