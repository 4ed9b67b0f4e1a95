"""Does a reminder become the right job, and does an ordinary message make none? A real model.

Each message is sent as the first turn of a fresh clawd home (the user's zone
Europe/Lisbon, the clock at Monday 2 March 2026, 10:00 there), through clawd's own chat loop
(``Chat.handle``, as the REPL does) with the ``schedule`` tool offered as in any private
session. Afterwards the job store is read:

- a **reminder** counts as right when exactly one job was added whose first run is the time
  the message means (within a minute, plus the time the turn took for a time counted from
  now: the clock moves on as the turn runs) and whose message is not empty; it is **wrong time**
  when a job came at another time, **none** when no job came;
- an **ordinary** message (some of them name a time: a meeting, a train) counts as a
  **false job** when it added any.

The messages were written before any change they measure; half are held out
(``--half tune|held|all``): they are not to be read while tuning. Not part of the test
suite: it needs a model server. With ``../shared/tools/local-llm``:

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_schedule.py --model qwen2.5-coder-1.5b-instruct --half all

``--out FILE`` keeps every case (its message, the tool calls, the jobs, the reply).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

ZONE = ZoneInfo("Europe/Lisbon")
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=ZONE)  # a Monday, 10:00 in Lisbon (UTC+0 in March)


def at(days: int, hour: int, minute: int = 0) -> datetime:
    return (NOW + timedelta(days=days)).replace(hour=hour, minute=minute)


def later(minutes: int) -> datetime:
    return NOW + timedelta(minutes=minutes)


@dataclass
class Case:
    text: str
    half: str
    when: datetime | None = None  # a reminder's time; None: an ordinary message


CASES = [
    # reminders, tune
    Case("remind me in 20 minutes to stretch", "tune", later(20)),
    Case("Remind me tomorrow at 9 to call the landlord", "tune", at(1, 9)),
    Case("can you remind me at 18:30 to take the bread out of the oven?", "tune", at(0, 18, 30)),
    Case("in 2 hours remind me to check the laundry", "tune", later(120)),
    Case("please set a reminder for Friday 10:00: dentist appointment", "tune", at(4, 10)),
    Case("remind me in 45 minutes that the meeting starts", "tune", later(45)),
    # reminders, held out
    Case("Remind me in 10 minutes to turn off the stove", "held", later(10)),
    Case("remind me tomorrow at 8 to water the plants", "held", at(1, 8)),
    Case("set a reminder in 3 hours to call mum", "held", later(180)),
    Case("at 17:00 remind me to leave for the train", "held", at(0, 17)),
    Case("Could you remind me on Wednesday at 14:00 to send the invoice?", "held", at(2, 14)),
    Case("in 90 minutes, remind me to take my medicine", "held", later(90)),
    # ordinary messages, tune
    Case("what is 17 times 23?", "tune"),
    Case("write a haiku about autumn", "tune"),
    Case("how do I reverse a list in Python?", "tune"),
    Case("I have a meeting tomorrow at 9 with Ana.", "tune"),
    Case("my train leaves at 18:30 on Friday", "tune"),
    Case("what's the capital of Portugal?", "tune"),
    # ordinary messages, held out
    Case("explain what a closure is in one sentence", "held"),
    Case("I usually go running at 7 in the morning", "held"),
    Case("translate 'good morning' to Spanish", "held"),
    Case("the dentist said to come back in six months", "held"),
    Case("tell me a fun fact about octopuses", "held"),
    Case("what day of the week was 1 January 2000?", "held"),
]


@dataclass
class Result:
    text: str
    half: str
    reminder: bool
    verdict: str  # right | wrong time | none | several | false job | no job
    calls: list[str] = field(default_factory=list)
    jobs: list[dict] = field(default_factory=list)
    reply: str = ""


def run_case(args: argparse.Namespace, case: Case) -> Result:
    from bench_guards import model_home

    from clawd.config import load_config
    from clawd.core.events import ToolStarted, TurnDone
    from clawd.frontends.commands import Chat
    from clawd.frontends.compose import build_runtime
    from clawd.storage import open_jobs

    _, state, _ = model_home("clawd-schedule-", args)
    config = json.loads((state / "clawd.json").read_text())
    config["agents"]["defaults"]["userTimezone"] = "Europe/Lisbon"
    (state / "clawd.json").write_text(json.dumps(config))
    loaded = load_config(state / "clawd.json")
    runtime = build_runtime(loaded, None)
    started = time.monotonic()
    runtime.clock = lambda: NOW + timedelta(seconds=time.monotonic() - started)
    chat = Chat.open(runtime, "agent:main:main")
    calls, reply = [], ""
    for event in chat.handle(case.text):
        if isinstance(event, ToolStarted):
            calls.append(f"{event.name} {json.dumps(event.arguments)[:200]}")
        elif isinstance(event, TurnDone):
            reply = event.text
    chat.session.close()
    jobs = open_jobs(loaded).all()
    found = [{"message": j.get("message"), "nextRun": j.get("nextRun"),
              "schedule": j.get("schedule")} for j in jobs]
    if case.when is None:
        verdict = "false job" if jobs else "no job"
    elif not jobs:
        verdict = "none"
    elif len(jobs) > 1:
        verdict = "several"
    else:
        first = datetime.fromisoformat(str(jobs[0]["nextRun"]).replace("Z", "+00:00"))
        # the clock moves on as the turn runs: "in 20 minutes" said a minute in is 10:21
        took = time.monotonic() - started
        close = -60 <= (first - case.when).total_seconds() <= 60 + took
        verdict = "right" if close and str(jobs[0].get("message") or "").strip() \
            else "wrong time"
    return Result(case.text, case.half, case.when is not None, verdict, calls, found, reply)


def report(results: list[Result]) -> None:
    for half in ("tune", "held"):
        mine = [r for r in results if r.half == half]
        if not mine:
            continue
        asked = [r for r in mine if r.reminder]
        plain = [r for r in mine if not r.reminder]
        right = sum(r.verdict == "right" for r in asked)
        wrong = sum(r.verdict in ("wrong time", "several") for r in asked)
        none = sum(r.verdict == "none" for r in asked)
        false = sum(r.verdict == "false job" for r in plain)
        print(f"{half}: reminders right {right}/{len(asked)} (wrong time {wrong}, no job "
              f"{none}); ordinary messages that made a job {false}/{len(plain)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--half", choices=("tune", "held", "all"), default="tune")
    parser.add_argument("--out", type=Path, help="keep every case as JSON")
    args = parser.parse_args(argv)
    results = []
    for case in CASES:
        if args.half != "all" and case.half != args.half:
            continue
        result = run_case(args, case)
        results.append(result)
        print(f"[{result.half}] {result.verdict:<10} {case.text}", flush=True)
        for call in result.calls:
            print(f"    tool: {call}")
        print(f"    reply: {result.reply[:160]!r}", flush=True)
    report(results)
    if args.out:
        args.out.write_text(json.dumps({"model": args.model,
                                        "cases": [asdict(r) for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
