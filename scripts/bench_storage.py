"""The embedded files against PostgreSQL, in one run: what a hosted clawd costs.

1. Turn overhead: a session with ``--history`` messages (2,000) already in its transcript;
   its opening (the history loaded) and ``--turns`` turns of the stand-in model (which
   answers at once, so what is timed is clawd's own work: appends, store updates, the
   request built): p50 and p95 per turn, per backend.
2. Memory: the LoCoMo dev conversations (``bench_retrieval.py``'s notes and questions)
   as notes in each backend; the first sync's time, hybrid search p50, and R@5 of hybrid
   search. With ``storage.url`` the index is derived from the database's rows (the notes
   are read from there), so R@5 is the same by construction; this checks it is.
3. Migrate: a files home of ``--sessions`` sessions (200, 20 messages each) and as many
   notes moved by ``clawd storage migrate``, with verification.

PostgreSQL: ``--url`` (a database clawd may create tables in), else a ``pgserver`` (the test
extra) started in a temporary folder for the run.

    python scripts/bench_storage.py [--history 2000] [--turns 40] [--sessions 200]
        [--conversations 0-1] [--url postgresql://…]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_retrieval  # noqa: E402

from clawd.config import AgentDefaults, Config, MemorySearch
from clawd.core.messages import Message
from clawd.loop.runtime import Runtime, fixed_models
from clawd.loop.session import Session
from clawd.memory.index import open_index
from clawd.providers.scripted import ScriptedProvider
from clawd.sessions.transcript import begin
from clawd.storage.files import FileStorage

KEY = "agent:main:main"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def fill(storage, messages: int) -> None:
    """A session of ``messages`` messages, written as the loop writes them."""
    from clawd.sessions.entry import new_entry

    log = storage.transcript("bench")
    begin(log, "main", key=KEY, model="bench/model")
    lines = []
    for n in range(messages // 2):
        for message in (Message.user(f"question {n}: what about item {n}?"),
                        Message.assistant(f"Item {n} is fine; nothing to do for it today.")):
            import orjson
            lines.append(orjson.dumps(message.to_entry()).decode())
    if hasattr(log, "append_lines"):
        log.append_lines(lines)
    else:
        with open(log.path, "a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
    entry = new_entry("bench", storage.session_file("bench"), "bench/model")
    storage.sessions.update(KEY, lambda _old: entry)


def turns(storage, workspace: Path, history: int, count: int) -> dict[str, float]:
    fill(storage, history)
    provider = ScriptedProvider(default=lambda request: "Fine.")
    rt = Runtime(config=Config(), agent_id="main",
                 settings=AgentDefaults.model_validate({
                     "workspace": str(workspace), "memorySearch": {"enabled": False}}),
                 workspace=workspace, storage=storage,
                 models=fixed_models(provider, 1_000_000, profile="strong"), tools=[])
    started = time.perf_counter()
    session = Session(rt, KEY)
    opened = time.perf_counter() - started
    timings = []
    for n in range(count):
        t0 = time.perf_counter()
        list(session.run_turn(f"one more thing, number {n}"))
        timings.append((time.perf_counter() - t0) * 1000)
    session.close()
    return {"open ms": opened * 1000, "turn p50 ms": percentile(timings, 0.5),
            "turn p95 ms": percentile(timings, 0.95)}


def memory(storage, workspace: Path, state: Path, spec: str, data: Path) -> dict[str, float]:
    import json

    items = json.loads(data.read_text())
    stored = getattr(storage, "memory_sources", None)
    hit5, count, search_ms, sync_s = 0, 0, [], 0.0
    for number in bench_retrieval.conversations(spec):
        files = bench_retrieval.session_files(items[number]["conversation"])
        prefix = f"memory/c{number}-"
        for rel, text, _ in files:
            storage.files.write(prefix + rel.removeprefix("memory/"), text)
        where = {dia: (prefix + rel.removeprefix("memory/"), line)
                 for rel, _, lines in files for dia, line in lines.items()}
        for q in items[number]["qa"]:
            evidence = [where[d] for d in bench_retrieval.evidence_ids(q) if d in where]
            if q.get("category") in (1, 2, 3, 4) and evidence:
                count += 1
                q["_evidence"] = evidence
    index = open_index("main", workspace, MemorySearch(), state, None, stored=stored,
                       files=storage.files)
    t0 = time.perf_counter()
    index.sync()
    sync_s = time.perf_counter() - t0
    for number in bench_retrieval.conversations(spec):
        for q in items[number]["qa"]:
            if "_evidence" not in q:
                continue
            t0 = time.perf_counter()
            found = index.search(q["question"], max_results=5, min_score=0.0)["results"]
            search_ms.append((time.perf_counter() - t0) * 1000)
            hit5 += bench_retrieval.hits(found, q["_evidence"], 5)[0]
    index.close()
    return {"first sync s": sync_s, "search p50 ms": percentile(search_ms, 0.5),
            "R@5": 100 * hit5 / max(count, 1), "questions": count}


def migrate_home(home: Path, sessions: int, url: str) -> dict[str, float]:
    """A files home of ``sessions`` sessions (20 messages each) and notes, migrated."""
    os.environ["CLAWD_HOME"] = str(home / ".clawd")
    workspace = home / "clawd"
    files = FileStorage("main", workspace, home / ".clawd" / "agents" / "main" / "sessions")
    for n in range(sessions):
        log = files.transcript(f"s{n:04d}")
        begin(log, "main", key=f"agent:main:s{n}")
        for m in range(10):
            log.append_message(Message.user(f"session {n} question {m}"))
            log.append_message(Message.assistant(f"session {n} answer {m}"))
        files.files.write(f"memory/2026-01-{n % 28 + 1:02d}-{n}.md", f"- note {n}\n")
    from clawd.frontends.cli import main

    os.environ["HOME"] = str(home)
    t0 = time.perf_counter()
    code = main(["storage", "migrate", "--to", url])
    return {"migrate s": time.perf_counter() - t0, "exit": code}


def server(url: str | None) -> str:
    if url:
        return url
    import pgserver

    found = pgserver.get_server(tempfile.mkdtemp(prefix="clawd-bench-pg-"), cleanup_mode="stop")
    return found.get_uri()


def fresh(base: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--conversations", default="0-1")
    parser.add_argument("--data", type=Path, default=bench_retrieval.DEFAULT_DATA)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    from clawd.storage.postgres import database

    base = server(args.url)
    root = Path(tempfile.mkdtemp(prefix="clawd-bench-storage-"))
    os.environ["CLAWD_HOME"] = str(root / "home")
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for kind in ("files", "postgresql"):
        rows[kind] = {}
        for part in ("turns", "memory"):
            workspace = root / kind / part / "ws"
            (workspace / "memory").mkdir(parents=True)
            storage = (FileStorage("main", workspace, root / kind / part / "sessions")
                       if kind == "files"
                       else database(fresh(base, f"bench_{part}")).agent("main"))
            if part == "turns":
                rows[kind].update(turns(storage, workspace, args.history, args.turns))
            else:
                rows[kind].update(memory(storage, workspace, root / kind / "state",
                                         args.conversations, args.data))
    print(f"history {args.history} messages, {args.turns} turns; LoCoMo conversations "
          f"{args.conversations} ({int(rows['files']['questions'])} questions)")
    print(f"{'':<16}{'files':>12}{'postgresql':>12}")
    for name in rows["files"]:
        if name != "questions":
            print(f"{name:<16}{rows['files'][name]:>12.2f}{rows['postgresql'][name]:>12.2f}")
    moved = migrate_home(root / "migrate", args.sessions, fresh(base, "bench_migrate"))
    print(f"migrate {args.sessions} sessions (20 messages each) and {args.sessions} notes: "
          f"{moved['migrate s']:.1f} s (exit {moved['exit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
