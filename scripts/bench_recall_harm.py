"""Does automatic recall help or get in the way? Ordinary messages and questions about the
past, each in a fresh session, with recall on and off, on a real model.

The workspace holds older notes that share a topic with the messages (a move to Lisbon with
a cat, a sister, a project): a saved conversation, two older daily logs, and today's log
(which the project context shows). Then:

- **ordinary messages**: statements, requests, creative and advice asks, none of which
  needs a note. A reply fails when it refuses or says the notes hold nothing ("I'm sorry",
  "no information", "can't assist", a stray ``<tools>``) or is blank. Recall must not add
  failures here. The messages come in two halves fixed before any tuning: ``tune`` (what a
  change may be tried on) and ``held`` (looked at only to report);
- **questions about the past**: the reply must hold the fact (in an older note, or in
  today's log, already in view).

``--settings`` picks what runs: recall ``off``, ``on`` (as the weak profile has it, gated
by ``recall_gate``), ``ungated`` (on for every message). Each message is sent
``--samples`` times per setting (the server samples). Prints the
failures per half and setting, the replies to requests that talk of notes instead, the
questions answered, and keeps every reply in ``--keep``/bench.log (``--report DIR`` reads
the figures of a kept run again). Not part of the test suite: it needs a model server.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_recall_harm.py --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct --window 8192 --samples 2 \\
        --restart "CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b"
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NOTES = {
    "memory/2026-11-18-lisbon-move.md": """# Session: 2026-11-18 19:02

- **Session key**: agent:main:main
- **Session id**: 6f1c2a0b9e3d4410

**user** (2026-11-18 18:40): We are moving to Lisbon in March, with our cat Mochi.
**assistant** (2026-11-18 18:40): That is exciting! Moving with a cat takes some planning.
**user** (2026-11-18 18:44): We found a flat in Alfama, the lease starts on 1 March.
**assistant** (2026-11-18 18:45): Alfama is lovely, though hilly. Noted: lease from 1 March.
**user** (2026-11-18 18:50): Mochi hates the carrier, any advice for the flight?
**assistant** (2026-11-18 18:51): Leave the carrier open at home for weeks so she gets used to it.
""",
    "memory/2026-11-19.md": (
        "- Moving to Lisbon (Alfama) in March with the cat Mochi; lease starts 1 March.\n"
        "- Started learning Portuguese on an app, 15 minutes a day.\n"
        "- Works remotely for a Dutch design studio.\n"),
    "memory/2026-11-24.md": (
        "- The tidepool project needs a database; choosing between SQLite and PostgreSQL.\n"
        "- Mochi's vet appointment for the travel papers is on 9 January.\n"),
    "memory/2026-11-27.md": """- Sister Ines is visiting on 12 December for a week.
""",
}

# (kind, half, message): none of these needs a note to be answered
ORDINARY = [
    ("statement", "tune", "My sister Ines lives in Porto and teaches piano."),
    ("statement", "tune", "I decided to use PostgreSQL 16 for the tidepool project."),
    ("creative", "tune", "Write a short poem about the hills of Lisbon."),
    ("advice", "tune", "Give me three tips for keeping a cat calm during a move."),
    ("request", "tune", "Translate 'good morning, neighbour' into Portuguese."),
    ("statement", "tune", "I started a pottery class on Thursdays."),
    ("statement", "held", "My neighbour Rui lent me a ladder yesterday."),
    ("creative", "held", "Write a haiku about the river Tagus at dawn."),
    ("advice", "held", "What should I pack for a weekend in Sintra? A short list."),
    ("creative", "held", "Suggest a name for a sourdough starter."),
    ("statement", "held", "I finished the first chapter of my Portuguese course."),
    ("request", "held", "Explain in two sentences how a funicular works."),
]
# (question, what the answer must hold)
QUESTIONS = [
    ("Which neighbourhood of Lisbon are we moving to?", r"Alfama"),
    ("What is my cat called?", r"Mochi"),
    ("When does our lease start?", r"1(st)? March|March 1"),
    ("What is my sister's name, and when is she visiting?", r"Ines.*12|12.*Ines"),
]
# a reply to a request, creative or advice ask that talks of notes, memory or saving: it
# answered the notes in front of the message instead of the message ("Here is a poem …,
# based on the information provided in your memory")
DISTRACTED = re.compile(r"\b(?:notes?|memory|memories|daily log|saved|wrote|write down|"
                        r"append(?:ed)?|added (?:it|this|that|the)|information provided)\b",
                        re.I)
FAILED = re.compile(
    r"i'?m sorry|i apologi[sz]e|can(no|')?t (assist|help)|unable to (help|assist)|"
    r"did(n't| not) find|(no|any) (relevant |specific )?(information|details|notes)|"
    r"not (mentioned|found|provided) in|notes (provided|do not|don't)|</?tools?>", re.I)


class ServerGone(Exception):
    pass


def asked(runtime, key: str, text: str, log, restart: str | None) -> str:
    """``ask``, and once more after ``restart`` (a shell command) when the server died
    (llama.cpp's server has been seen to abort on a grammar error mid-run)."""
    try:
        return ask(runtime, key, text, log)
    except ServerGone as exc:
        if not restart:
            raise SystemExit(f"the model server is gone: {exc}") from None
        log(f"  the server is gone ({exc}); restarting it")
        subprocess.run(restart, shell=True, check=True, capture_output=True)
        return ask(runtime, key + "-again", text, log)


def seed(runtime) -> None:
    """The notes as the run began: what an earlier message wrote is taken away, so every
    message meets the same notes."""
    memory = runtime.workspace / "memory"
    for path in memory.rglob("*.md"):
        if str(path.relative_to(runtime.workspace)) not in NOTES:
            path.unlink()
    for rel, text in NOTES.items():
        (runtime.workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (runtime.workspace / rel).write_text(text)
    if runtime.memory is not None:
        runtime.memory.mark_dirty()
        runtime.memory.catch_up(60)


def ask(runtime, key: str, text: str, log) -> str:
    from clawd.core.events import ErrorEvent, Recalled, TurnDone
    from clawd.frontends.commands import Chat

    seed(runtime)
    chat = Chat.open(runtime, key)
    reply, recalled, errors = "", "", []
    try:
        for event in chat.handle(text):
            if isinstance(event, Recalled):
                recalled = ", ".join(f"{p}:{a}-{b} ({s:.2f})" for p, a, b, s in event.places)
            elif isinstance(event, ErrorEvent):
                errors.append(event.message)
            elif isinstance(event, TurnDone):
                reply = event.text
    finally:
        chat.session.close()
    if any("cannot connect" in e for e in errors):  # the server died: this turn is no figure
        raise ServerGone(errors[-1])
    log(f"\n> [{key}] {text}\n  recalled: {recalled or '-'}\n  "
        + (reply.replace("\n", "\n  ") or "(no reply)"))
    return reply


def report(log: str) -> dict[str, dict[str, list[int]]]:
    """The figures of a run, read back from its bench.log: per setting, for each half of
    the ordinary messages [failed, distracted (requests and asks only), sent] and for the
    questions [answered, asked]."""
    kinds = {text: (kind, half) for kind, half, text in ORDINARY}
    patterns = dict(QUESTIONS)
    out: dict[str, dict[str, list[int]]] = {}
    for block in re.split(r"\n> \[", log)[1:]:
        head, _, body = block.partition("] ")
        text, _, rest = body.partition("\n")
        reply = "\n".join(line.strip() for line in rest.splitlines()[1:])
        reply = "" if reply == "(no reply)" else reply
        setting = head.split(":")[2].split("-")[0]
        got = out.setdefault(setting, {"tune": [0, 0, 0], "held": [0, 0, 0],
                                        "answered": [0, 0]})
        if text in kinds:
            kind, half = kinds[text]
            got[half][0] += not reply.strip() or bool(FAILED.search(reply))
            got[half][1] += kind != "statement" and bool(DISTRACTED.search(reply))
            got[half][2] += 1
        elif text in patterns:
            got["answered"][0] += bool(re.search(patterns[text], reply, re.I | re.S))
            got["answered"][1] += 1
    return out


def print_report(got: dict[str, dict[str, list[int]]]) -> None:
    for setting, r in got.items():
        print(f"recall {setting:3}: ordinary replies that refused or found nothing: tune "
              f"{r['tune'][0]}/{r['tune'][2]}, held-out {r['held'][0]}/{r['held'][2]}; "
              f"requests answered with talk of notes: tune {r['tune'][1]}, held-out "
              f"{r['held'][1]}; questions about the past answered {r['answered'][0]}/"
              f"{r['answered'][1]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--half", choices=["tune", "held", "both"], default="both")
    parser.add_argument("--settings", default="off,on", help="recall settings to run: off, "
                        "on, ungated (on, without the weak profile's recall_gate)")
    parser.add_argument("--keep", type=Path, default=None, help="where to leave the run")
    parser.add_argument("--report", type=Path, metavar="DIR",
                        help="no run: the figures of the run kept in DIR, read again")
    parser.add_argument("--restart", metavar="CMD", help="a shell command that starts the "
                        "model server again if it dies mid-run")
    args = parser.parse_args(argv)
    if args.report:
        print_report(report((args.report / "bench.log").read_text()))
        return 0
    sys.path.insert(0, str(ROOT))

    home = args.keep or Path(tempfile.mkdtemp(prefix="clawd-recall-"))
    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    from bench_real_model import write_config

    from clawd.config import load_config
    from clawd.frontends.compose import build_runtime
    from clawd.workspace.init import apply, plan_init

    args.memory_search, args.recall, args.api_key = True, True, None
    write_config(state, workspace, args)
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    ordinary = [m for m in ORDINARY if args.half in ("both", m[1])]
    started, stamp = time.perf_counter(), time.strftime("%H%M%S")
    for setting in args.settings.split(","):
        args.recall = setting in ("on", "ungated")
        args.guards = {"recall_gate": False} if setting == "ungated" else None
        write_config(state, workspace, args)  # bench_real_model's, as the other benches use
        runtime = build_runtime(load_config(state / "clawd.json"), None)
        asks = [(f"o{n}", text) for n, (_, _, text) in enumerate(ordinary)]
        asks += [(f"q{n}", question) for n, (question, _) in enumerate(QUESTIONS)]
        for name, text in asks:  # the figures are read back from the log (``report``)
            for k in range(args.samples):
                asked(runtime, f"agent:main:{setting}-{name}-{k}-{stamp}", text, log,
                      args.restart)
        if runtime.memory is not None:
            runtime.memory.close()
    print("\n" + "=" * 72)
    print(f"model {args.model}, window {args.window:,}, {args.samples} samples a message")
    (home / "bench.log").write_text("\n".join(lines) + "\n")
    print_report(report("\n".join(lines)))
    print(f"wall time: {time.perf_counter() - started:.0f} s; the run is in {home}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
