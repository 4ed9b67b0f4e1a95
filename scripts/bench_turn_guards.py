"""How well the weak profile's turn guards do their job, on labelled points of real models.

``bench_guards.py`` measures the guards that judge a model's reply. Four more shape a turn
instead; this measures them, each by what it decides:

- ``summary_claims`` leaves out a compaction summary's line that claims what the summarised
  history never said (``guards.junk_notes.founded_summary``). A point is one line of a summary a
  real model wrote of one of ``SUMMARY_TALKS``; its habit is *invented* (labelled by hand:
  a claim the conversation does not make, or a wrong one). The measure also counts the
  user's sentences with a number or name that a left-out line lost (``references_lost``).
- ``flush_words``: when a memory flush asked twice still saved nothing, the facts the user
  told are kept in their words (``context.flush.unsaved_words``). A point is one user
  message of a conversation below (written, with their labels, before any run), at the
  ``/new`` flush that ends it; its habit is *a fact the user told that no note holds* (the
  label's pattern is in no memory file, in no write of the conversation to one, and not in
  the flush's own reply). The guard acts on a message when a line it keeps comes from it.
  A flush it never reaches (one that saved something, or was not asked again) is measured
  too: a fact lost there is its miss.
- ``recall_gate`` sends automatic recall only for messages that ask what notes could
  answer (``loop.recall.wants_recall``). It reads the user's message alone, so its points
  are messages labelled *needs notes* or not (the same for every model); what it saves a
  model from, and costs it, is measured per model by ``bench_recall_harm.py`` (recall
  with the gate and without it, ``--settings ungated,on``).
- ``recall_only`` (``memory_search`` is not offered; recall searched for the message) acts
  on every turn, so it has no precision: ``bench_empty_search.py --what turn --options
  baseline,no-search`` gives turns answered with and without it, per model.

The set is ``tests/data/turn_guard_points.json``. Halves are fixed by rule as in
``bench_guards.py`` (the point id's SHA-1). ``measure`` (the default) prints precision and
recall per guard, half and model; no model is needed.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-0.5b
    python scripts/bench_turn_guards.py summaries --model qwen2.5-coder-0.5b-instruct \\
        --label qwen-0.5b --run 1 --out /tmp/summaries-0.5b.json
    python scripts/bench_turn_guards.py flushes --model qwen2.5-coder-0.5b-instruct \\
        --label qwen-0.5b --run 1 --out /tmp/flushes-0.5b.json
    # label the summaries in /tmp/summaries-0.5b.labels (one invented line's id a line),
    # then add both to the set (runs already there stay, unless collected again):
    python scripts/bench_turn_guards.py merge /tmp/summaries-0.5b.json /tmp/flushes-0.5b.json
    python scripts/bench_turn_guards.py
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_guards import (  # noqa: E402 - the scripts' folder, above
    CONVERSATIONS,
    model_home,
    print_table,
    provider_config,
)
from bench_recall_harm import ORDINARY, QUESTIONS  # noqa: E402

DATA = ROOT / "tests" / "data" / "turn_guard_points.json"

# Conversations to summarise, (user, assistant) turns: what a summary may draw on, and nothing
# else (a project, a move with a cat, a renovation budget with a correction, a book club)
SUMMARY_TALKS = [
    [("I'm building tidepool, a small app that shows tide charts offline.",
      "Nice. Offline means the tide tables must be stored on the device."),
     ("Right. I want it on Android first, iOS later.",
      "Then a cross-platform toolkit could help, or plain Kotlin for Android."),
     ("Let's keep it simple: Kotlin, and SQLite for the tables.",
      "Good choice: SQLite ships with Android and handles tables of that size."),
     ("The harbour data comes from a CSV of 1,200 stations.",
      "Import it once at first start and index the station names."),
     ("Can you suggest a name for the settings screen?",
      "\"Harbour & units\" says what it holds.")],
    [("We're moving to Lisbon in March with our cat Mochi.",
      "Exciting! Moving with a cat needs some planning."),
     ("The flat is in Alfama; the lease starts on 1 March.",
      "Alfama is lovely, if hilly. Noted: the lease starts on 1 March."),
     ("Mochi hates her carrier. Any tips for the flight?",
      "Leave the carrier open at home for a few weeks, with a blanket she knows."),
     ("The vet appointment for her papers is on 9 January.",
      "Good: that leaves time for the papers before March."),
     ("What should I pack first?",
      "Start with what you will not need before the move: books, winter clothes.")],
    [("My budget for the kitchen renovation is 8,500 euros.",
      "That is enough for new cabinets and a worktop if the plumbing stays where it is."),
     ("The plumbing stays. I picked oak for the worktop.",
      "Oak is warm and durable; oil it twice a year."),
     ("The fitter, Rui, starts on 3 February.",
      "Then order the cabinets by mid-January: delivery takes two to three weeks."),
     ("Actually the budget went up to 9,000 because of the sink.",
      "Noted: 9,000 euros now, the sink included.")],
    [("I run the Thursday book club; we read 'The Remains of the Day' next.",
      "A fine choice: restraint and memory make for long discussions."),
     ("There are 7 of us and we meet at Carla's place.",
      "Seven is a good size for everyone to speak."),
     ("Write three discussion questions, please.",
      "1. What does Stevens's loyalty cost him? 2. Is his dignity real? 3. What does the "
      "ending promise?"),
     ("Great. Next month we switch to Tuesdays.",
      "Noted: Tuesdays from next month.")],
]


def messages_of(turns: list[tuple[str, str]]) -> list[Any]:
    """The conversation as messages, with the same times whenever it is made: a summary
    may copy a message's time, and the measure must find it in the history again."""
    from clawd.core.messages import Message

    out = []
    for n, (user, assistant) in enumerate(turns):
        out += [Message.user(user), Message.assistant(assistant)]
        out[-2].timestamp = out[-1].timestamp = f"2026-11-27T18:{n:02d}:00.000Z"
    return out


# Conversations for the memory flush: (message, what a note must hold for the fact to be
# kept) or (message, None) for a request, question or small talk, which must not be kept.
FLUSH_TALKS: dict[str, list[tuple[str, str | None]]] = {
    "dinner": [("Hi! Can you suggest a quick dinner I could cook tonight?", None),
               ("I'm vegetarian, by the way.", r"vegetarian"),
               ("My cat is called Miso.", r"Miso|Mochi"),
               ("What's a good way to keep basil fresh?", None),
               ("My sister works as a pharmacist.", r"pharmacist"),
               ("Write me a two-line poem about rain.", None),
               ("Sorry, I got that wrong: my cat is called Mochi, not Miso.", r"Mochi"),
               ("Thanks! Any tips for a rainy weekend?", None)],
    "work": [("I work as a nurse at Santa Maria hospital.", r"nurse"),
             ("Can you explain what a mutex is, briefly?", None),
             ("My shifts change to nights from next week.", r"night"),
             ("Tell me a joke about cats.", None),
             ("My partner Tiago is a carpenter.", r"Tiago"),
             ("ok thanks", None)],
    "trip": [("We're flying to Tokyo on 14 April.", r"Tokyo"),
             ("What's the time difference between Lisbon and Tokyo?", None),
             ("I prefer aisle seats.", r"aisle"),
             ("Write a packing list for a week of rain.", None),
             ("Actually, the flight is on 16 April, not 14 April.", r"16 April|April 16"),
             ("Great, thanks!", None)],
    "health": [("I'm allergic to penicillin.", r"penicillin"),
               ("How much water should I drink a day?", None),
               ("I run 5 km every morning.", r"5 ?km|\brun"),
               ("Give me a stretching routine for after running.", None),
               ("I don't drink coffee any more.", r"coffee")],
    "garden": [("Can you help me plan a small garden?", None),
               ("Our balcony faces south.", r"south"),
               ("I have two kids, Ana and Pedro.", r"Ana|Pedro"),
               ("Suggest three easy herbs to grow.", None),
               ("Pedro is allergic to bees.", r"bees"),
               ("What's a good name for a tomato plant?", None)],
    "novel": [("I'm writing a novel set in 1920s Porto.", r"novel"),
              ("How long is a typical novel chapter?", None),
              ("The main character is called Amélia.", r"Amélia"),
              ("Write an opening line for a mystery.", None),
              ("I want to finish the first draft by June.", r"June"),
              ("Summarise the three-act structure in two lines.", None)],
}

# Messages for the recall gate, labelled whether a note from before could be what answers
# them (True) or not (False): the messages of bench_recall_harm.py and bench_guards.py,
# with these, written before they were run through the gate.
GATE_MESSAGES: list[tuple[str, bool]] = [
    ("Where did I park the car?", True),
    ("What did we decide about the database?", True),
    ("Remind me what my budget for the kitchen was.", True),
    ("When is my dentist appointment?", True),
    ("Plan my week around the gym and the dentist.", True),
    ("Draft a reply to our landlord about the broken heater.", True),
    ("What's my wifi password hint?", True),
    ("Who is Carla?", True),
    ("Did I tell you my sister's job?", True),
    ("How old is my son?", True),
    ("Write a limerick about a lazy cat.", False),
    ("What is 17 times 23?", False),
    ("Explain recursion to a ten-year-old.", False),
    ("I bought a new bike today.", False),
    ("My flight lands at 18:05.", False),
    ("Give me a recipe for pancakes.", False),
    ("Translate 'thank you very much' into German.", False),
    ("How do I undo the last git commit?", False),
    ("We adopted a dog called Biscuit.", False),
    ("Suggest a title for a blog post about sourdough.", False),
]


def gate_messages() -> list[tuple[str, bool]]:
    """Every labelled message: the ones above, bench_recall_harm's (ordinary: no notes;
    questions: notes) and bench_guards' conversations' (labelled in ``GUARDS_NEED``)."""
    out = list(GATE_MESSAGES)
    out += [(text, False) for _, _, text in ORDINARY]
    out += [(text, True) for text, _ in QUESTIONS]
    said = {m for talk in CONVERSATIONS.values() for m in talk}
    out += [(m, m in GUARDS_NEED) for m in sorted(said)]
    return out


# bench_guards.py's messages that notes could answer (the others cannot: requests to keep,
# statements, small talk, requests of nobody's in particular)
GUARDS_NEED = {
    "What did I just ask you to remember?", "Where do I live?", "What's my cat's name?",
    "When is my sister visiting?", "What is my flat budget?", "What do you know about me?",
    "Read memory/2026-11-20.md and summarise it.", "Read it again and tell me the budget.",
    "Search my notes for anything about the cat.",
    "Give me a JSON object with fields city and budget for my Lisbon move.",
}


# --- collect ------------------------------------------------------------------------------------

def summaries(args: argparse.Namespace) -> int:
    """Each of ``SUMMARY_TALKS`` summarised ``--samples`` times by clawd's
    own compaction; every line the model wrote a point."""
    sys.path.insert(0, str(ROOT))
    from clawd.config import Compaction, parse_config
    from clawd.context.compaction import summarize
    from clawd.context.references import HEADING
    from clawd.providers.registry import make_provider

    config = parse_config(json.dumps({"models": {"providers": {"bench": provider_config(args)}}}))
    provider = make_provider(config, f"bench/{args.model}", env={})
    points = []
    for n, turns in enumerate(SUMMARY_TALKS):
        for k in range(args.samples):
            summary = summarize(provider, messages_of(turns), previous_summary=None,
                                instructions=None, settings=Compaction(),
                                max_tokens=args.max_tokens)
            print(f"\n=== conversation {n}, sample {k} ({summary.method}) ===")
            written = summary.text.split(HEADING)[0]  # not the user's words appended to it
            for i, line in enumerate(written.splitlines()):
                if line.strip() and not line.lstrip().startswith("#"):
                    pid = f"{args.label}.{args.run}/c{n}.s{k}/L{i}"
                    points.append({"id": pid, "model": args.label, "guard": "summary_claims",
                                   "conversation": n, "line": line})
                    print(f"{pid}  {line}")
    args.out.write_text(json.dumps({"points": points}, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(points)} summary lines in {args.out}")
    return 0


def flushes(args: argparse.Namespace) -> int:
    """``FLUSH_TALKS`` through clawd's own loop under the full weak profile, each ended by
    ``/new``; what the flush's fallback is given is recorded each time it runs."""
    home, state, workspace = model_home("clawd-flushes-", args)
    from clawd.config import load_config
    from clawd.core.events import Flushed, Notice, TurnDone
    from clawd.frontends.commands import Chat
    from clawd.frontends.compose import build_runtime
    from clawd.loop import upkeep
    from clawd.workspace.files import memory_files

    points: list[dict[str, Any]] = []
    where = {"talk": ""}
    real = upkeep.unsaved_words

    def point(talk: str, today: date, files: dict[str, str], seen: list, pending: str):
        return {"id": f"{args.label}.{args.run}/{talk}.f{len(points)}", "model": args.label,
                "guard": "flush_words", "talk": talk, "today": today.isoformat(),
                "pending": pending, "files": files, "seen": [m.to_entry() for m in seen]}

    def recorded(files, conversation, today, pending=""):
        kept = real(files, conversation, today, pending=pending)
        points.append({**point(where["talk"], today, {
            rel: files.read(rel) for rel in memory_files(today) if files.read(rel) is not None},
            conversation, pending), "reached": True, "kept": kept})
        return kept

    upkeep.unsaved_words = recorded  # type: ignore[assignment]
    runtime = build_runtime(load_config(state / "clawd.json"), None)
    for name in args.only or list(FLUSH_TALKS):
        shutil.rmtree(workspace / "memory", ignore_errors=True)
        where["talk"] = name
        chat = Chat.open(runtime, f"agent:main:{name}-{args.run}")
        for message, _ in FLUSH_TALKS[name]:
            print(f"> [{name}] {message}", flush=True)
            for event in chat.handle(message):
                if isinstance(event, TurnDone):
                    print("  " + (event.text or "(nothing)").replace("\n", "\n  ")[:300])
        seen = list(chat.session.history.messages)
        for event in chat.handle("/new"):
            if isinstance(event, Flushed):
                print(f"  /new: flush wrote {event.files or 'nothing'}", flush=True)
            elif isinstance(event, Notice):
                print(f"  notice: {event.text}", flush=True)
        if points and points[-1]["talk"] == name:
            print("  fallback kept:\n    " + (points[-1]["kept"] or "nothing")
                  .replace("\n", "\n    "), flush=True)
        else:  # the fallback did not run: the notes as the flush left them
            today = date.today()
            files = {rel: (workspace / rel).read_text() for rel in memory_files(today)
                     if (workspace / rel).exists()}
            points.append({**point(name, today, files, seen, ""), "reached": False})
    if runtime.memory is not None:
        runtime.memory.close()
    args.out.write_text(json.dumps({"points": points}, indent=1, ensure_ascii=False) + "\n")
    print(f"{sum(p['reached'] for p in points)} of {len(points)} flushes reached the fallback, "
          f"in {args.out}; the run is in {home}")
    return 0


# --- merge ----------------------------------------------------------------------------------------

def merge(args: argparse.Namespace) -> int:
    """Collected points into the set; a summary's ``.labels`` file beside it lists the ids
    of its invented lines (every other line is labelled founded)."""
    points: list[dict[str, Any]] = []
    runs = set()
    new: list[dict[str, Any]] = []
    for path in args.collected:
        got = json.loads(path.read_text())["points"]
        labels = path.with_suffix(".labels")
        invented = set()
        if labels.exists():
            invented = {line.split()[0] for line in labels.read_text().splitlines()
                        if line.strip() and not line.startswith("#")}
        for point in got:
            if point["guard"] == "summary_claims":
                if not labels.exists():
                    raise SystemExit(f"{path}: label its summaries in {labels} first")
                point["invented"] = point["id"] in invented
            runs.add((point["guard"], point["id"].split("/", 1)[0]))
            new.append(point)
    if args.data.exists():
        points = [p for p in json.loads(args.data.read_text())["points"]
                  if (p["guard"], p["id"].split("/", 1)[0]) not in runs]
    points += new
    args.data.write_text(json.dumps({"points": points}, indent=None, ensure_ascii=False,
                                    separators=(",", ":")) + "\n")
    print(f"{len(points)} points in {args.data}")
    return 0


# --- measure --------------------------------------------------------------------------------------

def summary_points(point: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    """(id, habit, acted) of one summary line: invented, and left out."""
    from clawd.guards.junk_notes import founded_summary
    from clawd.loop.upkeep import summarised_text

    history = summarised_text(None, messages_of(SUMMARY_TALKS[point["conversation"]]))
    _, left_out = founded_summary(point["line"], history)
    return [(point["id"], point["invented"], bool(left_out))]


def flush_points(point: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    """(id, habit, acted) of each user message of one flush that reached the fallback: a
    fact no note or pending line holds, and a kept line coming from it."""
    from clawd.context.facts import as_note, facts
    from clawd.context.flush import FACT_CHARS, unsaved_words
    from clawd.core.messages import Message
    from clawd.core.textcut import shorten
    from clawd.storage.files.workspace import DiskFiles

    kept: set[str] = set()
    with tempfile.TemporaryDirectory() as root:
        for rel, text in point["files"].items():
            (Path(root) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(root) / rel).write_text(text)
        seen = [Message.from_entry(e) for e in point["seen"]]
        if point["reached"]:  # else the flush kept something, or was not asked again
            kept = set(unsaved_words(DiskFiles(Path(root)), seen, date.fromisoformat(
                point["today"]), pending=point["pending"]).splitlines())
    noted = "\n".join([*point["files"].values(), point["pending"], *written_notes(seen)])
    labels = dict(FLUSH_TALKS[point["talk"]])
    out = []
    for n, message in enumerate(m for m in seen if m.role == "user" and not m.flush):
        pattern = labels.get(message.text)
        habit = pattern is not None and not re.search(pattern, noted, re.I)
        acted = any(f"- {as_note(shorten(f, FACT_CHARS))}" in kept for f in facts(message.text))
        out.append((f"{point['id']}/m{n}", habit, acted))
    return out


def references_lost(points: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per model, [user sentences whose number or name a summary lost to summary_claims,
    user sentences with one]: each summary's lines are put back together and finished as
    ``summarize`` finishes them (the lines left out, then the user's words appended), with
    the guard and without it; a sentence the summary without the guard covers and the one
    with it does not was lost to a left-out line."""
    from clawd.context.references import MAX_CHARS, missing, references, with_users_words
    from clawd.core.textcut import sentences
    from clawd.guards.junk_notes import founded_summary
    from clawd.loop.upkeep import summarised_text

    summaries: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for point in points:
        if point["guard"] == "summary_claims":
            summaries[point["model"], point["id"].rsplit("/", 1)[0]].append(point)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (model, _), lines in summaries.items():
        messages = messages_of(SUMMARY_TALKS[lines[0]["conversation"]])
        text = "\n".join(p["line"] for p in lines)
        kept, left_out = founded_summary(text, summarised_text(None, messages))
        guarded = kept if left_out and kept.strip() else text
        without, with_guard = (with_users_words(t, messages, None, MAX_CHARS)
                               for t in (text, guarded))
        for m in messages:
            for sentence in sentences(m.text) if m.role == "user" else []:
                if any(references(sentence)):
                    out[model][1] += 1
                    out[model][0] += (not any(missing(sentence, without))
                                      and any(missing(sentence, with_guard)))
    return out


def written_notes(seen: list[Any]) -> list[str]:
    """What the conversation's own successful writes put in a memory file: a note, even in
    a file the flush does not read (``memory/2026-11-28-00-00-00.md``)."""
    ok = {m.tool_call_id for m in seen if m.role == "toolResult" and not m.is_error}
    return [str(value) for m in seen if m.role == "assistant" for call in m.tool_calls
            if call.id in ok and call.name in ("write", "edit")
            and str(call.arguments.get("path", "")).lstrip("./").startswith(("memory", "MEMORY"))
            for value in call.arguments.values()]


def gate_points() -> list[tuple[str, bool, bool]]:
    """(id, habit, acted) of each labelled message: needs no notes, and recall held back."""
    from clawd.loop.recall import wants_recall

    return [(f"message/{text}", not needs, not wants_recall(text))
            for text, needs in gate_messages()]


def measure(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    points = json.loads(args.data.read_text())["points"] if args.data.exists() else []
    judged: list[tuple[str, str, str, bool, bool]] = []  # guard, model, id, habit, acted
    for point in points:
        per = summary_points if point["guard"] == "summary_claims" else flush_points
        judged += [(point["guard"], point["model"], *p) for p in per(point)]
    judged += [("recall_gate", "any", *p) for p in gate_points()]
    print(f"{len(judged)} labelled points")
    wrong = print_table(judged, ["summary_claims", "flush_words", "recall_gate"])
    for model, (lost, told) in sorted(references_lost(points).items()):
        print(f"summary_claims, {model}: {lost} of {told} user sentences with a number or name "
              f"(over its summaries) lost to a left-out line")
    if args.verbose:
        print("\n".join(wrong))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    for name in ("summaries", "flushes"):
        run = sub.add_parser(name, help=f"record a real model's {name} (needs a server)")
        run.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
        run.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
        run.add_argument("--label", default=None, help="the model's name in the set")
        run.add_argument("--run", type=int, default=1, help="the run's number in the ids")
        run.add_argument("--window", type=int, default=8192)
        run.add_argument("--max-tokens", type=int, default=700 if name == "summaries" else 400)
        run.add_argument("--samples", type=int, default=2, help="summaries per conversation")
        run.add_argument("--only", nargs="*", choices=list(FLUSH_TALKS))
        run.add_argument("--out", type=Path, required=True)
    join = sub.add_parser("merge", help="add collected points to the set")
    join.add_argument("collected", type=Path, nargs="+")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("-v", "--verbose", action="store_true", help="list each miss")
    args = parser.parse_args(argv)
    if args.command in ("summaries", "flushes"):
        args.label = args.label or args.model
        return summaries(args) if args.command == "summaries" else flushes(args)
    if args.command == "merge":
        return merge(args)
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
