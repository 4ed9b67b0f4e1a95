"""How well each guard tells a weak model's habit from a good reply: precision and recall.

A guard of the weak profile (``clawd.guards``) acts on a model's reply at one point of a step:
the streamed text (``looping``), the whole reply (``clean``: ``text_calls``,
``swallowed_args``, ``stray_text``), a final answer (``answer``: ``blank``, ``echo``,
``note_claim``, ``file_answer``), a step's tool calls (``repeats``: ``repeated_writes``) or
one call (``refuse``: ``repeated_reads``, ``junk_notes``, ``founded_notes``,
``fake_reminders``); the memory flush's replies meet ``flush_retry`` (and the step guards
the flush holds) at the same points. This measures them
on a labelled set of replies, ``tests/data/guard_replies.json``:

- replies of real local models, taken with ``collect``: clawd's own loop runs the
  conversations below against an OpenAI-compatible server with every reply guard switched
  off, and a recorder in their place keeps each point a guard would have seen (the reply and
  the turn as the guard reads it); each conversation ends with ``/new``, so its memory flush
  is recorded too. Every reply is then labelled by hand with the habit it shows (the guard
  that should act), or none;
- good replies written in the style of a strong hosted model (long Markdown, code, JSON,
  tables, a true "I remember …"), which no guard may touch.

``measure`` (the default) runs every reply guard on every case and prints, per guard, how
often it acted on its habit (recall) and how often an act was on its habit (precision), on
two halves fixed by rule before any change (the case id's SHA-1, even: ``tune``, odd:
``held-out``), by model. A guard is tuned on ``tune`` only; both halves are reported.

    python scripts/bench_guards.py                      # the figures, no model needed
    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-0.5b
    python scripts/bench_guards.py collect --model qwen2.5-coder-0.5b-instruct \\
        --label qwen-0.5b --run 3 --out /tmp/replies-0.5b-3.json
    # label it in /tmp/replies-0.5b-3.labels ("<conversation>/<turn>.<step>: habit ..."),
    # then add it to the set (the runs already there stay, unless collected again):
    python scripts/bench_guards.py merge /tmp/replies-0.5b-3.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "guard_replies.json"
LONG = 100  # texts at least this long are kept once, in the set's ``texts``

# Older notes that share topics with the messages below (recall finds them), written before
# the conversations run; the workspace is put back to them before each conversation.
SEED = {
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Planning to move to Lisbon in spring with my "
                            "cat Pixel.\n- Flat budget: 1,400 euros a month.\n",
    "memory/2026-11-22-lisbon-move.md": "# Session: 2026-11-22\n\n## Conversation\n\n"
        "user: We want a flat in Alfama or Graça, near the tram 28.\nassistant: Both are "
        "hilly; Graça is quieter and a little cheaper.\nuser: Pixel needs a balcony.\n",
    "memory/2026-11-27.md": "# 2026-11-27\n\n- Sister Ines visits on December 12 for a "
                            "week.\n- Dentist: Dr. Sousa, Rua Augusta.\n",
}
CONVERSATIONS: dict[str, list[str]] = {
    "remember-dentist": ["Please remember that my dentist appointment is on March 3 at 10am.",
                         "What did I just ask you to remember?"],
    "remember-two": ["Remember: my wifi password hint is 'blue tram'.",
                     "Please remember that too: the landlord is called Mr. Duarte."],
    "note-phone": ["Note that I switched my phone plan to Vodafone.", "Thanks!"],
    "remember-de": ["Merk dir bitte: mein Zug fährt um 7:40."],
    "save-vet": ["Can you save a note that the cat's vet is Dr. Almeida?"],
    "statements": ["My sister Ines lives in Porto.",
                   "I decided to use PostgreSQL 16 for the tidepool project."],
    "moved": ["I moved to Lisbon last month.", "The flat is in Alfama, third floor."],
    "small-talk": ["ok", "thanks"],
    "where-live": ["Where do I live?", "What's my cat's name?"],
    "sister-visit": ["When is my sister visiting?", "What is my flat budget?"],
    "about-me": ["What do you know about me?"],
    "same-question": ["What is the capital of Portugal?", "What is the capital of Portugal?"],
    "octopus": ["Tell me a fun fact about octopuses.", "Tell me another one."],
    "remember-repeat": ["Please remember that my gym is open until 22:00.",
                        "Please remember that my library card expires in June."],
    "read-twice": ["Read memory/2026-11-20.md and summarise it.",
                   "Read it again and tell me the budget."],
    "search-cat": ["Search my notes for anything about the cat."],
    "list-memory": ["List the files in the memory folder."],
    "json": ["Give me a JSON object with fields city and budget for my Lisbon move."],
    "code": ["Write a Python function that checks whether a number is prime."],
    "poem": ["Write a short poem about the hills of Lisbon."],
    "table": ["Make a markdown table of three day trips from Lisbon with travel times."],
    "advice": ["Give me three tips for sleeping better."],
    "count": ["Count from 1 to 40, one number per line."],
    "plan": ["I decided we'll fly on May 2. Suggest what to pack for a week."],
}


# --- the set: cases with long texts kept once --------------------------------------------------

def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def pack(value: Any, texts: dict[str, str]) -> Any:
    """``value`` with each string of ``LONG`` characters or more replaced by ``@<key>``, and
    each message (a transcript entry) by ``#<key>``: a conversation's messages are in the
    view of each of its points."""
    if isinstance(value, str) and len(value) >= LONG:
        texts[key := _key(value)] = value
        return "@" + key
    if isinstance(value, dict) and value.get("type") == "message":
        entry = json.dumps({k: pack(v, texts) for k, v in value.items()}, sort_keys=True,
                           ensure_ascii=False)
        texts[key := _key(entry)] = entry
        return "#" + key
    if isinstance(value, dict):
        return {k: pack(v, texts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [pack(v, texts) for v in value]
    return value


def unpack(value: Any, texts: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("@") and value[1:] in texts:
        return texts[value[1:]]
    if isinstance(value, str) and value.startswith("#") and value[1:] in texts:
        return unpack(json.loads(texts[value[1:]]), texts)
    if isinstance(value, dict):
        return {k: unpack(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [unpack(v, texts) for v in value]
    return value


def view_json(view) -> dict[str, Any]:
    data = {f.name: getattr(view, f.name) for f in dataclasses.fields(view)
            if f.name not in ("messages", "asked")}
    data["messages"] = [m.to_entry() for m in view.messages]
    return data


def view_from(data: dict[str, Any]):
    from clawd.core.messages import Message
    from clawd.guards.base import TurnView

    fields = {k: v for k, v in data.items() if k != "messages"}
    if fields.get("last_calls") is not None:
        fields["last_calls"] = [tuple(c) for c in fields["last_calls"]]
    return TurnView(**fields, messages=[Message.from_entry(m) for m in data["messages"]])


def half(case_id: str) -> str:
    """The half a case is in, by rule: its id's SHA-1, even or odd."""
    return "tune" if int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % 2 == 0 \
        else "held-out"


# --- collect: a real model's replies, at every point a guard would see -------------------------

def provider_config(args: argparse.Namespace, guards: dict[str, bool] | None = None
                    ) -> dict[str, Any]:
    """The model server at ``args.base_url`` under the weak profile, ``guards`` switched."""
    return {"api": "openai-completions", "baseUrl": args.base_url, "timeoutSeconds": 600,
            "profile": "weak", **({"guards": guards} if guards else {}),
            "models": [{"id": args.model, "contextWindow": args.window,
                        "maxTokens": args.max_tokens}]}


def model_home(prefix: str, args: argparse.Namespace, guards: dict[str, bool] | None = None
               ) -> tuple[Path, Path, Path]:
    """A fresh clawd home (``CLAWD_HOME`` set to it) whose config runs ``args.model`` with
    ``provider_config``, and its workspace as ``clawd init`` makes it: (home, state,
    workspace)."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    state, workspace = home / "state", home / "workspace"
    state.mkdir()
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    sys.path.insert(0, str(ROOT))
    from clawd.workspace.init import apply, plan_init

    config = {"agents": {"defaults": {"workspace": str(workspace), "model": f"m/{args.model}",
                                      "memorySearch": {"provider": "local"}}},
              "models": {"providers": {"m": provider_config(args, guards)}}}
    (state / "clawd.json").write_text(json.dumps(config))
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    (state / "clawd.json").write_text(json.dumps(config))  # init's own left as it was
    return home, state, workspace


def collect(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from clawd.config import load_config
    from clawd.config.schema import GUARD_NAMES
    from clawd.core.events import Flushed, TurnDone
    from clawd.frontends.commands import Chat
    from clawd.frontends.compose import build_runtime
    from clawd.guards import profile as profiles
    from clawd.guards.base import Guards

    step_off = {name: False for name in profiles.STEP_GUARDS}
    assert set(step_off) <= set(GUARD_NAMES)
    home, state, workspace = model_home("clawd-guards-", args, step_off)

    cases: list[dict[str, Any]] = []
    where = {"conversation": "", "turn": 0, "step": 0}

    def record(point: str, reply, view=None, **extra: Any) -> None:
        case = {"id": f"{args.label}.{args.run}/{where['conversation']}/{where['turn']}."
                      f"{where['step']}/{point}",
                "model": args.label, "point": point, "reply": reply.to_entry(), **extra}
        if view is not None:
            case["view"] = view_json(view)
        cases.append(case)

    class Recorder(Guards):
        """No guard acts; each point one would act at is recorded (a flush's with its
        ``flush``: what its ``FlushRetry`` would be given)."""

        def __init__(self, flush: dict[str, Any] | None = None):
            super().__init__()
            self.flush, self.prefix = flush, "flush-" if flush is not None else ""

        def clean(self, reply):
            where["step"] += 1
            record("clean", reply)
            return reply

        def answer(self, reply, turn):
            more = {"flush": self.flush} if self.flush is not None else {}
            record(f"{self.prefix}answer", reply, turn, **more)
            return None

        def repeats(self, reply, turn):
            record(f"{self.prefix}repeats", reply, turn)
            return False

        def refuse(self, reply, turn):
            record(f"{self.prefix}refuse", reply, turn)
            return {}

    def flush_recorder(seen, today, summarised: bool) -> Recorder:
        return Recorder({"seen": [m.to_entry() for m in seen], "today": today.isoformat(),
                         "summarised": summarised})

    profiles.Profile.step_guards = lambda self: Recorder()  # type: ignore[method-assign]
    profiles.Profile.flush_guards = (  # type: ignore[method-assign]
        lambda self, seen, today, *, summarised: flush_recorder(seen, today, summarised))
    runtime = build_runtime(load_config(state / "clawd.json"), None)
    chosen = args.only or list(CONVERSATIONS)
    for name in chosen:
        if (workspace / "memory").exists():
            shutil.rmtree(workspace / "memory")
        for path, text in SEED.items():
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(text)
        chat = Chat.open(runtime, f"agent:main:{name}")
        for n, message in enumerate(CONVERSATIONS[name], 1):
            where.update(conversation=name, turn=n, step=0)
            print(f"> [{name}] {message}", flush=True)
            for event in chat.handle(message):
                if isinstance(event, TurnDone):
                    print("  " + (event.text or "(nothing)").replace("\n", "\n  ")[:600],
                          flush=True)
        where.update(turn="new", step=0)  # the flush before the session ends
        for event in chat.handle("/new"):
            if isinstance(event, Flushed):
                print(f"  /new: flush wrote {event.files or 'nothing'}", flush=True)
    if runtime.memory is not None:
        runtime.memory.close()
    texts: dict[str, str] = {}
    out = {"texts": {}, "cases": [pack({**c, "habit": None}, texts) for c in cases]}
    out["texts"] = texts
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cases)} points of {len(chosen)} conversations in {args.out}; "
          f"the run is in {home}")
    return 0


# --- merge: collected replies, their labels and the strong-style cases into the set ------------

# the habits a point can show: those of the guards that act there
AT_POINT = {"clean": ("looping", "text_calls", "swallowed_args", "stray_text"),
            "answer": ("blank", "echo", "note_claim", "file_answer"),
            "repeats": ("repeated_writes",),
            "refuse": ("repeated_reads", "junk_notes", "founded_notes", "fake_reminders"),
            "flush-answer": ("flush_retry",), "flush-repeats": ("repeated_writes",),
            "flush-refuse": ("repeated_reads", "junk_notes", "founded_notes")}


def read_labels(path: Path) -> dict[str, list[str]]:
    """A labels file: one line per step that shows a habit, ``<conversation>/<turn>.<step>:
    habit habit``; a step not listed shows none."""
    labels = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            step, _, habits = line.partition(":")
            labels[step.strip()] = habits.split()
    return labels


def strong_cases(instructions: str) -> list[dict[str, Any]]:
    """The good replies of ``guard_cases.py`` as cases, at each point a guard sees them."""
    from guard_cases import CASES

    from clawd.core.messages import Message, ToolCall, new_id
    from clawd.guards.base import TurnView
    from clawd.guards.step_guards import calls_of

    cases = []
    for name, text, reply_text, calls, wrote, before in CASES:
        history = [Message(role, [], id=new_id()) for role, _ in before]
        for message, (_, said) in zip(history, before, strict=True):
            message.content = Message.user(said).content
        reply = Message.assistant(reply_text, [ToolCall(f"c{i}", n, a)
                                               for i, (n, a) in enumerate(calls)])
        view = TurnView(text=text, offers_writes=True, wrote=wrote, daily_log=
                        "memory/2026-11-28.md", instructions=instructions,
                        messages=[*history, Message.user(text)])
        if name == "exec-poll":  # the step before ran the same command
            view.last_calls = calls_of(reply)
        points = ["clean"] + (["repeats", "refuse"] if calls else ["answer"])
        for point in points:
            cases.append({"id": f"strong-style.1/{name}/1.1/{point}", "model": "strong-style",
                          "point": point, "reply": reply.to_entry(), "view": view_json(view),
                          "habit": []})
    return cases


def merge(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    texts: dict[str, str] = {}
    cases: list[dict[str, Any]] = []
    instructions = ""
    runs = set()
    for path in args.collected:
        runs |= {c["id"].split("/", 1)[0] for c in json.loads(path.read_text())["cases"]}
    if args.data.exists():  # the runs already in the set stay, unless collected again
        kept = json.loads(args.data.read_text())
        for case in kept["cases"]:
            run = case["id"].split("/", 1)[0]
            if run not in runs and not run.startswith("strong-style"):
                cases.append(pack(unpack(case, kept["texts"]), texts))
    for path in args.collected:
        data = json.loads(path.read_text())
        labels = read_labels(path.with_suffix(".labels"))
        for case in data["cases"]:
            case = unpack(case, data["texts"])
            step = case["id"].split("/", 1)[1].rsplit("/", 1)[0]
            case["habit"] = [h for h in labels.get(step, []) if h in AT_POINT[case["point"]]]
            instructions = instructions or (case.get("view") or {}).get("instructions", "")
            cases.append(pack(case, texts))
        unknown = {h for hs in labels.values() for h in hs} - {
            h for hs in AT_POINT.values() for h in hs}
        if unknown:
            raise SystemExit(f"{path}: unknown habits {sorted(unknown)}")
    cases += [pack(c, texts) for c in strong_cases(instructions)]
    args.data.write_text(json.dumps({"texts": texts, "cases": cases}, indent=None,
                                    ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(cases)} cases in {args.data}")
    return 0


# --- measure -----------------------------------------------------------------------------------

def guards() -> dict[str, type]:
    """The guards measured: the step guards, and the flush's own."""
    from clawd.guards.flush_retry import FlushRetry
    from clawd.guards.profile import STEP_GUARDS

    return {**STEP_GUARDS, "flush_retry": FlushRetry}


def fired(name: str, case: dict[str, Any], turns: dict[Any, Any]) -> bool | None:
    """Whether guard ``name`` acts on the case (None: it does not look at that point). The
    points of one turn share one view and one guard, as in the loop (a guard may keep what
    it saw in a turn)."""
    from datetime import date

    from clawd.core.messages import Message

    point, reply = case["point"], Message.from_entry(case["reply"])
    if name not in AT_POINT[point]:
        return None
    if point == "clean":
        if name == "looping":
            return streams_loop(reply.text)
        before = json.dumps(reply.to_entry(), sort_keys=True)
        return json.dumps(guards()[name]().clean(reply).to_entry(), sort_keys=True) != before
    turn = case["id"].rsplit("/", 1)[0].rsplit(".", 1)[0] + point.partition("-")[1]
    if name == "flush_retry":
        flush = case["flush"]
        make = lambda: guards()[name]([Message.from_entry(e) for e in flush["seen"]],  # noqa: E731
                                      date.fromisoformat(flush["today"]),
                                      summarised=flush["summarised"])
    else:
        make = guards()[name]
    view, guard = turns.setdefault((turn, name), (view_from(case["view"]), make()))
    view.__dict__.update(view_from(case["view"]).__dict__)
    kind = point.removeprefix("flush-")
    if kind == "answer":
        return guard.answer(reply, view) is not None
    if kind == "repeats":
        return guard.repeats(reply, view)
    return any([guard.refuse(call, view) is not None for call in reply.tool_calls])


def streams_loop(text: str) -> bool:
    """Whether the loop guard stops ``text`` as it streams in small deltas."""
    from clawd.guards.step_guards import Looping

    guard, parts = Looping(), []
    guard.new_reply()
    for at in range(0, len(text), 8):
        parts.append(text[at:at + 8])
        if guard.looping(parts) is not None:
            return True
    return False


def measure(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    data = json.loads(args.data.read_text())
    cases = [unpack(c, data["texts"]) for c in data["cases"]]
    unlabelled = [c["id"] for c in cases if c.get("habit") is None]
    if unlabelled:
        print(f"{len(unlabelled)} cases have no label yet, e.g. {unlabelled[0]}")
        return 2
    judged = []  # (guard, model, id, habit, acted)
    turns: dict[Any, Any] = {}
    for case in cases:
        for name in guards():
            acted = fired(name, case, turns)
            if acted is not None:
                judged.append((name, case["model"], case["id"], name in case["habit"], acted))
    models = sorted({c["model"] for c in cases})
    per_model = ", ".join(f"{m}: {sum(c['model'] == m for c in cases)}" for m in models)
    print(f"{len(cases)} labelled points ({per_model})")
    wrong = print_table(judged, list(guards()))
    if args.verbose:
        print("\n".join(wrong))
    return 0


def print_table(judged: list[tuple[str, str, str, bool, bool]], names: list[str]) -> list[str]:
    """Precision and recall per guard (in ``names``' order), half and model, of points
    judged ``(guard, model, id, habit, acted)``; returns the misses and false acts."""
    # (guard, half, model) -> [true positives, false positives, false negatives, habit cases,
    # points looked at]
    tally: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    wrong: list[str] = []
    for name, model, point, habit, acted in judged:
        for key in ((name, half(point), model), (name, "all", "all")):
            counts = tally[key]
            counts[0] += acted and habit
            counts[1] += acted and not habit
            counts[2] += habit and not acted
            counts[3] += habit
            counts[4] += 1
        if acted != habit:
            wrong.append(f"{'missed' if habit else 'false'} {name}: {point}")
    models = sorted({model for _, model, *_ in judged})
    print(f"{'guard':16} {'half':9} {'model':12} {'points':>6} {'habit':>5} {'acted':>5} "
          f"{'precision':>9} {'recall':>6}")
    for name in names:
        for part in ("tune", "held-out", "all"):
            for model in (models if part != "all" else ["all"]):
                tp, fp, fn, n, seen = tally.get((name, part, model), [0, 0, 0, 0, 0])
                if not (tp or fp or n) and part != "all":
                    continue
                precision = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
                recall = f"{tp / n:.2f}" if n else "-"
                print(f"{name:16} {part:9} {model:12} {seen:6} {n:5} {tp + fp:5} "
                      f"{precision:>9} {recall:>6}")
    return wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("collect", help="record a real model's replies (needs a server)")
    run.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    run.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    run.add_argument("--label", default=None, help="the model's name in the set")
    run.add_argument("--run", type=int, default=1, help="the run's number in the ids")
    run.add_argument("--window", type=int, default=8192)
    run.add_argument("--max-tokens", type=int, default=400)
    run.add_argument("--only", nargs="*", choices=list(CONVERSATIONS))
    run.add_argument("--out", type=Path, required=True)
    join = sub.add_parser("merge", help="add collected replies (each with its .labels file "
                                        "beside it) to the set, with guard_cases.py")
    join.add_argument("collected", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("-v", "--verbose", action="store_true", help="list each miss")
    args = parser.parse_args(argv)
    if args.command == "collect":
        args.label = args.label or args.model
        return collect(args)
    if args.command == "merge":
        return merge(args)
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
