"""Does memory work with a real model? Plant facts, outgrow the window, /new, ask again.

Runs clawd's own chat loop (``Chat.handle``, as ``clawd chat --script`` does) against any
OpenAI-compatible server, in a fresh state dir and a workspace made by ``clawd init``:

1. a conversation that plants ``--facts`` facts among filler requests long enough to cross
   the flush and compaction points ``--cycles`` times (it keeps going until it has, or until
   ``--max-turns``);
   (filler requests carry a pasted paragraph, so that a small window fills in a few turns);
2. ``/new`` (the flush before the end, and the session-memory dump of the last messages);
3. one fresh session per fact, asking for it (``--samples N``: N sessions per fact, since the
   server samples and one answer cannot tell a change from luck).

``--reask DIR`` skips 1 and 2 and asks the facts again in a run kept with ``--keep DIR``
(e.g. after a prompt change, against the same notes).

It prints: facts noted on disk outside the ``/new`` dump (daily logs, MEMORY.md, other notes),
facts recalled in the fresh sessions, blank turns (a user turn that ended with no reply), blank
answers asked again, model requests per user turn, flushes, compactions, errors and wall time,
and leaves the state dir, transcripts and workspace in ``--keep`` (default: a temporary folder
that is printed) so you can read what the model did. Not part of the test suite: it needs a
model server. With the local llama.cpp server of ``../shared/tools/local-llm``:

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_real_model.py --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct --window 8192
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (statement planted in the conversation, question asked later, what the answer must contain)
FACTS = [
    ("By the way, my budget for the Lisbon trip is 2400 euros in total.",
     "What is my budget for the Lisbon trip?", r"2[ ,.]?400"),
    ("Note that my sister Ines arrives in Lisbon on May 14.",
     "When does my sister Ines arrive in Lisbon?", r"May 14|14 May|14th|\b0?5[-/]14\b"),
    ("Our hotel booking reference is KX-4471, please keep it.",
     "What is our hotel booking reference?", r"KX-?4471"),
    ("I am allergic to peanuts, so restaurants must know that.",
     "What food am I allergic to?", r"peanut"),
    ("The flight lands at 09:40 at terminal 2.",
     "At what time does our flight land?", r"9[:.]40"),
]
FILLER = [
    "Suggest a three-day itinerary for Lisbon with one museum a day, in a short list.",
    "Which neighbourhoods of Lisbon are best for walking in the evening? Give five, briefly.",
    "Write a short packing list for a spring city trip.",
    "Explain in a few sentences how the Lisbon tram 28 works and when it is crowded.",
    "Give me four day trips from Lisbon with travel times, as a list.",
    "Which typical Portuguese dishes should we try? List six with one line each.",
    "How do we get from the airport to the city centre? Compare three options.",
    "Suggest a rainy-day plan for Lisbon, in a short list.",
]


# pasted with each filler request, so that the conversation outgrows a small window soon
FORUM = [
    "The old town is hilly and the pavements are polished stone that gets slippery in rain.",
    "Most museums close on Mondays, and several are free on the first Sunday of the month.",
    "Trams and funiculars take the same rechargeable card as the metro and the buses.",
    "Dinner starts late, rarely before eight, and lunch menus are the cheapest good meals.",
    "The riverside is flat and good for cycling from the centre out to the monastery.",
    "Sintra gets very crowded at weekends, so go on a weekday and arrive before ten.",
    "Tipping is modest; rounding up or leaving a few coins is usual in cafes.",
    "Pharmacies are marked with a green cross and many staff speak English.",
    "The viewpoints are best at sunset, and the busiest ones fill up an hour before.",
    "Pastry shops sell custard tarts all day, warm ones usually in the morning.",
    "Beaches along the coast line are reachable by suburban train in under an hour.",
    "Fado houses often have a minimum spend and shows start after nine in the evening.",
]


def pasted(n: int) -> str:
    notes = " ".join(FORUM[(n + i) % len(FORUM)] for i in range(9))
    return f" For context, my notes from a travel forum: {notes}"


@dataclass
class Tally:
    turns: int = 0
    blank_turns: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    flushes: int = 0
    flush_files: list[str] = field(default_factory=list)
    compactions: int = 0


class Counting:
    """A provider that counts the requests it is sent."""

    def __init__(self, inner, counter: list[int]):
        self.inner, self.counter = inner, counter

    def stream(self, request):
        self.counter[0] += 1
        yield from self.inner.stream(request)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def write_config(state: Path, workspace: Path, args: argparse.Namespace) -> None:
    provider = {"api": "openai-completions", "baseUrl": args.base_url,
                "models": [{"id": args.model, "contextWindow": args.window,
                            "maxTokens": args.max_tokens}], "timeoutSeconds": 600}
    if args.api_key:
        provider["apiKey"] = args.api_key
    if getattr(args, "guards", None):
        provider["guards"] = args.guards
    config = {"agents": {"defaults": {
        "workspace": str(workspace), "model": f"bench/{args.model}",
        "memorySearch": {"enabled": args.memory_search, "provider": "local",
                         "recall": {"enabled": args.recall}}}},
        "models": {"providers": {"bench": provider}}}
    (state / "clawd.json").write_text(json.dumps(config, indent=2))


def turn(chat, text: str, tally: Tally, log) -> str:
    from clawd.core.events import Compacted, ErrorEvent, Flushed, Notice, Recalled, TurnDone

    reply = ""
    log(f"\n> {text}")
    for event in chat.handle(text):
        if isinstance(event, TurnDone):
            reply = event.text
            tally.turns += 1
            if not reply.strip() and not event.aborted:
                tally.blank_turns.append(text)
        elif isinstance(event, ErrorEvent):
            tally.errors.append(event.message)
            log(f"  error: {event.message}")
        elif isinstance(event, Notice):
            tally.notices.append(event.text)
            log(f"  notice: {event.text}")
        elif isinstance(event, Flushed):
            tally.flushes += not event.skipped
            tally.flush_files += event.files
            log(f"  flush: {event.files or event.skipped or 'nothing'}")
        elif isinstance(event, Recalled):
            log("  recalled: " + ", ".join(f"{p}:{a}-{b} ({score:.2f})"
                                           for p, a, b, score in event.places))
        elif isinstance(event, Compacted):
            tally.compactions += 1
            log(f"  compacted {event.tokens_before} -> {event.tokens_after} ({event.method})")
    log("  " + (reply.replace("\n", "\n  ") if reply else "(no reply)"))
    return reply


def memory_files(workspace: Path) -> set[Path]:
    return set((workspace / "memory").glob("*.md"))


def notes_outside_dump(workspace: Path, before_new: set[Path]) -> str:
    """Every memory file except the ones ``/new`` saved the session to (new files named
    memory/YYYY-MM-DD-<slug>.md); a note the model filed under such a name itself counts."""
    dump = re.compile(r"^\d{4}-\d{2}-\d{2}-.+\.md$")
    texts = [p.read_text(errors="replace") for p in sorted(memory_files(workspace))
             if p in before_new or not dump.match(p.name)]
    memory = workspace / "MEMORY.md"
    if memory.exists():
        texts.append(memory.read_text(errors="replace"))
    return "\n".join(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--facts", type=int, default=2, help=f"1..{len(FACTS)}")
    parser.add_argument("--cycles", type=int, default=2, help="compactions before /new")
    parser.add_argument("--max-turns", type=int, default=16)
    parser.add_argument("--memory-search", action=argparse.BooleanOptionalAction,
                        default=True, help="offer memory_search/memory_get (the local "
                        "embedder), as clawd does by default")
    parser.add_argument("--recall", action=argparse.BooleanOptionalAction, default=True,
                        help="automatic recall before each turn (memorySearch.recall)")
    parser.add_argument("--samples", type=int, default=1,
                        help="fresh sessions asking each fact (the server samples: one "
                             "answer cannot tell a change from luck)")
    parser.add_argument("--reask", type=Path, default=None, metavar="DIR",
                        help="no conversation: ask the facts again in a run kept in DIR")
    parser.add_argument("--keep", type=Path, default=None, help="where to leave the run")
    parser.add_argument("--quiet", action="store_true", help="no transcript on stdout")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))

    home = args.reask or args.keep or Path(tempfile.mkdtemp(prefix="clawd-real-"))
    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    from clawd.config import load_config
    from clawd.frontends.commands import Chat
    from clawd.frontends.compose import build_runtime
    from clawd.workspace.init import apply, plan_init

    if not args.reask:
        write_config(state, workspace, args)
        apply(plan_init(state, state / "clawd.json", workspace, "main"))
    write_config(state, workspace, args)  # init keeps an existing config; make sure it is ours
    runtime = build_runtime(load_config(state / "clawd.json"), None)
    counter = [0]
    resolve = runtime.models

    def counted(ref: str):
        model = resolve(ref)
        return dataclasses.replace(model, connect=lambda: Counting(model.connect(), counter))

    runtime.models = counted
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        if not args.quiet:
            print(text, flush=True)

    facts = FACTS[:max(1, min(args.facts, len(FACTS)))]
    started = time.perf_counter()
    tally = Tally()
    chat = Chat.open(runtime, "agent:main:main")
    planted, filler_at = 0, 0
    while tally.turns < args.max_turns and not args.reask:
        # plant the facts early, then fill until the cycles are done (facts must survive)
        if planted < len(facts) and tally.turns % 2 == 0:
            turn(chat, facts[planted][0], tally, log)
            planted += 1
        else:
            turn(chat, FILLER[filler_at % len(FILLER)] + pasted(filler_at), tally, log)
            filler_at += 1
        if planted == len(facts) and tally.compactions >= args.cycles:
            break
    chat_turns, chat_requests = tally.turns, counter[0]
    before_new = memory_files(workspace)
    if not args.reask:
        log("\n> /new")
        for event in chat.handle("/new"):
            shown = getattr(event, 'text', '') or getattr(event, 'files', '')
            log(f"  {type(event).__name__}: {shown}")
    noted = notes_outside_dump(workspace, before_new)
    recalled: list[int] = []
    stamp = time.strftime("%H%M%S")
    for i, (_, question, pattern) in enumerate(facts):
        found = 0
        for k in range(max(args.samples, 1)):
            fresh = Chat.open(runtime, f"agent:main:recall-{i}-{k}-{stamp}")
            found += bool(re.search(pattern, turn(fresh, question, tally, log), re.I))
        recalled.append(found)
    seconds = time.perf_counter() - started
    if runtime.memory is not None:
        runtime.memory.close()

    retried = sum(line.count('"retried": true') + line.count('"retried":true')
                  for p in (state / "agents" / "main" / "sessions").glob("*.jsonl")
                  for line in p.read_text().splitlines())
    on_disk = [bool(re.search(p, noted, re.I)) for _, _, p in facts]
    print("\n" + "=" * 72)
    print(f"model {args.model} at {args.base_url}, window {args.window:,}, "
          f"maxTokens {args.max_tokens}")
    if not args.reask:  # asked again only: the conversation and the notes are the run's
        print(f"chat: {chat_turns} user turns, {chat_requests} model requests "
              f"({chat_requests / max(chat_turns, 1):.2f} per turn), {tally.flushes} flushes "
              f"(files: {sorted(set(tally.flush_files)) or 'none'}), {tally.compactions} "
              f"compactions")
        print(f"facts noted on disk outside the /new dump: {sum(on_disk)}/{len(facts)} "
              f"{['yes' if x else 'no' for x in on_disk]}")
    samples = max(args.samples, 1)
    print(f"facts recalled in a fresh session:        {sum(x > 0 for x in recalled)}/"
          f"{len(facts)} " + (f"{['yes' if x else 'no' for x in recalled]}" if samples == 1
                              else f"(answers with the fact, of {samples} sessions each: "
                                   f"{recalled})"))
    print(f"blank turns: {len(tally.blank_turns)}; blank answers asked again: {retried}; "
          f"errors: {len(tally.errors)}; requests in all: {counter[0]} for {tally.turns} "
          f"user turns ({counter[0] / max(tally.turns, 1):.2f} per turn)")
    print(f"wall time: {seconds:.0f} s; the run is in {home}")
    (home / "bench.log").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
