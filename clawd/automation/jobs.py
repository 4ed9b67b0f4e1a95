"""The shapes of a job and of a run, as stored and as ``--json`` shows them (docs/automation.md).

A job is stored as a camelCase JSON object (``jobs.json`` on files, a JSONB row on
PostgreSQL); ``public_job`` is its ``--json`` face: ``{"id", "name", "schedule", "nextRun",
"session", "deliver", "enabled"}``. A run is one occurrence, keyed by (job id,
``scheduledFor``); its ``status`` (``running``, ``ok``, ``error``, ``skipped``, ``missed``)
is kept apart from its ``delivery`` (``{"target", "status": pending|delivered|failed|none,
"messageId", "attempts", "error"}``); ``public_run`` is ``{"scheduledFor", "startedAt",
"status", "delivery", "sessionKey", "reply"}``.
"""

from __future__ import annotations

import secrets
from typing import Any

from clawd.core.errors import ClawdError

SESSION_ISOLATED = "isolated"
SESSION_MAIN = "main"
FAILURES_TOLD = 3  # failed runs in a row after which the owner is told
FAILURES_PAUSED = 10  # ... after which the job is paused
TARGETS = ("none", "cli", "web", "webhook:", "telegram:")
RUN_STATUSES = ("running", "ok", "error", "skipped", "missed")


def new_job_id() -> str:
    return secrets.token_hex(4)


def new_secret() -> str:
    """The key a ``webhook:`` delivery signs its body with (HMAC-SHA256)."""
    return secrets.token_urlsafe(32)


def checked_target(target: str) -> str:
    """``target`` as a delivery target, or a ``ClawdError`` naming the ones there are."""
    target = target.strip()
    if target in ("none", "cli", "web"):
        return target
    if target.startswith("webhook:"):
        url = target.removeprefix("webhook:")
        if url.startswith(("http://", "https://")):
            return target
    if target.startswith("telegram:") and target.removeprefix("telegram:").lstrip(
            "-").isdigit():
        return target
    raise ClawdError(f"--deliver {target!r}: use web, cli, webhook:<http(s) url>, "
                     f"telegram:<chatId> or none")


def session_key_for(job: dict[str, Any]) -> str:
    """The session a run of ``job`` goes to: ``agent:<id>:cron:<jobId>`` (isolated),
    ``agent:<id>:main``, or the key the job names."""
    agent = str(job["agentId"]).lower()
    session = str(job.get("session") or SESSION_ISOLATED)
    if session == SESSION_ISOLATED:
        return f"agent:{agent}:cron:{job['id']}"
    if session.startswith("agent:"):
        return session.lower()
    return f"agent:{agent}:{session.lower()}"


def public_job(job: dict[str, Any]) -> dict[str, Any]:
    return {"id": job["id"], "name": job.get("name") or "", "schedule": job["schedule"],
            "nextRun": job.get("nextRun"), "session": job.get("session") or SESSION_ISOLATED,
            "deliver": job.get("deliver") or "none", "enabled": bool(job.get("enabled"))}


def public_run(run: dict[str, Any]) -> dict[str, Any]:
    return {"scheduledFor": run["scheduledFor"], "startedAt": run.get("startedAt"),
            "status": run["status"], "delivery": run.get("delivery"),
            "sessionKey": run.get("sessionKey"), "reply": run.get("reply")}


def switched(job: dict[str, Any], enabled: bool, now: Any) -> dict[str, Any]:
    """``job`` paused (``enabled`` False) or resumed at ``now``: its failures forgotten; a
    resumed repeating job's next run is its first occurrence from now on (a paused span is
    not "missed"). Resuming a one-off that has run is a ``ClawdError``."""
    from clawd.automation import schedule as sched
    from clawd.automation.zones import iso_utc

    if enabled and not job.get("nextRun"):
        raise ClawdError(f"job {job['id']} has no occurrence left (a one-off that ran)")
    changed = {**job, "enabled": enabled, "failures": 0, "pausedReason": None}
    schedule = sched.Schedule.from_json(job["schedule"])
    if enabled and schedule.kind != "at":
        upcoming = sched.first(schedule, now)
        changed["nextRun"] = iso_utc(upcoming) if upcoming else job.get("nextRun")
    return changed


def delivery(target: str) -> dict[str, Any]:
    """A run's delivery before it is tried: ``none`` is done at once."""
    return {"target": target, "status": "none" if target == "none" else "pending",
            "messageId": None, "attempts": 0, "error": None}


def find(jobs: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The job whose id (or a unique prefix of it, or whose name) is ``wanted``."""
    wanted = wanted.strip()
    exact = [job for job in jobs if job["id"] == wanted or job.get("name") == wanted]
    found = exact or [job for job in jobs if job["id"].startswith(wanted.lower())]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ClawdError(f"no job {wanted} (clawd jobs list)")
    raise ClawdError(f"{wanted} names {len(found)} jobs: "
                     f"{', '.join(job['id'] for job in found)}")


def new_job(agent_id: str, schedule: Any, message: str, now: Any, *, name: str | None = None,
            session: str = SESSION_ISOLATED, deliver: str = "none", missed: str = "once",
            remember: bool = False, tools: list[str] | None = None,
            made_by: str = "cli", origin: str | None = None) -> dict[str, Any]:
    """A job as stored (``schedule``: a ``schedule.Schedule``; ``now``: when it is added).
    ``tools``: the tools its runs may use (None: the agent's); ``origin``: the session
    key it was made in."""
    from clawd.automation import schedule as sched
    from clawd.automation.zones import iso_utc

    if not message.strip():
        raise ClawdError("the job's message is empty")
    if missed not in ("once", "skip"):
        raise ClawdError(f"--missed {missed!r}: once or skip")
    first = sched.first(schedule, now)
    if first is None:
        raise ClawdError("that time has passed")
    job_id = new_job_id()
    return {"id": job_id, "name": name or "", "agentId": agent_id,
            "schedule": schedule.to_json(), "message": message, "session": session or
            SESSION_ISOLATED, "deliver": checked_target(deliver), "missed": missed,
            "enabled": True, "remember": remember, "tools": tools, "secret": new_secret(),
            "madeBy": made_by, "origin": origin, "createdAt": iso_utc(now),
            "nextRun": iso_utc(first), "failures": 0}
