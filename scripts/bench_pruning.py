"""Tokens sent per model request over a long tool-heavy session, with and without pruning.

One synthetic session (default 120 user turns; each turn makes 1–3 sequential ``exec`` calls
whose simulated outputs are 2–20 KB of log lines; between turns the clock moves 0.3–4
minutes, and past the 5-minute cache TTL before about one turn in seven) runs through the
real turn loop (``Session.run_turn``: pruning, memory flush, compaction) with a scripted
model on a 200,000-token window, once per ``contextPruning.mode``: ``off`` (the baseline),
``cache-ttl``, ``adaptive`` and ``aggressive``. Every mode sees the same turns and the same
tool outputs. Each request the model received is measured with the loop's own estimator
(``clawd.core.tokens.estimate_request``); flush and summary requests count too.

A second table replays the requests against a model of Anthropic's prompt cache (an entry
per breakpoint: end of the system prompt and end of the newest message; an entry lives 5
minutes and each read renews it; a request reads the longest cached prefix it starts with)
and prices input as 0.1 × cache reads + 1.25 × cache writes + 1 × uncached tokens, the
multipliers of Anthropic's 5-minute cache. It shows what pruning costs in cache misses.

    python scripts/bench_pruning.py [--turns 120] [--seed 7]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

MODES = ("off", "cache-ttl", "adaptive", "aggressive")
WINDOW = 200_000
TTL_SECONDS = 300
READ_PRICE, WRITE_PRICE = 0.1, 1.25
PRUNE_MARKERS = ("[Old tool result content cleared]", "[Tool result trimmed:")


@dataclass
class Turn:
    gap_minutes: float  # clock movement before this turn
    calls: list[tuple[str, int]]  # (command, output size in characters)


def make_plan(turns: int, seed: int) -> list[Turn]:
    rng = random.Random(seed)
    plan = []
    for n in range(turns):
        gap = rng.uniform(6, 45) if n and rng.random() < 0.15 else rng.uniform(0.3, 4)
        calls = [(f"make test TARGET=t{n}-{k}", rng.randint(2_000, 20_000))
                 for k in range(rng.randint(1, 3))]
        plan.append(Turn(gap, calls))
    return plan


WORDS = ("compile link test fetch parse index cache render upload verify retry "
         "schedule resolve migrate bundle lint").split()


def tool_output(command: str, size: int) -> str:
    """Deterministic, varied log text (tokenizes like real build output)."""
    rng = random.Random(int(hashlib.sha256(command.encode()).hexdigest()[:12], 16))
    lines, total = [], 0
    while total < size:
        line = (f"{len(lines):05d} {rng.choice(('INFO', 'INFO', 'DEBUG', 'WARN'))} "
                f"worker-{rng.randint(1, 16)} {rng.choice(WORDS)} "
                f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{rng.randint(1, 99)}.py "
                f"({rng.randint(1, 9000)} ms) id={rng.getrandbits(32):08x}\n")
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


class Model:
    """Replies for the scripted provider: the planned tool calls, then a short answer."""

    def __init__(self, clock):
        self.clock = clock
        self.pending: list[tuple[str, int]] = []
        self.log: list[tuple[str, float]] = []  # (kind, time) per request, in order

    def __call__(self, request):
        from clawd.config import DEFAULT_FLUSH_SYSTEM
        from clawd.providers.scripted import Reply, tool

        kind = ("summary" if not request.tools
                else "flush" if DEFAULT_FLUSH_SYSTEM in request.system[-1] else "chat")
        self.log.append((kind, self.clock().timestamp()))
        if kind == "summary":
            return ("Summary: the user ran a series of test targets; all passed except "
                    "flaky retries in the upload step, which were re-run and passed.")
        if kind == "flush":
            return "NO_REPLY"
        if self.pending:
            command, size = self.pending.pop(0)
            return Reply("", [tool("exec", command=command, size=size)])
        return ("The targets ran; the logs show no failures. The slowest step was the "
                "bundle stage. Tell me if you want the details of a specific worker.")


class Clock:
    def __init__(self):
        self.now = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)

    def __call__(self):
        return self.now


@dataclass
class Run:
    mode: str
    tokens: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    pruned_requests: int = 0
    compactions: int = 0
    flushes: int = 0
    cache: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


def run_mode(mode: str, plan: list[Turn], root: Path) -> Run:
    from clawd.config import AgentDefaults, Config
    from clawd.core.messages import ToolSpec, iso_clock
    from clawd.core.tokens import estimate_request
    from clawd.loop.runtime import Runtime, fixed_models
    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider
    from clawd.storage.files.storage import FileStorage
    from clawd.tools.base import Tool, schema

    started = time.perf_counter()
    workspace = root / mode / "ws"
    (workspace / "memory").mkdir(parents=True)
    clock = Clock()
    model = Model(clock)
    provider = ScriptedProvider(default=model, model="claude-bench")
    exec_spec = ToolSpec("exec", "Run a shell command (simulated output).", schema(
        {"command": {"type": "string"}, "size": {"type": "integer"}}, ["command"]))
    exec_tool = Tool(exec_spec, lambda args, ctx: tool_output(args["command"],
                                                               int(args.get("size", 4000))))
    settings = AgentDefaults.model_validate({"workspace": str(workspace),
                                             "contextPruning": {"mode": mode}})
    runtime = Runtime(config=Config(), agent_id="main", settings=settings, workspace=workspace,
                      storage=FileStorage("main", workspace, root / mode / "sessions",
                                          now=iso_clock(clock)),
                      models=fixed_models(provider, WINDOW, cache=True),
                      tools=[exec_tool], clock=clock)
    session = Session.open(runtime, "agent:main:main")
    for n, turn in enumerate(plan):
        clock.now += timedelta(minutes=turn.gap_minutes)
        model.pending = list(turn.calls)
        for _ in session.run_turn(f"Turn {n}: run the next batch of test targets."):
            pass
    result = Run(mode)
    for request, (kind, at) in zip(provider.requests, model.log):
        result.tokens.append(estimate_request(request))
        result.kinds.append(kind)
        result.times.append(at)
        if any(m.role == "toolResult" and (m.text.startswith(PRUNE_MARKERS[0])
                                           or PRUNE_MARKERS[1] in m.text)
               for m in request.messages):
            result.pruned_requests += 1
    entry = session.store.get("agent:main:main") or {}
    result.compactions = entry.get("compactionCount", 0)
    result.flushes = entry.get("memoryFlushCount", 0)
    result.cache = simulate_cache(provider.requests, result.times)
    result.seconds = time.perf_counter() - started
    return result


def simulate_cache(requests, times: list[float]) -> dict[str, float]:
    """Cache reads and writes under the model in the module docstring."""
    from clawd.core.tokens import estimate_messages, estimate_text, estimate_tools

    entries: dict[str, tuple[int, float]] = {}  # prefix hash -> (tokens, last used)
    read = write = 0
    for request, now in zip(requests, times):
        digest = hashlib.sha256(repr((request.system, [t.name for t in request.tools]))
                                .encode())
        tokens = (sum(estimate_text(s) for s in request.system)
                  + estimate_tools(request.tools))
        chain = [(digest.hexdigest(), tokens)]
        for message in request.messages:
            digest.update(repr((message.role, message.content)).encode())
            tokens += estimate_messages([message])
            chain.append((digest.hexdigest(), tokens))
        hit = 0
        for key, size in reversed(chain):
            cached = entries.get(key)
            if cached and now - cached[1] < TTL_SECONDS:
                hit = size
                entries[key] = (size, now)
                break
        read += hit
        write += tokens - hit
        for key, size in (chain[0], chain[-1]):  # the two breakpoints
            entries[key] = (size, now)
    return {"read": read, "write": write, "cost": READ_PRICE * read + WRITE_PRICE * write}


def pct(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(runs: list[Run], plan: list[Turn]) -> str:
    base = runs[0]
    calls = sum(len(t.calls) for t in plan)
    chars = sum(size for t in plan for _, size in t.calls)
    expired = sum(1 for t in plan if t.gap_minutes * 60 >= TTL_SECONDS)
    out = [f"session: {len(plan)} turns, {calls} tool calls, {chars / 1e6:.2f} MB of tool "
           f"output, {expired} turns after the cache TTL; window {WINDOW:,} tokens",
           "",
           f"{'mode':<11}{'requests':>9}{'mean':>9}{'p50':>9}{'p95':>9}{'max':>9}"
           f"{'total':>13}{'saved':>8}{'pruned':>8}{'compact':>8}{'flush':>6}"]
    for r in runs:
        total = sum(r.tokens)
        saved = 1 - total / sum(base.tokens)
        out.append(f"{r.mode:<11}{len(r.tokens):>9}{statistics.mean(r.tokens):>9,.0f}"
                   f"{pct(r.tokens, .5):>9,}{pct(r.tokens, .95):>9,}{max(r.tokens):>9,}"
                   f"{total:>13,}{saved:>8.1%}{r.pruned_requests:>8}{r.compactions:>8}"
                   f"{r.flushes:>6}")
    out += ["", "chat requests only (the turn loop; no flush or summary requests):",
            f"{'mode':<11}{'requests':>9}{'mean':>9}{'p50':>9}{'p95':>9}{'max':>9}"
            f"{'total':>13}{'saved':>8}"]
    base_chat = sum(t for t, k in zip(base.tokens, base.kinds) if k == "chat")
    for r in runs:
        chat = [t for t, k in zip(r.tokens, r.kinds) if k == "chat"]
        out.append(f"{r.mode:<11}{len(chat):>9}{statistics.mean(chat):>9,.0f}"
                   f"{pct(chat, .5):>9,}{pct(chat, .95):>9,}{max(chat):>9,}"
                   f"{sum(chat):>13,}{1 - sum(chat) / base_chat:>8.1%}")
    out += ["", "with a simulated 5-minute prompt cache (input priced 0.1 read, 1.25 write):",
            f"{'mode':<11}{'cache read':>13}{'cache write':>13}{'hit rate':>10}"
            f"{'input cost':>13}{'saved':>8}"]
    for r in runs:
        c = r.cache
        out.append(f"{r.mode:<11}{c['read']:>13,}{c['write']:>13,}"
                   f"{c['read'] / (c['read'] + c['write']):>10.1%}{c['cost']:>13,.0f}"
                   f"{1 - c['cost'] / base.cache['cost']:>8.1%}")
    out += ["", "pruned: requests carrying a pruned tool result; compact, flush: compactions "
            "and memory flushes in the session.",
            "(tokens by the loop's estimator: " + estimator() + "; run time "
            + ", ".join(f"{r.mode} {r.seconds:.1f}s" for r in runs) + ")"]
    return "\n".join(out)


def estimator() -> str:
    from clawd.core.tokens import encoder_name
    return encoder_name()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    plan = make_plan(args.turns, args.seed)
    with tempfile.TemporaryDirectory(prefix="clawd-bench-") as tmp:
        root = Path(tmp)
        os.environ["HOME"] = str(root / "home")
        os.environ["CLAWD_HOME"] = str(root / "home" / ".clawd")
        runs = [run_mode(mode, plan, root) for mode in MODES]
    print(report(runs, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
