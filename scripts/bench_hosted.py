"""Several gateway workers on one PostgreSQL against the embedded single process, in one run.

Each configuration is a real ``clawd serve`` (``--workers N`` on PostgreSQL) over the
stand-in model on 127.0.0.1 (it answers at once, so what is timed is clawd's own work):
``--sessions`` sessions (200) of ``--turns`` turns (5) each, sent by ``--clients``
concurrent clients (16), a session's turns in order, every send with an idempotency key and
retried once with the same key when the connection fails. Reported: turns per second, the
latency of a turn at p50/p95 and what PostgreSQL adds to it over the embedded store, and
from every session's history afterwards: turns lost and turns run twice (both must be 0).
The last run kills one of two workers (SIGKILL) a third of the way in: every turn a client
was told was done must be in its history, once.

The mixed traffic (``--traffic mixed``) is what an operator's users send: ``--mixed-sessions``
sessions (20) with two clients each, each client sending ``--mixed-turns`` turns (6) in a
row over one keep-alive connection, one client of a session on the native API and the other
on ``/v1`` (``X-Clawd-Session-Key``), so two clients' turns meet in one session on whichever
workers their connections reach; the stand-in takes ``--reply-seconds`` (0.2) per reply.
It reports the same figures and, on PostgreSQL, where a turn's time goes on the server
(from ``gateway_turns``: queued until its session's holder claimed it, then run, of which
the stand-in's time is known). Beside them runs its ceiling (``hosted_ceiling.py``): a server
that does nothing but run each session's turns in order and ask the model, so each line also
says which share of what this machine can carry with these clients and this model it reaches.

The clock of a run starts once its clients are made (an ``httpx.Client`` takes about 20 ms
of CPU to make; 40 of them had been a sixth of a mixed run). ``--repeat N`` runs every
configuration N times, the rounds interleaved, and reports each figure's median. The
stand-in runs in a process of its own, as a model's server does (``--stand-in thread``: in
this one, where its answers wait for the clients' threads under one interpreter lock).

PostgreSQL: a ``pgserver`` (the test extra) started for the run, a fresh database a run.

    python scripts/bench_hosted.py [--sessions 200] [--turns 5] [--clients 16]
                                   [--traffic both|sessions|mixed] [--workers 1,2,4]
                                   [--repeat N] [--stand-in process|thread]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_storage import fresh  # noqa: E402

from fakeserver import FakeServer  # noqa: E402
from gateway_client import free_port  # noqa: E402
from webchat import StandIn  # noqa: E402

TOKEN = "bench-token-7f3a9c2e5b1d8a64"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
CEILING = 0  # as a run's workers: ``hosted_ceiling.py`` in clawd's place


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def home_for(root: Path, model_url: str, port: int, url: str | None) -> dict[str, str]:
    home = root / f"home-{port}"
    (home / "ws" / "memory").mkdir(parents=True)
    (home / ".clawd").mkdir()
    config = {"agents": {"defaults": {"workspace": str(home / "ws"), "model": "local/qwen",
                                      "memorySearch": {"enabled": False}}},
              "models": {"providers": {"local": {
                  "api": "openai-completions", "baseUrl": model_url + "/v1",
                  "models": [{"id": "qwen", "contextWindow": 32000}], "maxRetries": 0}}},
              "gateway": {"port": port, "shutdownGraceSeconds": 2,
                          "maxQueuedPerSession": 64,
                          "http": {"endpoints": {"chatCompletions": {"enabled": True}}}}}
    if url:
        config["storage"] = {"url": url}
    (home / ".clawd" / "clawd.json").write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    return env


class Served:
    """A ``clawd serve`` child and what it says on stderr, read as it comes (a pipe nobody
    reads fills up with the request log and stops the server)."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.child = subprocess.Popen([sys.executable, *command],
                                      env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
        self.pid = self.child.pid
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.child.stderr is not None
        for line in self.child.stderr:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> str:
        """SIGTERM, then what it said."""
        self.child.send_signal(signal.SIGTERM)
        self.child.wait(timeout=60)
        self.reader.join(10)
        return "\n".join(self.lines)


def start(command: list[str], env: dict[str, str], port: int) -> Served:
    served = Served(command, env)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return served
        except httpx.HTTPError:
            time.sleep(0.05)
    served.child.kill()
    served.child.wait()
    served.reader.join(10)
    raise SystemExit(f"{' '.join(command)} did not start: " + "\n".join(served.lines)[-2000:])


class Tally:
    """The turns of one run as its clients saw them: each sent (retried twice, same
    idempotency key, when it fails), timed and, once answered, acknowledged; with ``kill``
    a worker is killed once a third of ``total`` are done."""

    def __init__(self, base: str, prefix: str, sessions: int, total: int,
                 kill: tuple[subprocess.Popen, int] | None):
        self.base, self.prefix, self.total, self.kill = base, prefix, total, kill
        self.latencies: list[float] = []
        self.acknowledged: dict[int, list[str]] = {n: [] for n in range(sessions)}
        self.failed = self.done = 0
        self.why: dict[str, int] = {}  # how the last try of each unanswered turn failed
        self.lock = threading.Lock()
        self.started = time.perf_counter()

    def start(self) -> None:
        """The clock starts: the clients are made (the turns/s is the server's, not the
        client library's setup, about 20 ms a client)."""
        self.started = time.perf_counter()

    def turn(self, n: int, text: str, send: Callable[[], str | None]) -> None:
        """Send one turn of session ``n`` (``send``: None when it was answered, else how it
        failed)."""
        started = time.perf_counter()
        for attempt in range(3):
            try:
                why = send()
            except httpx.HTTPError as exc:
                why = f"connection: {type(exc).__name__}"
            if why is None:
                break
            time.sleep(0.2 * (attempt + 1))
        else:
            with self.lock:
                self.failed += 1
                self.why[why] = self.why.get(why, 0) + 1
            return
        with self.lock:
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.acknowledged[n].append(text)
            self.done += 1
            if self.kill and self.done == self.total // 3:
                os.kill(self.kill[1], signal.SIGKILL)

    def result(self) -> dict[str, float]:
        seconds = time.perf_counter() - self.started
        return {**tally(self.base, self.prefix, self.acknowledged),
                "turns/s": self.done / seconds, "p50 ms": percentile(self.latencies, 0.5),
                "p95 ms": percentile(self.latencies, 0.95), "done": self.done,
                "unanswered": self.failed}

    def failures(self) -> str:
        """How the unanswered turns' last tries failed, most first."""
        return "; ".join(f"{count} × {why}" for why, count in
                         sorted(self.why.items(), key=lambda item: -item[1]))


def clients_made(count: int) -> queue.Queue[httpx.Client]:
    """``count`` HTTP clients, made before the clock starts."""
    idle: queue.Queue[httpx.Client] = queue.Queue()
    for _ in range(count):
        idle.put(httpx.Client(timeout=120))
    return idle


def closed(idle: queue.Queue[httpx.Client]) -> None:
    while not idle.empty():
        idle.get().close()


def failed_how(got: httpx.Response, answered: bool) -> str | None:
    """None for an answered turn, else what the response said instead."""
    if answered:
        return None
    if got.status_code != 200:
        return f"HTTP {got.status_code}"
    events = got.json().get("events", []) if "events" in got.text[:200] else []
    said = next((str(e.get("message", "")) for e in events if e.get("type") == "error"), "")
    return f"error: {said[:60]}" if said else "no reply"


def load(port: int, sessions: int, turns: int, clients: int,
         kill: tuple[subprocess.Popen, int] | None = None) -> dict[str, float]:
    """Every session's turns, in order per session, sessions side by side."""
    base = f"http://127.0.0.1:{port}"
    run = Tally(base, "s", sessions, sessions * turns, kill)

    def send(client: httpx.Client, n: int, text: str, key: str) -> str | None:
        got = client.post(f"{base}/api/sessions/s{n}/messages", json={"text": text},
                          headers={**AUTH, "Idempotency-Key": key})
        return failed_how(got, got.status_code == 200 and any(
            e.get("type") == "reply" for e in got.json().get("events", [])))

    idle = clients_made(clients)

    def session(n: int) -> None:
        client = idle.get()
        for t in range(turns):
            text = f"s{n} turn {t}"
            run.turn(n, text, partial(send, client, n, text, f"bench-{n}-{t}"))
        idle.put(client)

    with ThreadPoolExecutor(clients) as pool:
        run.start()
        list(pool.map(session, range(sessions)))
    closed(idle)
    if run.failed:
        print(f"unanswered, by how the last try failed: {run.failures()}", file=sys.stderr)
    return run.result()


class Slow(StandIn):
    """The stand-in, taking ``seconds`` to answer (a model's time), then at once."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    def __call__(self, request):
        time.sleep(self.seconds)
        return super().__call__(request)


@contextlib.contextmanager
def stand_in(seconds: float, where: str) -> Iterator[str]:
    """The stand-in model's URL: served by a process of its own (``where`` "process"), as
    a model's server is, or by a thread of this one ("thread"), where its answers wait
    for the 40 clients' threads under one interpreter lock."""
    if where == "thread":
        with served_stand_in(seconds) as url:
            yield url
        return
    child = subprocess.Popen([sys.executable, __file__, "--serve-stand-in", str(seconds)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    try:
        yield child.stdout.readline().strip()
    finally:
        child.stdin.close()  # its end of the pipe: it stops
        child.wait(30)


@contextlib.contextmanager
def served_stand_in(seconds: float) -> Iterator[str]:
    from http.server import ThreadingHTTPServer

    ThreadingHTTPServer.request_queue_size = 256  # the stand-in takes every connection
    with FakeServer() as model:
        model.default("POST", "/v1/chat/completions", Slow(seconds))
        yield model.url


def serve_stand_in(seconds: float) -> int:
    """``--serve-stand-in``: the stand-in until standard input closes, its URL printed."""
    with served_stand_in(seconds) as url:
        print(url, flush=True)
        sys.stdin.read()
    return 0


def mixed(port: int, sessions: int, turns: int,
          kill: tuple[subprocess.Popen, int] | None = None) -> dict[str, float]:
    """Two clients a session, one native and one on ``/v1``, each sending its turns in a
    row; a turn is retried (same idempotency key) when its connection fails."""
    base = f"http://127.0.0.1:{port}"
    run = Tally(base, "m", sessions, sessions * 2 * turns, kill)

    def send(client: httpx.Client, n: int, native: bool, text: str, key: str) -> str | None:
        headers = {**AUTH, "Idempotency-Key": key}
        try:
            if native:
                got = client.post(f"{base}/api/sessions/m{n}/messages",
                                  json={"text": text}, headers=headers)
                return failed_how(got, got.status_code == 200 and any(
                    e.get("type") == "reply" for e in got.json().get("events", [])))
            got = client.post(f"{base}/v1/chat/completions", headers={
                **headers, "X-Clawd-Session-Key": f"m{n}"}, json={
                "model": "clawd", "messages": [{"role": "user", "content": text}]})
            if got.status_code != 200:
                said = str(got.json().get("error", {}).get("message", ""))[:60]
                return f"/v1 HTTP {got.status_code}: {said}"
            return None if got.json()["choices"][0]["message"].get("content") else "/v1 empty"
        except (ValueError, KeyError) as exc:
            return f"unreadable: {type(exc).__name__}"

    idle = clients_made(sessions * 2)

    def one(c: int) -> None:
        n, native = c // 2, c % 2 == 0
        client = idle.get()
        for t in range(turns):
            text = f"m{n} {'native' if native else 'v1'} turn {t}"
            run.turn(n, text, partial(send, client, n, native, text, f"mixed-{c}-{t}"))
        idle.put(client)

    with ThreadPoolExecutor(sessions * 2) as pool:
        run.start()
        list(pool.map(one, range(sessions * 2)))
    closed(idle)
    if run.failed:
        print(f"unanswered, by how the last try failed: {run.failures()}", file=sys.stderr)
    return run.result()


def tally(base: str, prefix: str, acknowledged: dict[int, list[str]]) -> dict[str, int]:
    """Turns a client was told were done but missing from the history, and turns run
    twice, over every session."""
    lost = doubled = 0
    with httpx.Client(timeout=60) as client:
        for n, told in acknowledged.items():
            items = client.get(f"{base}/api/sessions/{prefix}{n}/history?limit=200",
                               headers=AUTH).json()["items"]
            said = [i["text"] for i in items if i["type"] == "user"]
            lost += sum(1 for text in told if text not in said)
            doubled += sum(1 for text in set(said) if said.count(text) > 1)
    return {"lost": lost, "doubled": doubled}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--traffic", choices=("both", "sessions", "mixed"), default="both")
    parser.add_argument("--mixed-sessions", type=int, default=20)
    parser.add_argument("--mixed-turns", type=int, default=6)
    parser.add_argument("--reply-seconds", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every configuration this many times; report the median")
    parser.add_argument("--stand-in", choices=("process", "thread"), default="process")
    parser.add_argument("--serve-stand-in", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stand_in is not None:
        return serve_stand_in(args.serve_stand_in)
    import pgserver

    root = Path(tempfile.mkdtemp(prefix="clawd-bench-hosted-"))
    server = pgserver.get_server(root / "pg", cleanup_mode="stop")
    base = server.get_uri()
    runs = [("embedded, 1 process", None, 1, False)]
    runs += [(f"postgresql, {n} worker{'s' if n > 1 else ''}", f"run{n}", n, False)
             for n in map(int, args.workers.split(","))]
    runs.append(("postgresql, 2 workers, one killed", "killed", 2, True))
    tables = []
    ceiling = [("ceiling: turns in order, nothing more", None, CEILING, False)]
    if args.traffic in ("both", "sessions"):
        with stand_in(0.0, args.stand_in) as model:
            rows = run_all(runs, root, base, model, "sessions", lambda port, victim: load(
                port, args.sessions, args.turns, args.clients, victim), args.repeat)
        tables.append((f"{args.sessions} sessions × {args.turns} turns, {args.clients} "
                       f"clients, the stand-in answering at once", rows))
    if args.traffic in ("both", "mixed"):
        with stand_in(args.reply_seconds, args.stand_in) as model:
            rows = run_all(runs + ceiling, root, base, model, "mixed", lambda port, victim: mixed(
                port, args.mixed_sessions, args.mixed_turns, victim), args.repeat)
        tables.append((f"mixed: {args.mixed_sessions} sessions × 2 clients (native and /v1) "
                       f"× {args.mixed_turns} turns in a row, the stand-in taking "
                       f"{args.reply_seconds} s a reply", rows))
    server.cleanup()
    for title, rows in tables:
        embedded = rows[0][1]
        top = next((found["turns/s"] for label, found in rows if label.startswith("ceiling")),
                   None)
        print(f"{title}; {os.cpu_count()} CPUs"
              + (f"; each figure the median of {args.repeat} runs" if args.repeat > 1 else ""))
        print(f"{'':<36}{'turns/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'+p50':>8}{'lost':>6}"
              f"{'twice':>7}{'unanswered':>12}" + (f"{'turns/s range':>16}"
                                                  if args.repeat > 1 else "")
              + (f"{'of ceiling':>12}" if top else ""))
        for label, found in rows:
            added = found["p50 ms"] - embedded["p50 ms"]
            spread = f"{found['low']:>10.1f}–{found['high']:<5.1f}" if args.repeat > 1 else ""
            print(f"{label:<36}{found['turns/s']:>9.1f}{found['p50 ms']:>9.1f}"
                  f"{found['p95 ms']:>9.1f}{added:>+8.1f}{int(found['lost']):>6}"
                  f"{int(found['doubled']):>7}{int(found['unanswered']):>12}{spread}"
                  + (f"{found['turns/s'] / top:>12.0%}" if top else ""))
        timed = [(label, found) for label, found in rows if "run p50 ms" in found]
        if timed:
            print(f"  where a turn's time goes on the server, ms{'':<6}{'queued p50':>11}"
                  f"{'p95':>7}{'run p50':>9}{'p95':>7}")
            for label, found in timed:
                print(f"  {label:<46}{found['queued p50 ms']:>9.0f}{found['queued p95 ms']:>7.0f}"
                      f"{found['run p50 ms']:>9.0f}{found['run p95 ms']:>7.0f}")
    return 0


def where_time_goes(url: str) -> dict[str, float]:
    """From ``gateway_turns``: how long turns waited in their session's queue (until the
    session's holder claimed them) and how long they ran, p50 and p95 in ms."""
    import psycopg

    with psycopg.connect(url) as conn:
        if not conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = "
                            "'gateway_turns' AND column_name = 'started'").fetchone():
            return {}  # a clawd from before the queue in the database
        row = conn.execute(
            "SELECT percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY extract(epoch "
            "FROM started - created)), percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP "
            "(ORDER BY extract(epoch FROM ended - started)) FROM gateway_turns WHERE ended "
            "IS NOT NULL AND started IS NOT NULL").fetchone()
    if not row or row[0] is None:
        return {}
    (q50, q95), (r50, r95) = row
    return {"queued p50 ms": q50 * 1000, "queued p95 ms": q95 * 1000,
            "run p50 ms": r50 * 1000, "run p95 ms": r95 * 1000}


def run_all(runs: list[tuple[str, str | None, int, bool]], root: Path, base: str,
            model_url: str, name: str, traffic: Any, repeat: int = 1
            ) -> list[tuple[str, dict[str, float]]]:
    """Each configuration as its own ``clawd serve`` on a fresh database, under
    ``traffic(port, victim)``; with ``repeat``, every configuration that many times, the
    rounds interleaved, each figure the median of its runs (the lowest and highest turns/s
    beside them), lost, doubled and unanswered summed over the rounds."""
    found: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in runs}
    for round_ in range(repeat):
        for label, database, workers, kill in runs:
            found[label].append(run_one(label, database and f"{database}_{round_}", workers,
                                        kill, root, base, model_url, name, traffic))
    rows = []
    for label, tries in found.items():
        row = {name: statistics.median(f[name] for f in tries) for name in tries[0]}
        row.update(low=min(f["turns/s"] for f in tries), high=max(f["turns/s"] for f in tries))
        for kept in ("lost", "doubled", "unanswered"):
            row[kept] = sum(f[kept] for f in tries)
        rows.append((label, row))
    return rows


def run_one(label: str, database: str | None, workers: int, kill: bool, root: Path,
            base: str, model_url: str, name: str, traffic: Any) -> dict[str, float]:
    port = free_port()
    url = fresh(base, f"bench_{name}_{database}") if database else None
    env = home_for(root, model_url, port, url)
    if workers == CEILING:
        command = [str(ROOT / "scripts" / "hosted_ceiling.py"), str(port), model_url]
    else:
        command = ["-m", "clawd", "serve", *(["--workers", str(workers)] if workers > 1 else [])]
    child = start(command, env, port)
    victim = None
    if kill:
        import psutil

        victim = (child.child, psutil.Process(child.pid).children()[0].pid)
    try:
        found = traffic(port, victim)
        if url:
            found.update(where_time_goes(url))
    finally:
        said = child.stop()
        notes = [line for line in said.splitlines()
                 if not line.startswith(("clawd: GET", "clawd: POST"))]
        if kill or "Traceback" in said:
            print(f"{label}: clawd serve said:\n" + "\n".join(notes[-40:]),
                  file=sys.stderr)
    print(f"{name}, {label}: {json.dumps({k: round(v, 1) for k, v in found.items()})}",
          file=sys.stderr, flush=True)
    return found

if __name__ == "__main__":
    sys.exit(main())
