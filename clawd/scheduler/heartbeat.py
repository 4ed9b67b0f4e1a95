"""The heartbeat as a job: ``heartbeat-<agentId>``, kept in step with the config.

``sync`` makes (or changes, or removes) each agent's heartbeat job from
``agents.defaults.heartbeat``: an ``every`` job in the main session whose message is the
heartbeat's ``prompt``, with ``kind: "heartbeat"``; without ``every`` there is none, so
switching it off in the config stops it at the next beat. Being a job, it is claimed once per
occurrence like any other and its runs are listed by ``clawd jobs runs``. ``check`` is what
the runner asks before the model: the reason to skip (``automation.heartbeat``) or None.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from clawd.automation import heartbeat as beat
from clawd.automation import schedule as sched
from clawd.automation.jobs import SESSION_MAIN, new_job
from clawd.automation.zones import iso_utc, parse_iso, user_zone
from clawd.core.errors import ClawdError

if TYPE_CHECKING:
    from clawd.loop.runtime import Runtime

KIND = "heartbeat"


def job_id(agent_id: str) -> str:
    return f"heartbeat-{agent_id.lower()}"


def sync(store: Any, agents: list[tuple[str, Any]], now: datetime, deliver: str) -> None:
    """Bring each agent's heartbeat job in line with its settings (``(agent id, settings)``)."""
    existing = {job["id"]: job for job in store.all() if job.get("kind") == KIND}
    for agent_id, settings in agents:
        config = settings.heartbeat
        wanted = job_id(agent_id)
        have = existing.get(wanted)
        if not config.every:
            if have is not None:
                store.remove(wanted)
            continue
        every = sched.every(config.every, now)
        shape = {"message": config.prompt or beat.PROMPT, "model": config.model}
        if have is None:
            job = new_job(agent_id, every, str(shape["message"]), now,
                          name=f"heartbeat of {agent_id}", session=SESSION_MAIN,
                          deliver=deliver, missed="skip", made_by="config")
            try:
                store.add({**job, **shape, "id": wanted, "kind": KIND})  # deliver: as made
            except ClawdError:  # another worker made it a moment ago: it is there
                if not any(j["id"] == wanted for j in store.all()):
                    raise
        elif (have["schedule"].get("everyMs") != (every.every_seconds or 0) * 1000
              or any(have.get(k) != v for k, v in shape.items())):
            nxt = sched.first(every, now)
            changed = {**shape, "schedule": every.to_json(), "enabled": True,
                       "nextRun": iso_utc(nxt) if nxt else None}
            store.update(wanted, lambda j, changed=changed: {**j, **changed})


def check(runtime: Runtime, store: Any, job: dict[str, Any], now: datetime
          ) -> tuple[str | None, str]:
    """Why the heartbeat run of ``job`` is skipped without a model call (None: it runs),
    and the turn's message (the prompt and HEARTBEAT.md's tasks)."""
    settings = runtime.settings
    tz = user_zone(settings.user_timezone)
    try:
        text = runtime.files.read(beat.FILE)
    except (ClawdError, OSError):
        text = None
    start = beat.day_start(now, tz)
    runs_today = sum(1 for run in store.runs(job["id"], 200)
                     if run.get("status") == "ok" and parse_iso(run["scheduledFor"]) >= start)
    why = beat.skip_reason(settings.heartbeat, text, now, tz, runs_today,
                           last_person(runtime, f"agent:{runtime.agent_id.lower()}:main"))
    return why, beat.message(str(job.get("message") or beat.PROMPT), text or "")


def last_person(runtime: Runtime, key: str) -> datetime | None:
    """When the person last wrote in session ``key`` (a user message with no ``origin``)."""
    entry = runtime.store.get(key)
    if not entry or not entry.get("sessionId"):
        return None
    loaded = runtime.storage.transcript(str(entry["sessionId"])).load(quiet=True)
    for line in reversed(loaded.entries):
        if (line.get("type") == "message" and line.get("role") == "user"
                and not line.get("origin") and line.get("timestamp")):
            try:
                return parse_iso(str(line["timestamp"]))
            except ValueError:
                return None
    return None
