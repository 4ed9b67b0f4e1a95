"""Can a model consolidate notes into MEMORY.md? Five days of notes, one run a day, scored.

Five daily logs hold lasting facts among small talk and requests, and three of the facts
change on a later day (a renamed server, a moved appointment, a raised budget). Each day's
log is written, then ``clawd memory consolidate`` runs (``loop.consolidate``, the real
prompt, parser, checks and writer) against any OpenAI-compatible server. After the fifth
day the run is scored on MEMORY.md outside ``## Replaced``: current values present, stale
values still given as current, noise kept (small talk, requests), operations refused by the
checks, and lines lost (always 0 unless the checks fail). ``--samples N`` repeats the whole
run in fresh workspaces (the server samples). Needs a model server (not part of the tests):

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_consolidation.py --samples 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

DAYS = [
    ["- Budget for the Lisbon trip: 2400 euros", "- The home server is called tern and runs "
     "Debian 12", "- Thanks for the quick answer earlier", "- Asked for a haiku about autumn"],
    ["- Ines (the user's sister) arrives in Lisbon on 2026-05-14", "- Prefers tabs over "
     "spaces", "- Dentist appointment on 2026-12-03 at 09:30", "- Asked how to list open "
     "ports on Debian"],
    ["- The home server was renamed from tern to heron", "- Decided: deploys move to "
     "Thursdays", "- Said good morning"],
    ["- The dentist appointment moved from 2026-12-03 to 2026-12-05", "- New address: Rua "
     "das Flores 12, Porto"],
    ["- The Lisbon trip budget was raised from 2400 to 2800 euros", "- Wants a packing list "
     "for Kyoto"],
]
CURRENT = ["2800", "heron", "2026-05-14", "tabs", "2026-12-05", "Thursday", "Flores"]
STALE = ["2400", "tern", "2026-12-03"]  # given as current, outside ## Replaced
NOISE = ["haiku", "good morning", "Thanks for", "open ports", "packing list"]


def current_part(text: str) -> str:
    """MEMORY.md without its ``## Replaced`` section and the provenance of its lines."""
    import re

    kept = text.split("\n## Replaced", 1)[0]
    return re.sub(r"\s*\(memory/[^()]+#L\d+(?:-\d+)?\)", "", kept)


def one_run(home: Path, args: argparse.Namespace) -> dict:
    from bench_real_model import write_config

    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    args.memory_search, args.recall, args.api_key = False, False, None
    from clawd.config import load_config
    from clawd.frontends.compose import build_runtime
    from clawd.loop import consolidate as running
    from clawd.loop.consolidate import consolidate
    from clawd.workspace.init import apply, plan_init

    write_config(state, workspace, args)
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    write_config(state, workspace, args)
    rt = build_runtime(load_config(state / "clawd.json"), None)
    first = date(2026, 11, 16)
    refused = added = replaced = 0
    messages: list[str] = []
    answers: list[str] = []
    reasons: list[str] = []
    asking = running.ask

    def recorded(*a, **kw):  # the model's answers, kept for reading
        answers.append(asking(*a, **kw))
        return answers[-1]

    running.ask = recorded
    for n, lines in enumerate(DAYS):
        day = first + timedelta(days=n)
        rt.clock = lambda day=day: datetime(day.year, day.month, day.day, 22, 0,
                                            tzinfo=timezone.utc)
        (workspace / f"memory/{day.isoformat()}.md").write_text(
            f"# {day.isoformat()}\n\n" + "\n".join(lines) + "\n")
        report = consolidate(rt, rt.models(rt.settings.model).connect(), since=day)
        refused += len(report.refused)
        added += len(report.added)
        replaced += len(report.replaced)
        messages.append(report.message)
        reasons += report.refused
    running.ask = asking
    text = (workspace / "MEMORY.md").read_text()
    now = current_part(text).lower()
    return {"current": sum(v.lower() in now for v in CURRENT),
            "stale": sum(v.lower() in now for v in STALE),
            "noise": sum(v.lower() in now for v in NOISE), "added": added,
            "replaced": replaced, "refused": refused, "messages": messages, "memory": text,
            "answers": answers, "reasons": reasons}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    home = args.keep or Path(tempfile.mkdtemp(prefix="clawd-consolidate-"))
    started = time.perf_counter()
    runs = []
    for n in range(args.samples):
        run = one_run(home / f"run-{n + 1}", args)
        runs.append(run)
        print(f"run {n + 1}: current {run['current']}/{len(CURRENT)}, stale {run['stale']}/"
              f"{len(STALE)}, noise {run['noise']}/{len(NOISE)}, added {run['added']}, "
              f"replaced {run['replaced']}, refused {run['refused']}", flush=True)
    (home / "runs.json").write_text(json.dumps(runs, indent=2, ensure_ascii=False))
    total = len(runs)
    print(f"\n{total} runs of {len(DAYS)} days in {time.perf_counter() - started:.0f} s "
          f"(MEMORY.md of each in {home}/run-N/workspace, reports in {home}/runs.json)")
    for key, of in (("current", len(CURRENT)), ("stale", len(STALE)),
                    ("noise", len(NOISE))):
        print(f"{key:8} {sum(r[key] for r in runs)}/{of * total}")
    for key in ("added", "replaced", "refused"):
        print(f"{key:8} {sum(r[key] for r in runs)} operations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
