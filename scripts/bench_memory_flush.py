"""How many planted facts survive a long session on disk, with and without the memory flush.

A synthetic conversation (default 300 user turns of filler, with one turn in five reading a
workspace document through the ``read`` tool) carries N distinct facts (default 60: ticket
codes, ports, extensions, versions, host names), planted at evenly spaced turns; one fact in
four appears only inside a document the model reads, never in a chat message. It runs
through the real turn loop (``Session.run_turn``: flush, compaction, file tools, transcript)
with a scripted model on a small context window, so the session crosses many compaction
cycles. The same plan runs twice in one invocation: with the memory flush (on by default)
and with ``memoryFlush.enabled: false`` as the baseline.

The scripted model is derived from each request, never from the list of planted facts:
- on a flush it is an ideal note-taker: every sentence in the request's messages that
  holds an identifier-like token (a word with a digit, or a number of three or more digits)
  and whose identifiers are not in the project context yet (today's daily log as injected)
  is appended to ``memory/YYYY-MM-DD.md`` with ``edit`` (``write`` for a new file), then it
  answers ``NO_REPLY``;
- as the summariser it keeps such sentences from the previous summary and the conversation,
  newest last, within ``--summary-tokens`` (default 800; 0 means no limit), dropping the
  oldest first as a length-bound summary does;
- otherwise it chats (filler without digits) or calls ``read`` when asked to.

Reported per run: the share of facts whose value is on disk (``memory/*.md`` + ``MEMORY.md``),
in the latest compaction summary, in the live history, anywhere (and, of the facts no
longer in the live history, the share on disk); compactions, flushes and
notes; the compression ratio (``tokensBefore / tokensAfter`` of each compaction entry); tokens
per chat request and per user turn (every request of the turn: chat, flush and summary)
before the first compaction and after it (mean, p95), by the loop's own estimator.

    python scripts/bench_memory_flush.py [--turns 300] [--facts 60] [--window 16000]
                                         [--summary-tokens 800] [--seed 3]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

IDENT = re.compile(r"\b[A-Za-z][A-Za-z._-]*\d[A-Za-z0-9._-]*[A-Za-z0-9]\b|\b\d{3,}\b")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WIDTH = 60  # the label column of the report
DAILY = re.compile(r"memory/\d{4}-\d{2}-\d{2}\.md")
WORDS = ("the plan looks reasonable and we should keep moving on the migration while the "
         "team reviews the remaining questions about naming rollout order monitoring and "
         "what to tell support before the release goes out to everyone").split()
THINGS = ("billing export job", "staging database", "vpn gateway", "search cluster",
          "nightly backup", "payments webhook", "analytics pipeline", "mail relay",
          "image cache", "feature flag service", "audit log sink", "build runner pool")
PEOPLE = ("Imogen Varga", "Tariq Osei", "Lena Brandt", "Mateo Ruiz", "Priya Nair",
          "Jonas Falk", "Aiko Mori", "Sven Dahl", "Nadia Haddad", "Owen Pryce")


# --- the plan -----------------------------------------------------------------------------------

@dataclass
class Fact:
    value: str  # the identifier that must survive, exactly
    sentence: str
    in_tool: bool  # only inside a document the model reads


@dataclass
class Turn:
    text: str
    read: str | None = None  # a document to read with the tool, if any
    fact: Fact | None = None


def filler(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def make_fact(k: int, rng: random.Random) -> Fact:
    kind = k % 5
    thing = f"{THINGS[k % len(THINGS)]} {('east', 'west', 'north', 'south', 'core')[k % 5]}"
    if kind == 0:
        value = f"{rng.choice(('OPS', 'INC', 'SEC', 'NET'))}-{1000 + k * 37 + rng.randint(0, 36)}"
        sentence = f"For the record, the ticket for the {thing} is {value}."
    elif kind == 1:
        value = str(20000 + k * 211 + rng.randint(0, 200))
        sentence = f"The {thing} listens on port {value}."
    elif kind == 2:
        value = str(3000 + k * 53 + rng.randint(0, 50))
        person = PEOPLE[k % len(PEOPLE)]
        sentence = f"To reach {person} about the {thing}, dial extension {value}."
    elif kind == 3:
        value = f"v{1 + k % 7}.{k}.{rng.randint(0, 9)}"
        sentence = f"We pinned the {thing} client to {value}."
    else:
        value = f"{thing.split()[0]}-{k:02d}{rng.choice('abcdef')}.internal"
        sentence = f"The host behind the {thing} is {value}."
    return Fact(value, sentence, in_tool=k % 4 == 3)


def make_plan(turns: int, facts: int, seed: int) -> tuple[list[Turn], list[Fact], dict]:
    rng = random.Random(seed)
    planted = [make_fact(k, rng) for k in range(facts)]
    at = {round((k + 0.5) * turns / facts): fact for k, fact in enumerate(planted)}
    docs: dict[str, str] = {}
    plan = []
    for n in range(turns):
        fact = at.get(n)
        if (fact and fact.in_tool) or (not fact and n % 5 == 4):
            name = f"docs/{rng.choice(WORDS)}-{rng.choice(WORDS)}-{chr(97 + n % 26)}" \
                   f"{chr(97 + n // 26 % 26)}.md"
            body = [filler(rng, 40, 90) + "." for _ in range(rng.randint(4, 12))]
            if fact:
                body.insert(rng.randint(1, len(body) - 1), fact.sentence)
            docs[name] = "\n\n".join(body) + "\n"
            plan.append(Turn(f"Please read {name} and tell me what matters. "
                             f"{filler(rng, 10, 40)}", read=name, fact=fact))
        elif fact:
            plan.append(Turn(f"{filler(rng, 20, 80)}. {fact.sentence} {filler(rng, 20, 60)}.",
                             fact=fact))
        else:
            plan.append(Turn(filler(rng, 40, 160) + "."))
    return plan, planted, docs


# --- the scripted model -------------------------------------------------------------------------

def fact_sentences(text: str) -> list[str]:
    """Sentences that hold an identifier-like token, in order, without duplicates."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("["):  # role labels, clip notes: the loop's, not facts
            continue
        for sentence in SENTENCE_END.split(line):
            sentence = sentence.strip().lstrip("-* ").strip()
            if IDENT.search(sentence):
                out.append(sentence)
    return list(dict.fromkeys(out))


class Model:
    """Chat, ideal note-taker on flush, identifier-keeping summariser (see the docstring)."""

    def __init__(self, summary_tokens: int):
        self.summary_tokens = summary_tokens
        self.kinds: list[str] = []
        self.notes = 0

    def __call__(self, request):
        from clawd.config import DEFAULT_FLUSH_SYSTEM

        kind = ("summary" if not request.tools
                else "flush" if DEFAULT_FLUSH_SYSTEM in request.system[-1] else "chat")
        self.kinds.append(kind)
        if kind == "summary":
            return self.summarise(request)
        if kind == "flush":
            return self.take_notes(request) if request.messages[-1].role == "user" \
                else "NO_REPLY"
        return self.chat(request)

    def chat(self, request):
        from clawd.providers.scripted import Reply, tool

        last = request.messages[-1]
        rng = random.Random(len(request.messages))
        if last.role == "user" and (m := re.search(r"read (docs/\S+\.md)", last.text)):
            return Reply("Reading it now.", [tool("read", path=m.group(1))])
        return filler(rng, 25, 70).capitalize() + "."

    def take_notes(self, request):
        from clawd.providers.scripted import Reply, tool

        path = DAILY.search(request.messages[-1].text).group(0)
        project = request.system[1] if len(request.system) > 1 else ""
        known = set(IDENT.findall(project))
        seen = fact_sentences("\n".join(m.text for m in request.messages[:-1]))
        new = [s for s in seen if not set(IDENT.findall(s)) <= known]
        if not new:
            return "NO_REPLY"
        self.notes += len(new)
        lines = "\n".join(f"- {s}" for s in new)
        marker = f"## {path}\n\n"
        if marker not in project:
            return Reply("", [tool("write", path=path, content=lines + "\n")])
        tail = project.split(marker, 1)[1].rstrip().splitlines()[-1]
        return Reply("", [tool("edit", path=path, oldText=tail, newText=f"{tail}\n{lines}")])

    def summarise(self, request) -> str:
        from clawd.core.tokens import estimate_text

        kept = fact_sentences(request.messages[0].text)
        if self.summary_tokens:
            budget, tail = self.summary_tokens, []
            for sentence in reversed(kept):
                budget -= estimate_text(sentence) + 2
                if budget < 0:
                    break
                tail.append(sentence)
            kept = tail[::-1]
        body = "\n".join(f"- {s}" for s in kept) or "- (no identifiers)"
        return "## Goal\nKeep the services running.\n\n## Exact references\n" + body


# --- running it -------------------------------------------------------------------------------

@dataclass
class Run:
    name: str
    chat: list[tuple[int, int]] = field(default_factory=list)  # (turn, tokens) per chat request
    per_turn: list[int] = field(default_factory=list)  # tokens of all requests, per turn
    kinds: dict[str, list[int]] = field(default_factory=dict)
    first_compaction_turn: int | None = None
    ratios: list[float] = field(default_factory=list)
    compactions: int = 0
    flushes: int = 0
    notes: int = 0
    on_disk: int = 0
    in_summary: int = 0
    in_history: int = 0
    anywhere: int = 0
    in_tool_on_disk: int = 0
    cut: int = 0  # facts no longer in the live history
    cut_on_disk: int = 0
    errors: int = 0
    seconds: float = 0.0


def run(name: str, flush: bool, plan: list[Turn], facts: list[Fact], docs: dict[str, str],
        root: Path, args: argparse.Namespace) -> Run:
    from clawd.config import AgentDefaults, Config
    from clawd.core.events import Compacted, ErrorEvent
    from clawd.core.messages import iso_clock
    from clawd.core.tokens import estimate_request
    from clawd.loop.runtime import Runtime, fixed_models
    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider
    from clawd.storage.files.storage import FileStorage
    from clawd.tools.files import file_tools

    started = time.perf_counter()
    workspace = root / name / "ws"
    (workspace / "memory").mkdir(parents=True)
    for rel, text in docs.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    now = [datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)]
    model = Model(args.summary_tokens)
    provider = ScriptedProvider(default=model, model="bench")
    settings = AgentDefaults.model_validate({
        "workspace": str(workspace), "contextPruning": {"mode": "off"},
        "compaction": {"reserveTokensFloor": args.window // 8,
                       "keepRecentTokens": args.window // 4,
                       "memoryFlush": {"enabled": flush,
                                       "softThresholdTokens": args.window // 8}}})
    runtime = Runtime(config=Config(), agent_id="main", settings=settings, workspace=workspace,
                      storage=FileStorage("main", workspace, root / name / "sessions",
                                          now=iso_clock(lambda: now[0])),
                      models=fixed_models(provider, args.window), tools=file_tools(),
                      clock=lambda: now[0])
    session = Session.open(runtime, "agent:main:main")
    result = Run(name)
    for n, turn in enumerate(plan):
        now[0] += timedelta(minutes=2)
        first = len(provider.requests)
        for event in session.run_turn(turn.text):
            if isinstance(event, Compacted) and result.first_compaction_turn is None:
                result.first_compaction_turn = n
            elif isinstance(event, ErrorEvent):
                result.errors += 1
        sizes = [estimate_request(r) for r in provider.requests[first:]]
        result.per_turn.append(sum(sizes))
        for size, kind in zip(sizes, model.kinds[first:]):
            result.kinds.setdefault(kind, []).append(size)
            if kind == "chat":
                result.chat.append((n, size))
    entries = session.transcript.load().entries
    compactions = [e for e in entries if e.get("type") == "compaction"]
    result.ratios = [e["tokensBefore"] / e["tokensAfter"] for e in compactions
                     if e.get("tokensAfter")]
    entry = session.store.get("agent:main:main") or {}
    result.compactions = entry.get("compactionCount", 0)
    result.flushes = entry.get("memoryFlushCount", 0)
    result.notes = model.notes
    disk = "\n".join(p.read_text() for p in sorted((workspace / "memory").glob("*.md")))
    if (workspace / "MEMORY.md").exists():
        disk += (workspace / "MEMORY.md").read_text()
    summary = compactions[-1]["summary"] if compactions else ""
    history = "\n".join(m.text for m in session.history.messages)
    for fact in facts:
        places = [fact.value in disk, fact.value in summary, fact.value in history]
        result.on_disk += places[0]
        result.in_tool_on_disk += places[0] and fact.in_tool
        result.in_summary += places[1]
        result.in_history += places[2]
        result.anywhere += any(places)
        result.cut += not places[2]
        result.cut_on_disk += places[0] and not places[2]
    result.seconds = time.perf_counter() - started
    return result


# --- the report --------------------------------------------------------------------------------

def p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else 0


def mean(values: list[int] | list[float]) -> float:
    return statistics.mean(values) if values else 0.0


def split(r: Run, pairs: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    cut = r.first_compaction_turn if r.first_compaction_turn is not None else 10 ** 9
    return [t for n, t in pairs if n < cut], [t for n, t in pairs if n > cut]


def report(runs: list[Run], plan: list[Turn], facts: list[Fact],
           args: argparse.Namespace) -> str:
    from clawd.core.tokens import encoder_name, make_budget

    budget = make_budget(args.window, args.window // 8, args.window // 8)
    n = len(facts)
    in_tool = sum(f.in_tool for f in facts)
    out = [f"plan: {len(plan)} user turns, {sum(1 for t in plan if t.read)} document reads, "
           f"{n} facts ({in_tool} only inside documents); window {args.window:,} tokens "
           f"(flush at {budget.flush_at:,}, compaction at {budget.compact_at:,}, keep "
           f"{args.window // 4:,}); summary limit "
           f"{args.summary_tokens or 'none'}{' tokens' if args.summary_tokens else ''}",
           "", f"{'':<{WIDTH}}" + "".join(f"{r.name:>20}" for r in runs)]

    def row(label: str, cells: list[str]) -> None:
        out.append(f"{label:<{WIDTH}}" + "".join(f"{c:>20}" for c in cells))

    def share(count: int, total: int = n) -> str:
        return f"{count}/{total} {count / total:.0%}" if total else "-"

    row("facts on disk (memory/*.md, MEMORY.md)", [share(r.on_disk) for r in runs])
    row("  document-only facts on disk", [share(r.in_tool_on_disk, in_tool) for r in runs])
    row("  facts cut from the history, on disk", [share(r.cut_on_disk, r.cut) for r in runs])
    row("facts in the latest summary", [share(r.in_summary) for r in runs])
    row("facts in the live history", [share(r.in_history) for r in runs])
    row("facts anywhere (disk, summary or history)", [share(r.anywhere) for r in runs])
    row("compactions", [str(r.compactions) for r in runs])
    row("memory flushes (notes written)", [f"{r.flushes} ({r.notes})" for r in runs])
    row("compression ratio mean (min-max)",
        [f"{mean(r.ratios):.2f} ({min(r.ratios):.2f}-{max(r.ratios):.2f})" if r.ratios
         else "-" for r in runs])
    row("first compaction at user turn", [str(r.first_compaction_turn) for r in runs])
    for label, pick in (("tokens per chat request", lambda r: r.chat),
                        ("tokens per user turn (all requests)",
                         lambda r: list(enumerate(r.per_turn)))):
        befores, afters = zip(*(split(r, pick(r)) for r in runs))
        row(f"{label}, before: mean / p95",
            [f"{mean(b):,.0f} / {p95(b):,}" for b in befores])
        row("  after the first compaction: mean / p95",
            [f"{mean(a):,.0f} / {p95(a):,}" for a in afters])
    row("requests chat / flush / summary",
        [" / ".join(str(len(r.kinds.get(k, []))) for k in ("chat", "flush", "summary"))
         for r in runs])
    row("tokens in flush / summary requests",
        [f"{sum(r.kinds.get('flush', [])):,} / {sum(r.kinds.get('summary', [])):,}"
         for r in runs])
    row("errors shown to the user", [str(r.errors) for r in runs])
    out += ["", f"(tokens by the loop's estimator: {encoder_name()}; run time "
            + ", ".join(f"{r.name} {r.seconds:.1f}s" for r in runs) + ")"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--facts", type=int, default=60)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--summary-tokens", type=int, default=800)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    if not 0 < args.facts <= args.turns:
        parser.error("--facts must be between 1 and --turns")
    plan, facts, docs = make_plan(args.turns, args.facts, args.seed)
    with tempfile.TemporaryDirectory(prefix="clawd-bench-") as tmp:
        root = Path(tmp)
        os.environ["HOME"] = str(root / "home")
        os.environ["CLAWD_HOME"] = str(root / "home" / ".clawd")
        runs = [run("flush on", True, plan, facts, docs, root, args),
                run("flush off", False, plan, facts, docs, root, args)]
    print(report(runs, plan, facts, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
