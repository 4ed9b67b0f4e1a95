"""``clawd jobs add | list | show | runs | pause | resume | remove | run | tick``
(docs/automation.md).

``add`` reads ``--at`` (ISO 8601 or a phrase), ``--every`` or ``--cron`` (with ``--tz``)
in the user's zone (``agents.defaults.userTimezone``, else the host's) and answers with the
time as a local time and as UTC. ``run`` runs a job now; ``tick`` runs what is due once and
exits (for a host whose own cron drives clawd). ``--json`` prints the shapes of
``automation.jobs``: a job ``{"id", "name", "schedule", "nextRun", "session", "deliver",
"enabled"}``, a run ``{"scheduledFor", "startedAt", "status", "delivery", "sessionKey",
"reply"}``.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from typing import Any

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job, public_job, public_run, switched
from clawd.automation.zones import both, parse_iso, user_zone
from clawd.core.errors import ClawdError


def now() -> datetime:
    return datetime.now(timezone.utc)


def cmd_jobs(args: argparse.Namespace) -> int:
    from clawd.config import load_config, resolve_agent
    from clawd.frontends.compose import config_for_agent
    from clawd.storage import open_jobs

    config = load_config()
    agent_id, settings = resolve_agent(config_for_agent(config, args.agent), args.agent)
    tz = user_zone(settings.user_timezone)
    store = open_jobs(config)
    action = args.jobs_command
    as_json = getattr(args, "json", False)
    if action == "add":
        job = store.add(_job(args, agent_id, tz))
        return _show(job, tz, as_json, added=True)
    if action == "list":
        jobs = store.all(args.agent and agent_id)
        if as_json:
            print(json.dumps([public_job(job) for job in jobs], indent=2))
            return 0
        if not jobs:
            print(f"no jobs yet ({store.location}); add one with clawd jobs add")
        for job in jobs:
            print(_line(job, tz))
        return 0
    if action in ("tick", "run"):
        return _run(config, store, args, action, tz)
    job = store.get(args.id)
    if action == "show":
        return _show(job, tz, as_json)
    if action == "runs":
        runs = store.runs(job["id"], args.limit)
        if as_json:
            print(json.dumps([public_run(run) for run in runs], indent=2))
            return 0
        if not runs:
            print(f"job {job['id']} has not run yet; next {_when(job.get('nextRun'), tz)}")
        for run in runs:
            print(_run_line(run, tz))
        return 0
    if action == "remove":
        store.remove(job["id"])
        print(f"removed job {job['id']} and its runs")
        return 0
    enabled = action == "resume"
    changed = store.update(job["id"], lambda j: switched(j, enabled, now()))
    print(f"{'resumed' if enabled else 'paused'} job {job['id']}"
          + (f"; next {_when(changed.get('nextRun'), tz)}" if enabled else ""))
    return 0


def _job(args: argparse.Namespace, agent_id: str, tz: Any) -> dict[str, Any]:
    from clawd.automation.when import parse_when

    moment = now()
    if args.at is not None:
        schedule = sched.at(parse_when(args.at, moment, tz))
    elif args.every is not None:
        schedule = sched.every(args.every, moment)
    else:
        schedule = sched.cron(args.cron, args.tz or tz.key)
    if args.tz and args.cron is None:
        raise ClawdError("--tz goes with --cron (--at is read in your zone, "
                         "agents.defaults.userTimezone, unless it has an offset)")
    return new_job(agent_id, schedule, args.message, moment, name=args.name,
                   session=args.session, deliver=args.deliver, missed=args.missed,
                   remember=args.remember, made_by="cli")


def _when(stamp: str | None, tz: Any) -> str:
    return both(parse_iso(stamp), tz) if stamp else "never (done)"


def _line(job: dict[str, Any], tz: Any) -> str:
    state = "on " if job.get("enabled") else "off"
    what = sched.describe(sched.Schedule.from_json(job["schedule"]))
    name = job.get("name") or job["message"][:40]
    return (f"{job['id']}  {state}  {what:<28} next {_when(job.get('nextRun'), tz):<48} "
            f"{name}")


def _show(job: dict[str, Any], tz: Any, as_json: bool, added: bool = False) -> int:
    if as_json:
        print(json.dumps(public_job(job), indent=2))
        return 0
    if added:
        print(f"added job {job['id']} ({sched.describe(sched.Schedule.from_json(job['schedule']))}"
              f"): next run {_when(job.get('nextRun'), tz)}")
        return 0
    for key, value in (("id", job["id"]), ("name", job.get("name") or "-"),
                       ("agent", job["agentId"]), ("message", job["message"]),
                       ("schedule", sched.describe(sched.Schedule.from_json(job["schedule"]))),
                       ("next run", _when(job.get("nextRun"), tz)),
                       ("session", job.get("session")), ("deliver", job.get("deliver")),
                       ("missed", job.get("missed")), ("enabled", job.get("enabled")),
                       ("remember", job.get("remember")),
                       ("failures in a row", job.get("failures") or 0),
                       ("paused because", job.get("pausedReason") or "-")):
        print(f"{key + ':':<19} {value}")
    return 0


def _run_line(run: dict[str, Any], tz: Any) -> str:
    sent = run.get("delivery") or {}
    delivery = sent.get("status", "none") + (f" ({sent['messageId']})" if sent.get(
        "messageId") else "") + (f" ({sent['error']})" if sent.get("error") else "")
    text = run.get("reply") or run.get("error") or run.get("notice") or ""
    when = both(parse_iso(run["scheduledFor"]), tz)
    return f"{when:<48} {run['status']:<8} delivery {delivery:<24} {text[:80]!r}"


def _run(config: Any, store: Any, args: argparse.Namespace, action: str, tz: Any) -> int:
    from clawd.frontends.compose import build_runtime
    from clawd.scheduler.delivery import BACKGROUND_KINDS
    from clawd.scheduler.runner import Runner

    built: dict[str, Any] = {}

    def runtime_for(agent: str) -> Any:
        if agent not in built:
            built[agent] = build_runtime(config, agent)
        return built[agent]

    agents = {args.agent.lower()} if args.agent else None
    def to_channel(target: str, text: str) -> str:  # connected for the one delivery
        import asyncio

        from clawd.channels.delivery import deliver

        return str(asyncio.run(deliver(config, target, text)))

    runner = Runner(store, runtime_for, now, agents=agents, kinds=BACKGROUND_KINDS,
                    channel=to_channel)
    if action == "tick":
        from clawd.config import resolve_agent
        from clawd.scheduler import heartbeat

        heartbeat.sync(store, [(agent, resolve_agent(config, agent)[1])
                               for agent in config.agent_ids()], now(), "cli")
    try:
        done = [runner.run_now(args.id)] if action == "run" else runner.tick()
    finally:
        for runtime in built.values():
            if runtime.memory is not None:
                runtime.memory.close()
    if getattr(args, "json", False):
        print(json.dumps([public_run(run) for run in done], indent=2))
    else:
        if not done and action == "tick":
            print("nothing due")
        for run in done:
            print(f"job {run['jobId']}: {_run_line(run, tz)}")
    return 1 if any(run["status"] == "error" for run in done) else 0


def add_parsers(command: Any, sub: Any) -> None:
    add = command(sub, "add", "add a job: a message sent to the agent at a time, every "
                  "span, or on a cron schedule",
                  epilog='examples: clawd jobs add --at "tomorrow at 9" --message "call the '
                  'landlord" --deliver web; clawd jobs add --cron "0 9 * * 1-5" --tz '
                  'Europe/Lisbon --message "plan the day" (docs/automation.md)')
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="WHEN", help='ISO 8601 or a phrase ("in 20 minutes", '
                      '"tomorrow at 9", "Friday 18:30"), read in agents.defaults.userTimezone')
    when.add_argument("--every", metavar="DURATION", help="e.g. 20m, 1h30m, 2 days")
    when.add_argument("--cron", metavar="EXPR", help='five fields, e.g. "0 9 * * 1-5"')
    add.add_argument("--tz", metavar="ZONE", help="the zone --cron is read in (IANA name; "
                     "default: the user's)")
    add.add_argument("--message", required=True, metavar="TEXT", help="what the agent is sent")
    add.add_argument("--session", default="isolated", metavar="isolated|main|KEY",
                     help="where each run goes (default: a fresh isolated session)")
    add.add_argument("--deliver", default="cli", metavar="TARGET",
                     help="web, cli (shown at the next REPL prompt), webhook:<url> or none "
                     "(default: cli)")
    add.add_argument("--missed", default="once", choices=("once", "skip"),
                     help="occurrences missed while nothing ran: one catch-up run (once) or "
                     "none (skip)")
    add.add_argument("--name", metavar="NAME")
    add.add_argument("--remember", action="store_true",
                     help="let consolidation and the memory flush take its runs into memory")
    add.add_argument("--json", action="store_true")
    command(sub, "list", "the jobs, their schedules and next runs").add_argument(
        "--json", action="store_true")
    for name, what in (("show", "one job"), ("runs", "a job's runs: status, delivery, time, "
                                                     "reply"),
                       ("pause", "stop a job running"), ("resume", "start a paused job again"),
                       ("remove", "remove a job and its runs"),
                       ("run", "run a job now, whatever its schedule")):
        made = command(sub, name, what)
        made.add_argument("id", metavar="ID", help="a job id (or a unique start of one) or name")
        if name in ("show", "runs", "run"):
            made.add_argument("--json", action="store_true")
        if name == "runs":
            made.add_argument("--limit", type=int, default=20, metavar="N")
    command(sub, "tick", "run what is due once and exit (for a host's own cron)").add_argument(
        "--json", action="store_true")
