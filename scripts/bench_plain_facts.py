"""Plain facts without numbers, among requests: are they kept, and recalled after /new?

A short conversation against any OpenAI-compatible server states three facts with no number
or capitalised reference ("I'm vegetarian", a relative's job, the correction of a name said
earlier) among requests and questions, then ``/new`` (the flush before the end and the
session-memory file). It prints which facts are in today's log or MEMORY.md (outside the
``/new`` dump), which requests were saved as if they were facts, and how many fresh
sessions answer each fact right (``--samples`` per fact). The run (state dir, workspace,
``bench.log``) is left in ``--keep``. Needs a model server (not part of the tests):

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_plain_facts.py --samples 2
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

CONVERSATION = [
    "Hi! Can you suggest a quick dinner I could cook tonight?",
    "I'm vegetarian, by the way.",
    "My cat is called Miso.",
    "What's a good way to keep basil fresh?",
    "My sister works as a pharmacist.",
    "Write me a two-line poem about rain.",
    "Sorry, I got that wrong: my cat is called Mochi, not Miso.",
    "Thanks! Any tips for a rainy weekend?",
]
# (what must be on disk, a question for a fresh session, what the answer must hold)
FACTS = [
    (r"vegetarian", "Do I eat meat?", r"vegetarian|\bno\b|don't|do not"),
    (r"pharmacist", "What does my sister do for a living?", r"pharmacist|pharmacy"),
    (r"Mochi", "What is my cat called?", r"Mochi"),
]
REQUESTS = [r"suggest a quick dinner", r"keep basil fresh", r"poem about rain",
            r"tips for a rainy weekend"]


def main(argv: list[str] | None = None) -> int:
    from bench_real_model import Tally, memory_files, notes_outside_dump, turn, write_config

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args(argv)
    args.api_key, args.memory_search, args.recall = None, True, True
    sys.path.insert(0, str(ROOT))
    home = args.keep or Path(tempfile.mkdtemp(prefix="clawd-plain-"))
    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    from clawd.config import load_config
    from clawd.frontends.commands import Chat
    from clawd.frontends.compose import build_runtime
    from clawd.workspace.init import apply, plan_init

    write_config(state, workspace, args)
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    write_config(state, workspace, args)
    runtime = build_runtime(load_config(state / "clawd.json"), None)
    lines: list[str] = []

    def log(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    started, tally = time.perf_counter(), Tally()
    chat = Chat.open(runtime, "agent:main:main")
    for text in CONVERSATION:
        turn(chat, text, tally, log)
    before_new = memory_files(workspace)
    log("\n> /new")
    for event in chat.handle("/new"):
        shown = getattr(event, "text", "") or getattr(event, "files", "")
        log(f"  {type(event).__name__}: {shown}")
    noted = notes_outside_dump(workspace, before_new)
    kept = [bool(re.search(p, noted, re.I)) for p, _, _ in FACTS]
    requests = [p for p in REQUESTS if re.search(p, noted, re.I)]
    # the old name given as the cat's name, with nothing saying it was replaced
    stale = bool(re.search(r"\bMiso\b", noted)) and not re.search(r"not Miso|replac", noted,
                                                                  re.I)
    answered = []
    for i, (_, question, pattern) in enumerate(FACTS):
        right = 0
        for k in range(args.samples):
            fresh = Chat.open(runtime, f"agent:main:ask-{i}-{k}-{time.strftime('%H%M%S')}")
            right += bool(re.search(pattern, turn(fresh, question, tally, log), re.I))
        answered.append(right)
    if runtime.memory is not None:
        runtime.memory.close()
    print("\n" + "=" * 72)
    print(f"facts in today's log or MEMORY.md (outside the /new dump): {sum(kept)}/3 "
          f"{['yes' if k else 'no' for k in kept]} (vegetarian, pharmacist, Mochi)")
    print(f"requests saved as facts: {len(requests)} {requests}; old name kept as current: "
          f"{'yes' if stale else 'no'}")
    print(f"fresh sessions answering right, of {args.samples} each: {answered} "
          f"({sum(a > 0 for a in answered)}/3 facts answered at least once)")
    print(f"blank turns: {len(tally.blank_turns)}; errors: {len(tally.errors)}; wall time "
          f"{time.perf_counter() - started:.0f} s; the run is in {home}")
    (home / "bench.log").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
