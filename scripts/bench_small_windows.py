"""Model requests per user turn in small windows: 30-turn chats at 8k/16k/32k/200k.

Each chat runs through the real turn loop (``Session.run_turn``: flush, compaction, file
tools, transcript) with the default settings and the real workspace template, against a
scripted model: chat replies of about 100 words, a document read every fifth turn (about
800 tokens), notes appended on a flush, summaries of about 150 words. User messages run
120-220 words. For every window it prints model requests per user turn (chat, flush and
summary requests all count), compactions, flushes, the largest context seen as a share of
the window, errors, and the fixed part of a request before the first message (system
prompt, workspace files, tool schemas) as a share of the window; the same chats run again
with the budget arithmetic clawd used before (absolute reserve and soft threshold clamped
to 1 token, no share for the workspace files, summaries of up to maxTokens, and the full
rendering of the workspace's untouched templates and the tools in every window) as the
baseline, in the same run.

    python scripts/bench_small_windows.py [--turns 30] [--windows 8192,16384,32768,200000]
                                          [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("we could take the coast road first and then spend two days in the hills before "
         "the train back so the budget stays sane and nobody has to drive at night while "
         "the weather is still uncertain and the hotels fill up fast").split()


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


class Model:
    """A scripted model that behaves like a tidy chat model; counts requests by kind."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.kinds: list[str] = []

    def __call__(self, request):
        from clawd.config import DEFAULT_FLUSH_SYSTEM
        from clawd.providers.scripted import Reply, tool

        if not request.tools:
            self.kinds.append("summary")
            return "## Goal\nPlan a trip.\n## Progress\n- " + words(self.rng, 140, 160)
        last = request.messages[-1]
        if DEFAULT_FLUSH_SYSTEM in request.system[-1]:
            self.kinds.append("flush")
            if last.role == "user":
                path = last.text.split("memory/", 1)[1].split(";", 1)[0].rstrip(".")
                return Reply("", [tool("write", path=f"memory/{path}", append=True,
                                       content="- " + words(self.rng, 30, 40))])
            return "NO_REPLY"
        self.kinds.append("chat")
        if last.role == "user" and "read doc" in last.text:
            name = last.text.split("read doc", 1)[1].split()[0]
            return Reply("", [tool("read", path=f"doc{name}.md")])
        return words(self.rng, 80, 120)


@dataclass
class Result:
    requests: int = 0
    compactions: int = 0
    flushes: int = 0
    peak: float = 0.0
    fixed: float = 0.0  # the fixed layers before the first message, a share of the window
    errors: int = 0
    seconds: float = 0.0


def old_budget(rt, model):
    """The budget arithmetic before shares of the window: the baseline."""
    from clawd.core.tokens import Budget

    comp, window = rt.settings.compaction, model.context_window
    compact_at = max(window - comp.reserve_tokens_floor, 1)
    flush_at = max(min(compact_at - comp.memory_flush.soft_threshold_tokens, compact_at), 1)
    return Budget(window, flush_at, compact_at, min(comp.keep_recent_tokens, compact_at // 2),
                  files=10 ** 9, summary=rt.settings.max_tokens)


def chat(window: int, turns: int, seed: int, root: Path, baseline: bool) -> Result:
    from clawd.config import AgentDefaults, Config
    from clawd.core.events import Compacted, ErrorEvent, Flushed
    from clawd.core.messages import iso_clock
    from clawd.loop.parts import Window
    from clawd.loop.runtime import Runtime, fixed_models
    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider
    from clawd.storage.files.storage import FileStorage
    from clawd.tools.exec import exec_tool
    from clawd.tools.files import file_tools
    from clawd.tools.memory import memory_tools

    workspace = root / "ws"
    shutil.copytree(ROOT / "clawd" / "workspace_template", workspace)
    (workspace / "memory").mkdir(exist_ok=True)
    rng = random.Random(seed)
    for i in range(turns):
        (workspace / f"doc{i}.md").write_text(f"# doc{i}\n\n{words(rng, 550, 650)}\n")
    now = [datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)]
    model = Model(seed)
    provider = ScriptedProvider(default=model, model="bench")
    runtime = Runtime(config=Config(), agent_id="main",
                      settings=AgentDefaults(workspace=str(workspace)), workspace=workspace,
                      storage=FileStorage("main", workspace, root / "sessions",
                                          now=iso_clock(lambda: now[0])),
                      models=fixed_models(provider, window),
                      tools=file_tools() + [exec_tool()] + memory_tools(),
                      clock=lambda: now[0])
    import clawd.loop.runtime as runtime_module

    saved, small = Window.too_large, runtime_module.SMALL_WINDOW
    if baseline:  # the old arithmetic, which had no window or message-size checks either
        runtime.budget = lambda model: old_budget(runtime, model)  # type: ignore[method-assign]
        runtime.check_window = lambda *a: None  # type: ignore[method-assign]
        Window.too_large = lambda *a: None  # type: ignore[method-assign]
        runtime_module.SMALL_WINDOW = 0  # the full renderings in every window
    started = time.perf_counter()
    result = Result()
    try:
        session = Session.open(runtime, "agent:main:main")
        result.fixed = session.window.fixed_tokens(session.layers()) / window
        for i in range(turns):
            now[0] += timedelta(minutes=3)
            text = f"Turn {i}. {words(rng, 120, 220)}"
            if i % 5 == 4:
                text += f" Please read doc{i} and tell me what it says."
            for event in session.run_turn(text):
                result.compactions += isinstance(event, Compacted)
                result.flushes += isinstance(event, Flushed) and not event.skipped
                result.errors += isinstance(event, ErrorEvent)
            result.peak = max(result.peak, session.context_tokens() / window)
        result.requests = len(provider.requests)
    finally:
        Window.too_large = saved  # type: ignore[method-assign]
        runtime_module.SMALL_WINDOW = small
    result.seconds = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--windows", default="8192,16384,32768,200000")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from clawd.core.tokens import make_budget

    windows = [int(w) for w in args.windows.split(",")]
    print(f"{args.turns}-turn chats, default settings, the workspace template; "
          f"requests = chat + flush + summary requests")
    header = (f"{'window':>8} {'flush at':>9} {'compact':>9} | {'req/turn':>8} {'compact':>7} "
              f"{'flushes':>7} {'peak':>6} {'fixed':>6} {'errors':>6} | baseline: "
              f"{'req/turn':>8} {'compact':>7} {'flushes':>7} {'peak':>6} {'fixed':>6} "
              f"{'errors':>6}")
    print(header)
    print("-" * len(header))
    for window in windows:
        rows = []
        for baseline in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(chat(window, args.turns, args.seed, Path(tmp), baseline))
        new, old = rows
        b = make_budget(window, 20_000, 4_000)
        print(f"{window:>8,} {b.flush_at:>9,} {b.compact_at:>9,} | "
              f"{new.requests / args.turns:>8.2f} {new.compactions:>7} {new.flushes:>7} "
              f"{new.peak:>6.0%} {new.fixed:>6.1%} {new.errors:>6} | {'':>10}"
              f"{old.requests / args.turns:>8.2f} {old.compactions:>7} {old.flushes:>7} "
              f"{old.peak:>6.0%} {old.fixed:>6.1%} {old.errors:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
