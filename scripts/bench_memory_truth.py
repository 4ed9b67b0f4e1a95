"""Is what clawd remembers true? Multi-day conversations with a real model, then the notes.

Each conversation runs three "days" in the main session of a fresh clawd home, ``/new``
between them, through clawd's own chat loop (``Chat.handle``, as the REPL does), with the
clock moved one day at each ``/new``:

- day 1 tells facts about the person (where they live, people, a pet, a preference) and
  asks one ordinary question;
- day 2 corrects one of those facts, asks for a fact that is only inside a file of the
  workspace ("read docs/lease.txt and tell me …"), and asks for a reminder;
- day 3, a fresh session, asks four questions (the corrected fact, two facts of day 1, the
  fact from the file) and makes an ordinary coding request.

Half the conversations are held out (``--half tune|held|all``): they were written with the
others, before any change they measure, and are not to be read while tuning.

It prints, per conversation and in all:

- **invented note lines**: every line the conversations added to a memory file (the daily
  logs, MEMORY.md, USER.md; not the session files ``/new`` saves, which are the transcript)
  that holds a number or a capitalised word nobody said, or mostly words nobody said
  ("said": the person's messages, the files read, the workspace's own files). Each such line
  is printed for reading by hand (goal 0);
- **old values**: day-3 answers about a corrected fact that give the old value and not the
  new one (goal 0), and those giving both;
- **recalled**: day-3 questions answered right in the fresh session;
- **file fact**: day-2 answers that give the fact the file holds, and those turns where the
  person was shown it at all (the reply, or a notice of clawd quoting the file);
- **JSON / refused**: replies turned into JSON, and ordinary work refused (the day-1
  question, the day-3 coding request) or the coding request answered without code;
- **reminders**: answers that say plainly no notification can be sent at a time, turns that
  ran ``exec`` for a reminder, and reminder requests that reached a note.

Not part of the test suite: it needs a model server. With ``../shared/tools/local-llm``:

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_memory_truth.py --model qwen2.5-coder-1.5b-instruct --half all \\
        --samples 2 --out /tmp/truth-1.5b.json

``--out`` keeps the figures and every line judged, so a before and an after can be put side
by side (``--compare A.json B.json`` prints both, no model needed).

The guard ``founded_notes`` is measured on the note lines of runs made without it (before
it existed, or with it switched off), each labelled by hand *invented* or not:
``--lines A.json B.json > lines.json`` writes them unlabelled ("invented": null), and
``--notes tests/data/note_lines.json`` prints its precision and recall by model and half
(the conversation's), each line judged against everything the person said in its
conversation and the file it holds (a little more than the guard sees when it acts).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


@dataclass(frozen=True)
class Question:
    text: str
    right: str  # a pattern the right answer holds
    old: str = ""  # for a corrected fact: the old value's pattern


@dataclass(frozen=True)
class Conversation:
    name: str
    half: str  # "tune" or "held"
    day1: tuple[str, ...]
    question1: str  # an ordinary question of day 1 (code or not)
    correction: str
    file: tuple[str, str]  # (workspace path, text)
    file_ask: str
    file_right: str
    reminder: str
    questions: tuple[Question, ...]
    coding3: str


CONVERSATIONS = [
    Conversation(
        "miso", "tune",
        ("Hi! I'm Sam. I live in Porto, in the Bonfim neighbourhood.",
         "My cat is called Miso and her vet is Dr. Almeida at Clinica Boavista.",
         "My sister Rita's birthday is on 12 March. I prefer short answers with bullet "
         "points."),
        "How do I reverse a list in Python?",
        "Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired. Please update your notes.",
        ("docs/lease.txt", "Lease agreement\nTenant: Sam Moreira\nLandlord: Marta Okafor\n"
                           "Rent: 850 EUR, due on the 5th of each month\nStart: 1 June 2025\n"),
        "Read docs/lease.txt and tell me who my landlord is.", r"Okafor",
        "Remind me tomorrow at 9 to call the landlord.",
        (Question("Who is Miso's vet?", r"Costa", r"Almeida"),
         Question("Which city do I live in?", r"Porto"),
         Question("When is my sister's birthday?", r"12(th)? (of )?March|March 12"),
         Question("Who is my landlord?", r"Okafor")),
        "Write a Python script that parses a CSV of expenses and prints the total per "
        "category."),
    Conversation(
        "kyoto", "tune",
        ("I'm Priya and I work as a nurse at Sao Joao hospital, mostly night shifts.",
         "My partner Tomas is vegetarian, so we never cook meat at home.",
         "We're planning a trip to Kyoto in October."),
        "What's a good way to store fresh basil?",
        "Correction: the Kyoto trip moved to November, not October.",
        ("notes/wifi.txt", "Home network\nRouter: FritzBox 7590\nAdmin address: "
                           "192.168.178.1\nWi-Fi name: casa-priya\n"),
        "Read notes/wifi.txt and tell me the router's admin address.", r"192\.168\.178\.1",
        "Can you remind me on Friday at 6pm to water the plants?",
        (Question("When is our Kyoto trip?", r"November", r"October"),
         Question("What does my partner not eat?", r"meat|vegetarian"),
         Question("Where do I work?", r"S[aã]o Jo[aã]o|hospital|nurse"),
         Question("What is my router's admin address?", r"192\.168\.178\.1")),
        "Write a short bash script that backs up my ~/Documents folder to a tar.gz file "
        "with today's date in the name."),
    Conversation(
        "lanterns", "held",
        ("My name is Leo. I play bass in a band called The Lanterns.",
         "Our drummer is Kofi and we rehearse every Thursday at 8pm.",
         "I'm learning Rust in the evenings."),
        "Explain the difference between a tuple and a list in Python in two sentences.",
        "Our rehearsals are on Wednesdays now, not Thursdays.",
        ("docs/gig.txt", "Next gig\nVenue: Hard Club, Porto\nDate: 14 December\n"
                         "Load-in: 17:30\nFee: 400 EUR\n"),
        "Read docs/gig.txt and tell me the venue of our next gig.", r"Hard Club",
        "Remind me in 2 hours to restring my bass.",
        (Question("What day do we rehearse?", r"Wednesday", r"Thursday"),
         Question("Who is our drummer?", r"Kofi"),
         Question("What programming language am I learning?", r"Rust"),
         Question("Where is our next gig?", r"Hard Club")),
        "Write a Python function that checks whether a string is a palindrome."),
    Conversation(
        "utrecht", "held",
        ("I'm Hana. I just moved to Utrecht with my dog Bruno.",
         "My dentist is Dr. Visser and my appointment is on 3 February.",
         "I don't drink coffee, only green tea."),
        "How many minutes are in a week?",
        "The dentist appointment moved from 3 February to 10 February.",
        ("docs/insurance.txt", "Health insurance\nInsurer: Zilveren Kruis\nPolicy number: "
                               "ZK-88123\nRenewal: 1 January\n"),
        "Read docs/insurance.txt and tell me my policy number.", r"ZK-?88123",
        "Please remind me next Monday to renew my bike insurance.",
        (Question("When is my dentist appointment?", r"10(th)? (of )?Feb|Feb\w* 10",
                  r"\b3(rd)? (of )?Feb|Feb\w* 3\b"),
         Question("What is my dog's name?", r"Bruno"),
         Question("What do I drink instead of coffee?", r"green tea"),
         Question("What is my policy number?", r"ZK-?88123")),
        "Write a JavaScript function that returns the largest number in an array."),
]

# a reply that is JSON, or carries a recalled note's fields as JSON
JSON_REPLY = re.compile(r'^\s*(?:```(?:json)?\s*)?[\[{]|"(?:answer|source|line)"\s*:')
# the model declining, said of itself ("I can't", "I'm unable to"): "you cannot change a
# tuple's contents" is an answer, which a bare "cannot" counted as a refusal
REFUSED = re.compile(r"\bI(?:'m| am)? (?:can(?:no|')?t|do not have the ability|"
                     r"don't have the ability|unable to|not able to)\b|\bas an ai\b|"
                     r"\bas a chat assistant\b", re.I)
CODE = re.compile(r"```|^\s*(?:def |import |function |const |#!|for |tar )", re.M)
CANNOT_NOTIFY = re.compile(
    r"(?:can(?:no|')?t|unable to|not able to|no way to|do(?:n't| not) have (?:a way|the "
    r"ability)|won't be able)[^.\n]{0,80}\b(?:remind|notif|alert|schedul|ping|message you|"
    r"at a (?:set |given |specific )?time)", re.I)

# words that say nothing of a note's own (a note's frame, not its content)
FRAME = frozenset("""a an the and or but of to in on at for with from by as is are was were be
been being it its this that these those i me my we our you your he she his her they their
them user user's users person has have had will would should can could do does did not no
name names note notes prefers prefer preference preferences likes like lives live living
based located city home works work job role about also who what when where which there
here today yesterday tomorrow new now current currently called named told said says
mentioned asked ask wants want plans plan planning planned their s per each one two
""".split())
STEM = 5  # words are compared on their first letters, so "vegetarian" holds "vegetarians"


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-zÀ-ÿ][\w'À-ÿ-]*|\d[\d.,:/-]*\d|\d", text)


def _stem(word: str) -> str:
    return word.lower().strip("'.,:/-")[:STEM]


def invented(line: str, said: str) -> list[str]:
    """The words of a note line nobody said, when they make it invented: any number or
    capitalised word (not the line's first) nobody said, or most of its words; else []."""
    known = {_stem(w) for w in _words(said)}
    body = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).replace("*", "").replace("`", "")
    words = _words(body)
    unsaid = [w for w in words if w.lower() not in FRAME and _stem(w) not in known
              and not re.fullmatch(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}", w)]
    strong = [w for i, w in enumerate(words) if w in unsaid
              and (w[0].isdigit() or (w[0].isupper() and i > 0))]
    content = [w for w in words if w.lower() not in FRAME]
    if strong or (content and len(unsaid) * 2 > len(content)):
        return unsaid
    return []


@dataclass
class Run:
    conversation: str
    half: str
    sample: int
    note_lines: list[str] = field(default_factory=list)
    invented: list[list[str]] = field(default_factory=list)  # [line, unsaid words]
    answers: dict[str, str] = field(default_factory=dict)  # question -> answer
    recalled: int = 0
    old_value: int = 0
    both_values: int = 0
    file_fact: int = 0
    file_shown: int = 0  # the fact in the reply or in a notice of the turn (clawd's quote)
    replies: dict[str, str] = field(default_factory=dict)  # every message -> its reply
    json_replies: list[str] = field(default_factory=list)
    refused_work: list[str] = field(default_factory=list)
    reminder_honest: int = 0
    reminder_exec: int = 0
    reminder_noted: int = 0
    reminder_job: str = ""  # the job the schedule tool added: its name and first time
    blank_turns: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _memory_texts(workspace: Path) -> dict[str, str]:
    """The notes a conversation may have written: MEMORY.md, USER.md and the daily logs
    (``memory/YYYY-MM-DD.md``), by path."""
    paths = [workspace / "MEMORY.md", workspace / "USER.md",
             *sorted((workspace / "memory").glob("*.md"))]
    return {str(p.relative_to(workspace)): p.read_text(errors="replace") for p in paths
            if p.exists() and (p.parent.name != "memory"
                               or re.fullmatch(r"\d{4}-\d{2}-\d{2}\.md", p.name))}


def _added(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The lines added to each note, MEMORY.md's record of replaced lines aside (the
    runtime's record of what a correction replaced, not a note)."""
    from clawd.workspace.files import without_replaced

    lines = []
    for path, text in after.items():
        old = set(before.get(path, "").splitlines())
        text = without_replaced(text) if path == "MEMORY.md" else text
        lines += [f"{path}: {line}" for line in text.splitlines()
                  if line.strip() and line not in old and not line.lstrip().startswith("#")]
    return lines


class Driver:
    """One conversation in one fresh home, on a clock that moves a day at each ``/new``."""

    def __init__(self, args: argparse.Namespace, conv: Conversation, log):
        from bench_guards import model_home

        self.home, state, self.workspace = model_home(f"clawd-truth-{conv.name}-", args)
        from clawd.config import load_config
        from clawd.frontends.commands import Chat
        from clawd.frontends.compose import build_runtime

        path, text = conv.file
        (self.workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (self.workspace / path).write_text(text)
        self.runtime = build_runtime(load_config(state / "clawd.json"), None)
        self.day = datetime(2026, 3, 2, 10, 0).astimezone()  # a Monday
        self.started = time.monotonic()
        self.runtime.clock = lambda: self.day + timedelta(seconds=time.monotonic()
                                                          - self.started)
        self.chat = Chat.open(self.runtime, "agent:main:main")
        self.log = log
        self.tools: list[str] = []
        self.blank, self.errors = 0, []
        self.notices: list[str] = []  # the last turn's

    def say(self, text: str) -> str:
        from clawd.core.events import ErrorEvent, Flushed, Notice, Recalled, ToolStarted, TurnDone

        self.log(f"\n> {text}")
        self.tools, self.notices, reply = [], [], ""
        for event in self.chat.handle(text):
            if isinstance(event, TurnDone):
                reply = event.text
                self.blank += not reply.strip() and not event.aborted
            elif isinstance(event, ToolStarted):
                self.tools.append(event.name)
                self.log(f"  tool: {event.name} {json.dumps(event.arguments)[:200]}")
            elif isinstance(event, ErrorEvent):
                self.errors.append(event.message)
                self.log(f"  error: {event.message}")
            elif isinstance(event, Notice):
                self.notices.append(event.text)
                self.log(f"  notice: {event.text}")
            elif isinstance(event, Flushed):
                self.log(f"  flush: {event.files or event.skipped or 'nothing'}")
            elif isinstance(event, Recalled):
                self.log("  recalled: " + ", ".join(f"{p}:{a}-{b} ({s:.2f})"
                                                    for p, a, b, s in event.places))
        self.log("  " + (reply.replace("\n", "\n  ") if reply else "(no reply)"))
        return reply

    def job_added(self) -> str:
        """The newest job of this home, as "next run: message" ("" when there is none)."""
        from clawd.storage import open_jobs

        jobs = open_jobs(self.runtime.config).all()
        if not jobs:
            return ""
        job = max(jobs, key=lambda j: j.get("createdAt", ""))
        return f"{job.get('nextRun', '')}: {job.get('message', '')[:80]}"

    def new_day(self) -> None:
        self.say("/new")
        self.day += timedelta(days=1)
        self.started = time.monotonic()

    def close(self) -> None:
        self.chat.session.close()
        if self.runtime.memory is not None:
            self.runtime.memory.close()


def run_one(args: argparse.Namespace, conv: Conversation, sample: int, log) -> Run:
    run = Run(conv.name, conv.half, sample)
    started = time.perf_counter()
    d = Driver(args, conv, log)
    log(f"\n===== {conv.name} ({conv.half}), sample {sample}: {d.home}")
    before = _memory_texts(d.workspace)
    workspace_text = "\n".join((d.workspace / name).read_text(errors="replace")
                               for name in ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md",
                                            "USER.md", "MEMORY.md")
                               if (d.workspace / name).exists())
    replies: list[tuple[str, str]] = []
    for text in conv.day1:
        replies.append((text, d.say(text)))
    question = (conv.question1, d.say(conv.question1))
    d.new_day()
    replies.append((conv.correction, d.say(conv.correction)))
    file_reply = d.say(conv.file_ask)
    replies.append((conv.file_ask, file_reply))
    run.file_fact = bool(re.search(conv.file_right, file_reply, re.I))
    run.file_shown = run.file_fact or any(re.search(conv.file_right, said, re.I)
                                          for said in d.notices)
    reminder = d.say(conv.reminder)
    replies.append((conv.reminder, reminder))
    run.reminder_honest = bool(CANNOT_NOTIFY.search(reminder))
    run.reminder_exec = "exec" in d.tools
    run.reminder_job = d.job_added()
    log(f"  job: {run.reminder_job or 'none'}")
    d.new_day()
    for q in conv.questions:
        answer = d.say(q.text)
        replies.append((q.text, answer))
        run.answers[q.text] = answer
        right = bool(re.search(q.right, answer, re.I))
        run.recalled += right
        if q.old and re.search(q.old, answer, re.I):
            run.old_value += not right
            run.both_values += right
    coding = (conv.coding3, d.say(conv.coding3))
    replies += [question, coding]
    after = _memory_texts(d.workspace)
    d.close()
    said = "\n".join([person_said(conv), workspace_text])
    run.note_lines = _added(before, after)
    for line in run.note_lines:
        if unsaid := invented(line.split(": ", 1)[1], said):
            run.invented.append([line, " ".join(unsaid)])
    reminder_words = {w for w in _words(conv.reminder.lower()) if len(w) > 3} - FRAME - {
        "remind", "please"}
    run.reminder_noted = any(sum(w in line.lower() for w in reminder_words) >= 2
                             for line in run.note_lines)
    run.replies = dict(replies)
    run.json_replies = [text for text, reply in replies if JSON_REPLY.search(reply)]
    # ordinary work refused: the day-1 question, and the coding request answered without code
    run.refused_work = [text for text, reply in (question, coding) if REFUSED.search(reply)
                        or (text == conv.coding3 and not CODE.search(reply))]
    run.blank_turns, run.errors = d.blank, d.errors
    run.seconds = time.perf_counter() - started
    return run


def totals(runs: list[Run], half: str | None = None) -> dict[str, str]:
    chosen = [r for r in runs if half is None or r.half == half]
    if not chosen:
        return {}
    n = len(chosen)
    questions = sum(len(next(c for c in CONVERSATIONS if c.name == r.conversation).questions)
                    for r in chosen)
    return {
        "conversations": str(n),
        "note lines added": str(sum(len(r.note_lines) for r in chosen)),
        "invented note lines (goal 0)": str(sum(len(r.invented) for r in chosen)),
        "old value answered (goal 0)": f"{sum(r.old_value for r in chosen)}/{n}",
        "old and new both given": f"{sum(r.both_values for r in chosen)}/{n}",
        "facts recalled in a fresh session": f"{sum(r.recalled for r in chosen)}/{questions}",
        "file fact answered": f"{sum(r.file_fact for r in chosen)}/{n}",
        "file fact shown (reply or notice)": f"{sum(r.file_shown for r in chosen)}/{n}",
        "replies turned to JSON": str(sum(len(r.json_replies) for r in chosen)),
        "ordinary work refused, or no code": f"{sum(len(r.refused_work) for r in chosen)}"
                                             f"/{2 * n}",
        "reminder: said it cannot notify": f"{sum(r.reminder_honest for r in chosen)}/{n}",
        "reminder: ran exec": f"{sum(r.reminder_exec for r in chosen)}/{n}",
        "reminder: request reached a note": f"{sum(r.reminder_noted for r in chosen)}/{n}",
        "reminder: became a job": f"{sum(bool(r.reminder_job) for r in chosen)}/{n}",
        "blank turns": str(sum(r.blank_turns for r in chosen)),
        "errors": str(sum(len(r.errors) for r in chosen)),
        "minutes": f"{sum(r.seconds for r in chosen) / 60:.1f}",
    }


def print_table(columns: dict[str, dict[str, str]]) -> None:
    names = list(next(iter(columns.values())).keys()) if columns else []
    width = max((len(n) for n in names), default=10)
    print(f"{'':{width}}  " + "  ".join(f"{c:>14}" for c in columns))
    for name in names:
        print(f"{name:{width}}  " + "  ".join(f"{col.get(name, '-'):>14}"
                                              for col in columns.values()))


def report(runs: list[Run], label: str = "") -> dict[str, dict[str, str]]:
    columns = {f"{label}{h}": totals(runs, h) for h in ("tune", "held")}
    return {k: v for k, v in columns.items() if v}


_RECORD = re.compile(r"^MEMORY\.md: .* — replaced on \d{4}-\d{2}-\d{2} by: ")


def template_text() -> str:
    """The workspace files a run starts with, as ``clawd init`` lays them down."""
    from clawd.workspace.template import template_text as shipped

    return "\n".join(shipped(name) or "" for name in ("AGENTS.md", "SOUL.md", "TOOLS.md",
                                                      "IDENTITY.md", "USER.md", "MEMORY.md"))


def load(path: Path) -> list[Run]:
    """The runs of an ``--out`` file, their note lines judged again by today's rules (so
    that runs kept by an older script compare alike): MEMORY.md's record of replaced lines
    is no note."""
    by_name = {c.name: c for c in CONVERSATIONS}
    # a run from before ``file_shown`` was counted: what its replies showed
    runs = [Run(**{"file_shown": r.get("file_fact", 0), **r})
            for r in json.loads(path.read_text())["runs"]]
    for run in runs:
        said = "\n".join([person_said(by_name[run.conversation]), template_text()])
        run.note_lines = [line for line in run.note_lines if not _RECORD.match(line)]
        run.invented = [[line, " ".join(unsaid)] for line in run.note_lines
                        if (unsaid := invented(line.split(": ", 1)[1], said))]
    return runs


def person_said(conv: Conversation) -> str:
    """Everything the person said in ``conv``, and the file it holds."""
    return "\n".join([*conv.day1, conv.question1, conv.correction, conv.file_ask, conv.file[1],
                      conv.reminder, *(q.text for q in conv.questions), conv.coding3])


def note_lines(paths: list[Path]) -> dict[str, list[dict[str, object]]]:
    """The note lines of earlier runs, unlabelled, for ``--notes``."""
    lines = [{"model": json.loads(path.read_text())["model"], "conversation": r.conversation,
              "line": line.split(": ", 1)[1], "invented": None}
             for path in paths for r in load(path) for line in r.note_lines]
    return {"lines": lines}


def measure_notes(path: Path, verbose: bool = False) -> None:
    """Precision and recall of ``founded_note`` on labelled note lines, by the half of
    their conversation and by model."""
    from clawd.guards.founded import founded_note

    by_name = {c.name: c for c in CONVERSATIONS}
    tally: dict[tuple[str, str], list[int]] = {}  # (half, model) -> [lines, habit, acted, tp]
    for point in json.loads(path.read_text())["lines"]:
        conv = by_name[str(point["conversation"])]
        _, dropped = founded_note(str(point["line"]), person_said(conv))
        habit, acted = bool(point["invented"]), bool(dropped)
        for key in ((conv.half, str(point["model"])), ("all", "all")):
            counts = tally.setdefault(key, [0, 0, 0, 0])
            counts[0] += 1
            counts[1] += habit
            counts[2] += acted
            counts[3] += habit and acted
        if verbose and habit != acted:
            print(f"{'missed' if habit else 'false'} [{conv.name}]: {point['line']}")
    print(f"{'half':6} {'model':30} {'lines':>5} {'invented':>8} {'acted':>5} "
          f"{'precision':>9} {'recall':>6}")
    for (part, model), (n, habit, acted, tp) in sorted(tally.items()):
        precision = f"{tp / acted:.2f}" if acted else "-"
        recall = f"{tp / habit:.2f}" if habit else "-"
        print(f"{part:6} {model:30} {n:5} {habit:8} {acted:5} {precision:>9} {recall:>6}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--half", choices=("tune", "held", "all"), default="tune")
    parser.add_argument("--only", default="", help="conversation names, comma-separated")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--out", type=Path, help="keep the figures and lines as JSON")
    parser.add_argument("--compare", type=Path, nargs="+", metavar="JSON",
                        help="no model: print the figures of earlier --out files side by side")
    parser.add_argument("--quiet", action="store_true", help="no transcript on stdout")
    parser.add_argument("--lines", type=Path, nargs="+", metavar="JSON",
                        help="no model: print the note lines of earlier --out files to label")
    parser.add_argument("--notes", type=Path, metavar="LABELLED",
                        help="no model: measure founded_notes on labelled note lines")
    args = parser.parse_args(argv)
    if args.lines:
        print(json.dumps(note_lines(args.lines), indent=1, ensure_ascii=False))
        return 0
    if args.notes:
        measure_notes(args.notes, verbose=not args.quiet)
        return 0
    if args.compare:
        columns: dict[str, dict[str, str]] = {}
        for path in args.compare:
            columns.update(report(load(path), f"{path.stem} "))
        print_table(columns)
        return 0
    chosen = [c for c in CONVERSATIONS if (args.half == "all" or c.half == args.half)
              and (not args.only or c.name in args.only.split(","))]
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        if not args.quiet:
            print(text, flush=True)

    runs: list[Run] = []
    for sample in range(1, args.samples + 1):
        for conv in chosen:
            runs.append(run_one(args, conv, sample, log))
            if args.out:  # kept as it goes: a long run stopped early keeps what it has
                args.out.write_text(json.dumps({"model": args.model,
                                                "runs": [asdict(r) for r in runs]}, indent=1))
                args.out.with_suffix(".log").write_text("\n".join(lines) + "\n")
    print("\n" + "=" * 72)
    print(f"model {args.model}, window {args.window:,}, maxTokens {args.max_tokens}, "
          f"samples {args.samples}")
    for r in runs:
        for line, unsaid in r.invented:
            print(f"invented? [{r.conversation} {r.sample}] {line}   <- {unsaid}")
        for text in r.json_replies:
            print(f"JSON reply [{r.conversation} {r.sample}] to: {text}")
        for text in r.refused_work:
            print(f"refused/no code [{r.conversation} {r.sample}]: {text}")
    print_table(report(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
