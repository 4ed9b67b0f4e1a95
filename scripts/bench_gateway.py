"""Gateway benchmark: what ``clawd serve`` adds to a turn, against the same turn run
in-process in the same run; throughput; memory per idle session; lost or doubled messages.

The model is the scripted stand-in (``clawd.providers.scripted``) behind a fixed delay
(``--model-ms`` before the first token), in both the in-process baseline and the gateway,
run as ``clawd serve`` runs it (its app on uvicorn) in a child process on 127.0.0.1 (an
ephemeral port; loopback only). Measured:

1. latency to the first streamed event (a text ``delta``) and to the end of the turn
   (``done``): one client, one session, ``--turns`` turns, in-process (``Chat.handle``)
   and through the gateway (HTTP + SSE); p50 and p95, the difference and the ratio;
2. ``--clients`` concurrent clients over ``--sessions`` sessions, ``--rounds`` sends each
   to sessions picked at random (a session sent to twice at once queues): turns per
   second, and every session's transcript against what was sent to it (each text is
   unique: 0 lost and 0 doubled is the goal);
3. the server's resident memory before and after those sessions were opened (they stay
   open, idle), per session.

Bounded in count (the options) and time (``--timeout`` seconds for the whole run).

    python scripts/bench_gateway.py [--turns N] [--clients N] [--sessions N] [--rounds N]
    git worktree add /tmp/before HEAD~1
    python scripts/bench_gateway.py --before /tmp/before   # the previous code, same run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKEN = "bench-token-0123456789abcdef"
REPLY = "The answer streams in small pieces, like a model's. " * 3


def _runtime(tmp: Path, model_ms: float):
    from clawd.config import AgentDefaults, Config
    from clawd.loop.runtime import Runtime, fixed_models
    from clawd.providers.scripted import ScriptedProvider
    from clawd.storage.files.storage import FileStorage
    from clawd.tools.files import file_tools

    def step(request):
        time.sleep(model_ms / 1000)
        return REPLY

    workspace = tmp / "ws"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    settings = AgentDefaults.model_validate({"workspace": str(workspace)})
    return Runtime(config=Config(), agent_id="main", settings=settings, workspace=workspace,
                   storage=FileStorage("main", workspace,
                                       tmp / "state" / "agents" / "main" / "sessions"),
                   models=fixed_models(ScriptedProvider(default=step, chunk_size=8), 200_000,
                                       profile="strong"),
                   tools=file_tools())


def serve(tmp: Path, model_ms: float) -> None:
    """The child: ``clawd serve``'s app over the scripted model, its port on stdout."""
    import threading

    from clawd.config import Config
    from clawd.frontends.gateway.agents import ServedAgents
    from clawd.frontends.gateway.app import create_app
    from clawd.frontends.gateway.server import server

    config = Config.model_validate({"gateway": {"idleSessionSeconds": 600,
                                                "maxQueuedPerSession": 64}})
    app = create_app(config, ServedAgents.of_runtimes([_runtime(tmp, model_ms)], config), TOKEN)
    running = server(app, "127.0.0.1", 0)
    threading.Thread(target=lambda: (running.ready.wait(30),
                                     print(f"PORT {running.port}", flush=True)),
                     daemon=True).start()
    running.run()


def in_process(tmp: Path, model_ms: float, turns: int) -> tuple[list[float], list[float]]:
    from clawd.core.events import TurnDone
    from clawd.core.messages import TextDelta
    from clawd.frontends.commands import Chat
    from clawd.frontends.render import event_json

    chat = Chat.open(_runtime(tmp, model_ms), "agent:main:main")
    for n in range(3):  # warm-up, as for the gateway: imports, the tokenizer
        list(chat.handle(f"warm-up {n}"))
    first, end = [], []
    for n in range(turns):
        start, got = time.perf_counter(), None
        for event in chat.handle(f"in-process message {n}"):
            event_json(event, deltas=True)  # the same rendering the gateway does
            if got is None and isinstance(event, TextDelta):
                got = time.perf_counter() - start
            if isinstance(event, TurnDone):
                end.append(time.perf_counter() - start)
        first.append(got or 0.0)
    chat.session.close()
    return first, end


async def send(client, url: str, key: str, text: str) -> tuple[float, float, dict]:
    """One message through the gateway: seconds to the first delta, to ``done``, and it."""
    start, first = time.perf_counter(), None
    async with client.stream("POST", f"{url}/api/sessions/{key}/messages",
                             json={"text": text}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{key}: HTTP {response.status_code} {await response.aread()}")
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if first is None and event["type"] == "delta":
                first = time.perf_counter() - start
            if event["type"] == "done":
                return first or 0.0, time.perf_counter() - start, event
    raise RuntimeError(f"{key}: the stream ended without done")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def through_gateway(url: str, pid: int, args: argparse.Namespace) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=args.clients + 4)
    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as client:
        for n in range(3):  # warm-up: imports, the first session's files
            await send(client, url, "warm", f"warm-up {n}")
        first, end = [], []
        for n in range(args.turns):
            a, b, _ = await send(client, url, "latency", f"gateway message {n}")
            first.append(a)
            end.append(b)
        before = rss_kb(pid)
        sent: dict[str, list[str]] = {f"s{n}": [] for n in range(args.sessions)}

        async def one_client(c: int) -> None:
            pick = random.Random(c)  # some sessions get several sends at once: they queue
            for r in range(args.rounds):
                key = f"s{pick.randrange(args.sessions)}"
                text = f"client {c} round {r}"
                sent[key].append(text)
                await send(client, url, key, text)

        start = time.perf_counter()
        await asyncio.gather(*(one_client(c) for c in range(args.clients)))
        took = time.perf_counter() - start
        after = rss_kb(pid)
        lost = doubled = 0
        for key, texts in sent.items():
            page = (await client.get(f"{url}/api/sessions/{key}/history?limit=200")).json()
            seen = [i["text"] for i in page["items"] if i["type"] == "user"]
            lost += sum(1 for t in texts if t not in seen)
            doubled += sum(seen.count(t) - 1 for t in set(seen))
    return {"first": first, "end": end, "turns": args.clients * args.rounds, "seconds": took,
            "rss_before": before, "rss_after": after, "lost": lost, "doubled": doubled}


def ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="latency turns (default 40)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="sends per client")
    parser.add_argument("--model-ms", type=float, default=20, help="model delay to 1st token")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for the whole run")
    parser.add_argument("--before", metavar="DIR",
                        help="another checkout of clawd (e.g. a git worktree of the previous "
                        "commit): its gateway is measured too, in the same run")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve), args.model_ms)
        return 0
    scripts = [("gateway", Path(__file__).resolve())]
    if args.before:
        scripts.insert(0, ("before", Path(args.before).resolve() / "scripts" / "bench_gateway.py"))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        base_first, base_end = in_process(Path(tmp) / "inproc", args.model_ms, args.turns)
        for name, script in scripts:
            results[name] = measure(script, Path(tmp) / name, args)
    for name, got in results.items():
        report(args, name, base_first, base_end, got)
    return 0


def measure(script: Path, home: Path, args: argparse.Namespace) -> dict:
    """Start the gateway of ``script``'s checkout in a child process and measure it."""
    home.mkdir(parents=True)
    child = subprocess.Popen([sys.executable, str(script), "--serve", str(home / "gw"),
                              "--model-ms", str(args.model_ms)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "CLAWD_HOME": str(home)})
    try:
        line = child.stdout.readline() if child.stdout else ""
        if not line.startswith("PORT "):
            raise SystemExit(f"the gateway of {script} did not start: {line!r}")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        return asyncio.run(asyncio.wait_for(through_gateway(url, child.pid, args),
                                            args.timeout))
    finally:
        child.terminate()
        child.wait(30)


def report(args: argparse.Namespace, name: str, base_first: list[float],
           base_end: list[float], got: dict) -> None:
    print(f"[{name}] model: scripted, {args.model_ms:g} ms to the first token; {args.turns} "
          f"turns for latency; cores: {os.cpu_count()}")
    print(f"{'':28} {'in-process':>11} {'gateway':>9} {'added':>8} {'ratio':>6}")
    for label, base, gw in (("first event p50 (ms)", base_first, got["first"]),
                            ("first event p95 (ms)", base_first, got["first"]),
                            ("end of turn p50 (ms)", base_end, got["end"]),
                            ("end of turn p95 (ms)", base_end, got["end"])):
        q = 0.95 if "p95" in label else 0.5
        a, b = ms(base, q), ms(gw, q)
        print(f"{label:28} {a:11.2f} {b:9.2f} {b - a:8.2f} {b / a if a else 0:6.2f}")
    print(f"concurrent: {args.clients} clients over {args.sessions} sessions, "
          f"{got['turns']} turns in {got['seconds']:.2f} s = "
          f"{got['turns'] / got['seconds']:.1f} turns/s")
    per = (got["rss_after"] - got["rss_before"]) / max(1, args.sessions)
    print(f"memory per idle session: {per:.0f} KB (server RSS {got['rss_before'] / 1024:.1f} "
          f"-> {got['rss_after'] / 1024:.1f} MB)")
    print(f"messages: {got['turns']} sent, {got['lost']} lost, {got['doubled']} doubled")


if __name__ == "__main__":
    raise SystemExit(main())
