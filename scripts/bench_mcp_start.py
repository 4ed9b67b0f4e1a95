"""What configured but unused MCP servers cost a ``clawd chat -m`` run: its wall time with no
server, and with N stdio servers (the test suite's ``tests/mcp_lookup.py``) that the message
never uses, the two runs interleaved (a busy machine slows both alike). The model is a
stand-in (``tests/fakeserver.py``) answering at once, memory search is off: what is left is
start-up. Each configuration runs once first (the first run lists the servers' tools, which
later runs take from ``<state>/cache/mcp-tools.json``).

    python scripts/bench_mcp_start.py [--runs 7] [--servers 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--servers", type=int, default=4)
    args = parser.parse_args()
    from fakeserver import FakeServer, openai_stream

    lookup = str(ROOT / "tests" / "mcp_lookup.py")
    with FakeServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.default("POST", "/v1/chat/completions", lambda r: openai_stream("Hello."))
        homes = {}
        for label, count in (("no server", 0), (f"{args.servers} servers, unused",
                                                 args.servers)):
            home = Path(tmp) / f"home{count}"
            (home / "ws" / "memory").mkdir(parents=True)
            (home / ".clawd").mkdir()
            (home / ".clawd" / "clawd.json").write_text(json.dumps({
                "agents": {"defaults": {"workspace": str(home / "ws"), "model": "local/m",
                                        "memorySearch": {"enabled": False}}},
                "models": {"providers": {"local": {
                    "api": "openai-completions", "baseUrl": server.url + "/v1",
                    "models": [{"id": "m", "contextWindow": 32000}], "maxRetries": 0}}},
                "mcp": {"servers": {f"s{i}": {"command": sys.executable, "args": [lookup]}
                                    for i in range(count)}}}))
            homes[label] = home
        times: dict[str, list[float]] = {label: [] for label in homes}
        for round_ in range(args.runs + 1):
            for label, home in homes.items():
                env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
                       "PYTHONPATH": str(ROOT)}
                started = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "clawd", "chat", "-m", "hi"],
                                      env=env, cwd=tmp, capture_output=True, text=True)
                took = time.monotonic() - started
                if "Hello." not in done.stdout:
                    raise SystemExit(f"{label}: {done.stderr}")
                if round_:  # the first round lists the tools once
                    times[label].append(took)
        for label, found in times.items():
            print(f"{label:<22} median {statistics.median(found):5.2f} s   "
                  f"(min {min(found):.2f}, max {max(found):.2f}, {len(found)} runs)")


if __name__ == "__main__":
    main()
