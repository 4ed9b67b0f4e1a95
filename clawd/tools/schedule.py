"""The model's ``schedule`` tool (docs/automation.md): reminders and scheduled work from a chat.

``schedule {action: "add"|"list"|"remove", at?, every?, cron?, tz?, message?, id?}``: the
fields mean what the flags of ``clawd jobs add`` mean. The model passes the user's words for
the time ("in 20 minutes", "tomorrow at 9", "Friday 18:30") and the runtime does the date
arithmetic, in the user's zone (``agents.defaults.userTimezone``) from the runtime's clock:
a small model never computes a time itself. The answer repeats the time as a local time and
as UTC, for the model to say back.

A job the tool adds runs in an isolated session, is delivered where it was made (the web
page for a gateway session, the REPL otherwise) and may use only the tools the turn had
(``ctx.offered``, less ``schedule``). The tool is not ``shared``: group sessions are never
offered it, and a job's own runs are not either (``scheduler.runner``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.automation.when import parse_when
from clawd.automation.zones import both, parse_iso, user_zone
from clawd.core.errors import ClawdError, ToolError
from clawd.core.messages import ToolCall, ToolSpec
from clawd.tools.base import Tool, ToolContext, arg, schema

DESCRIPTION = (
    "Set, list or remove reminders. To remind the user: action \"add\", 'at' = the user's "
    "own words for the time (\"in 20 minutes\", \"tomorrow at 9\"; never a date you "
    "worked out), 'message' = what to remind them of; 'every' (\"1h\") or 'cron' repeat "
    "it. Tell the user the time it answers.")
PARAMETERS = schema({
    "action": {"type": "string", "enum": ["add", "list", "remove"]},
    "at": {"type": "string"}, "every": {"type": "string"}, "cron": {"type": "string"},
    "tz": {"type": "string"}, "message": {"type": "string"}, "id": {"type": "string"},
}, ["action"])


def schedule_tool(open_store: Callable[[], Any], deliver: str = "cli") -> Tool:
    """The tool over the job store ``open_store`` gives; ``deliver``: where a job made with
    it is delivered (``web`` in the gateway, ``cli`` in a chat)."""

    def run(args: dict[str, Any], ctx: ToolContext) -> str:
        action = str(arg(args, "action", str)).strip().lower()
        tz = user_zone(ctx.settings.user_timezone)
        store = open_store()
        try:
            if action == "add":
                return _add(store, args, ctx, tz, deliver)
            if action == "list":
                return _list(store, ctx, tz)
            if action == "remove":
                wanted = str(arg(args, "id", str))
                job = store.get(wanted)
                if str(job["agentId"]).lower() != ctx.agent_id.lower():
                    raise ToolError(f"no job {wanted}")
                store.remove(job["id"])
                return f"removed job {job['id']} ({job['message']})"
        except ClawdError as exc:
            raise ToolError(str(exc)) from None
        raise ToolError(f"unknown action {action!r}: add, list or remove")

    return Tool(ToolSpec("schedule", DESCRIPTION, PARAMETERS), run, shared=False)


def _add(store: Any, args: dict[str, Any], ctx: ToolContext, tz: Any, deliver: str) -> str:
    message = str(arg(args, "message", str, "")).strip()
    if not message:
        raise ToolError("missing 'message': what to remind the user of, or what to do")
    given = [name for name in ("at", "every", "cron") if args.get(name)]
    if len(given) != 1:
        raise ToolError("give exactly one of 'at' (e.g. \"in 20 minutes\"), 'every' or "
                        "'cron'")
    now = ctx.now()
    if given == ["at"]:
        schedule = sched.at(parse_when(str(args["at"]), now, tz))
    elif given == ["every"]:
        schedule = sched.every(str(args["every"]), now)
    else:
        schedule = sched.cron(str(args["cron"]), str(args.get("tz") or tz.key))
    tools = [name for name in ctx.offered if name != "schedule"]
    job = store.add(new_job(ctx.agent_id, schedule, message, now, deliver=deliver,
                            tools=tools, made_by="model", origin=ctx.session_key or None))
    when = both(parse_iso(job["nextRun"]), tz)
    repeat = "" if schedule.kind == "at" else f", then {sched.describe(schedule)}"
    return (f"scheduled job {job['id']}: {when}{repeat}. Tell the user it is set for that "
            f"time.")


def adds(call: ToolCall) -> bool:
    """Whether ``call`` asks the tool to add a reminder or job."""
    return call.name == "schedule" and str(call.arguments.get("action")).lower() == "add"


def for_the_user(answer: str) -> str:
    """An ``add`` answer without its words to the model: "scheduled job …: <time>"."""
    return answer.split(". Tell the user", 1)[0]


def _list(store: Any, ctx: ToolContext, tz: Any) -> str:
    jobs = [job for job in store.all(ctx.agent_id) if job.get("enabled")]
    if not jobs:
        return "no reminders or scheduled jobs"
    return "\n".join(
        f"- {job['id']}: {both(parse_iso(job['nextRun']), tz) if job.get('nextRun') else 'done'}"
        f" ({sched.describe(sched.Schedule.from_json(job['schedule']))}): {job['message']}"
        for job in jobs)
