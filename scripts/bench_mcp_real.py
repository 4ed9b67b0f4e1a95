"""Does a real model use an MCP server's tool when it must, and leave it alone when not?

Configures clawd with the test suite's MCP server (``tests/mcp_lookup.py``: its
``order_status`` answers from a table no model can know; ``--all-tools`` offers every tool
of it, as an unfiltered server would) and runs each message below in a fresh home (its own
workspace and notes), ``--samples`` times, through ``clawd chat --json -m`` against any
OpenAI-compatible server.
A message that needs the tool passes when the model called ``lookup__order_status`` with the
right order and the reply holds the fact the tool gave; one that does not need it passes
when no MCP tool was called and the reply is not empty. The cases were written before any
prompt change; ``tuning`` guided the change, ``held-out`` only measured it.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_mcp_real.py --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct --window 8192 --samples 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (half, message, the order the tool must be asked about or None, what the reply must hold:
# any one of these, in any case)
NO_ORDER = ("no order", "not found", "no such", "does not exist", "doesn't exist",
            "couldn't find", "could not find", "there is no", "not exist")
CASES = [
    ("tuning", "Where is my order A-1042?", "A-1042", ("7731", "DHL", "2026-11-28")),
    ("tuning", "What happened to my order B-7?", "B-7", ("cancel",)),
    ("tuning", "Is there an order Z-9 for me?", "Z-9", NO_ORDER),
    ("tuning", "Write a haiku about rain.", None, ("",)),
    ("held-out", "Can you check the status of order b-7 for me?", "B-7", ("cancel",)),
    ("held-out", "Has A-1042 shipped yet?", "A-1042", ("2026-11-20", "November 20", "DHL")),
    ("held-out", "My order number is A-1042. What's the tracking number?", "A-1042",
     ("7731-0042",)),
    ("held-out", "What is 12 times 7?", None, ("84",)),
    ("held-out", "Tell me a fun fact about octopuses.", None, ("",)),
]


def config(home: Path, args: argparse.Namespace) -> None:
    workspace = home / "ws"
    (workspace / "memory").mkdir(parents=True)
    server = {"command": sys.executable, "args": [str(ROOT / "tests" / "mcp_lookup.py")]}
    if not args.all_tools:
        server["tools"] = ["order_status", "capital"]
    (home / ".clawd").mkdir()
    (home / ".clawd" / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": f"local/{args.model}"}},
        "models": {"providers": {"local": {
            "api": "openai-completions", "baseUrl": args.base_url,
            "models": [{"id": args.model, "contextWindow": args.window, "maxTokens": 512}]}}},
        "mcp": {"servers": {"lookup": server}}}))


def run_case(home: Path, message: str, session: str) -> tuple[list[dict], str]:
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd")}
    done = subprocess.run([sys.executable, "-m", "clawd", "chat", "--json", "--session",
                           session, "-m", message], env=env, capture_output=True, text=True,
                          timeout=900)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    calls = [e for e in events if e.get("type") == "tool"]
    reply = " ".join(e.get("text", "") for e in events if e.get("type") == "reply")
    return calls, reply


def judge(order: str | None, holds: tuple[str, ...], calls: list[dict], reply: str) -> bool:
    mcp = [c for c in calls if "__" in c.get("name", "")]
    said = any(text.lower() in reply.lower() for text in holds)
    if order is None:
        return not mcp and bool(reply.strip()) and said
    asked = any(c["name"] == "lookup__order_status"
                and str(c.get("arguments", {}).get("order_id", "")).upper() == order
                for c in mcp)
    return asked and said


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--all-tools", action="store_true",
                        help="offer every tool of the server, not only order_status and capital")
    parser.add_argument("--keep", type=Path, help="keep the state dir and transcripts here")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="clawd-mcp-real-"))
    started, passed = time.monotonic(), {"tuning": [0, 0], "held-out": [0, 0]}
    for index, (half, message, order, holds) in enumerate(CASES):
        for sample in range(args.samples):
            home = root / f"case{index}-{sample}"  # its own notes: no answer leaks across
            config(home, args)
            calls, reply = run_case(home, message, "main")
            ok = judge(order, holds, calls, reply)
            passed[half][0] += ok
            passed[half][1] += 1
            names = ",".join(f"{c['name']}({json.dumps(c.get('arguments'))})" for c in calls)
            print(f"{'ok  ' if ok else 'FAIL'} {half:<8} {message[:44]:<44} "
                  f"calls: {names or '-'} | {' '.join(reply.split())[:90]}", flush=True)
    for half, (ok, total) in passed.items():
        print(f"{half:<8} {ok}/{total} passed")
    print(f"wall {time.monotonic() - started:.0f} s; transcripts in {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
