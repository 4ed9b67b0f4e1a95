"""The embedded files against PostgreSQL, in one run: what a hosted clawd costs.

1. Turn overhead: a session with ``--history`` messages (2,000) already in its transcript;
   its opening (the history loaded) and ``--turns`` turns of the stand-in model (which
   answers at once, so what is timed is clawd's own work: appends, store updates, the
   request built): p50 and p95 per turn, per backend.
2. Memory: the LoCoMo dev conversations (``bench_retrieval.py``'s notes and questions)
   as notes in each backend; the first sync's time, hybrid search p50, and R@5 of hybrid
   search. With ``storage.url`` the index is derived from the database's rows (the notes
   are read from there), so R@5 is the same by construction; this checks it is.
3. Scale: ``--chunks`` (100k) synthetic chunks (about 300 Zipf-distributed words each, a
   384-d vector and five segment vectors, as ``bench_memory_latency.py`` makes them) written
   through each backend's index store; the vector stage alone (files: the in-process matrix
   the embedded default scans, and sqlite-vec's vec0 KNN; PostgreSQL: pgvector's HNSW) with
   its recall@10 against an exact scan, and hybrid search p50. Vectors are ``--vectors``
   ``clustered`` (around 500 topics, as real notes group) or ``random`` (uniform on the
   sphere: the hardest case for an approximate index).
4. Migrate: a files home of ``--sessions`` sessions (200, 20 messages each) and as many
   notes moved by ``clawd storage migrate``, with verification.

PostgreSQL: ``--url`` (a database clawd may create tables in), else a ``pgserver`` (the test
extra) started in a temporary folder for the run.

    python scripts/bench_storage.py [--history 2000] [--turns 40] [--sessions 200]
        [--conversations 0-1 | --skip-locomo] [--chunks 100000] [--vectors clustered|random]
        [--url postgresql://…]
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
from clawd.storage.files.memory import open_file_index
from clawd.storage.files.storage import FileStorage

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
    session = Session.open(rt, KEY)
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
    index = open_index("main", workspace, MemorySearch(), state,
                       sources=storage.memory_sources, files=storage.files,
                       open_store=storage.memory_index)
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


def corpus(size: int, kind: str, seed: int = 7):
    """(texts, chunk vectors, segment vectors, questions, query vectors) of a synthetic
    index; clustered vectors lie around 500 topic centres, queries near a chunk's topic."""
    import random

    import numpy as np
    from bench_memory_latency import COMMON, DIMS, SEGMENTS, unit, vocabulary, zipf_words

    rng = np.random.default_rng(seed)
    vocab = vocabulary(random.Random(seed))
    centres = unit(rng, (500, DIMS))
    texts, means, parts = [], [], []
    for _ in range(size):
        text = " ".join(np.concatenate([zipf_words(rng, vocab, 230), rng.choice(COMMON, 70)])
                        [rng.permutation(300)])
        texts.append("\n".join(text[j:j + 120] for j in range(0, len(text), 120)))
        if kind == "clustered":
            segments = centres[rng.integers(500)] + 0.08 * rng.standard_normal((SEGMENTS, DIMS))
            segments = (segments / np.linalg.norm(segments, axis=1, keepdims=True))
        else:
            segments = unit(rng, (SEGMENTS, DIMS))
        mean = segments.mean(axis=0)
        means.append((mean / np.linalg.norm(mean)).astype(np.float32))
        parts.append(segments.astype(np.float32))
    qrng = random.Random(3)
    questions = [f"what did we decide about the {vocab[qrng.randint(0, 50)]} "
                 f"{vocab[qrng.randint(50, 2000)]} and {vocab[qrng.randint(2000, 29999)]}?"
                 for _ in range(60)]
    if kind == "clustered":
        queries = centres[rng.integers(500, size=60)] + 0.1 * rng.standard_normal((60, DIMS))
        queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    else:
        queries = unit(rng, (60, DIMS))
    return texts, np.stack(means), parts, questions, queries


def timed(call, argument_lists: list[tuple]) -> tuple[list[float], list]:
    """(milliseconds, result) of ``call`` on each argument list, in order."""
    timings, results = [], []
    for arguments in argument_lists:
        t = time.perf_counter()
        results.append(call(*arguments))
        timings.append((time.perf_counter() - t) * 1000)
    return timings, results


def scale(storage, workspace: Path, state: Path, data: tuple) -> dict[str, float]:
    """Build the synthetic index through ``storage``'s index store; time its stages."""
    import numpy as np
    from bench_memory_latency import PresetEmbedder

    from clawd.memory import plan
    from clawd.memory.embeddings import signature

    texts, means, parts, questions, queries = data
    embedder = PresetEmbedder()
    settings = MemorySearch.model_validate({"sync": {"watch": False}, "fallback": "none"})
    index = open_file_index("scale", workspace, settings, state, embedder=embedder,
                            open_store=storage.memory_index)
    store = index.store
    t0 = time.perf_counter()
    ids = []
    with store.lock, store.transaction():
        store.reset(means.shape[1])
        for i, text in enumerate(texts):
            ids.append(store.insert_chunk(f"memory/n{i // 20}.md", "memory",
                                          (i % 20) * 30 + 1, (i % 20) * 30 + 30, "Notes",
                                          text, str(i), means[i].tobytes(),
                                          parts[i].tobytes()))
        store.bump_generation()
        store.set_meta("embedding", signature(embedder))
        store.set_meta("chunking", plan.chunking_signature(index.settings))
    built = time.perf_counter() - t0
    index.dirty, index.synced = False, True
    ids_array = np.array(ids)

    def exact(q):
        sims = means @ q
        return {int(ids_array[i]) for i in np.argpartition(-sims, 10)[:10]}

    def stage(q):
        if store.knn_in_process:
            return index.vectors.nearest(store, q, 24, wait=True)
        return [c for c, _ in store.vec_knn(q.tobytes(), 24)]

    def top10(found, q):  # the stage's candidates as the search ranks them
        vectors = store.get_vectors(found)
        return set(sorted(found, key=lambda c: -float(np.frombuffer(vectors[c][0],
                                                                    dtype=np.float32) @ q))[:10])

    def search(question, q):
        embedder.next = q
        index.search(question, max_results=6)

    out: dict[str, float] = {"build s": built}
    stage(queries[0])  # loads the in-process matrix
    timings, found = timed(stage, [(q,) for q in queries])
    out["vector p50 ms"] = percentile(timings, 0.5)
    out["vector recall@10"] = sum(len(top10(f, q) & exact(q))
                                  for f, q in zip(found, queries)) / (10 * len(queries))
    if store.knn_in_process:  # the file's other way: sqlite-vec's KNN
        timings, _ = timed(lambda q: store.vec_knn(q.tobytes(), 24), [(q,) for q in queries])
        out["vec0 knn p50 ms"] = percentile(timings, 0.5)
    timings, _ = timed(search, list(zip(questions, queries)))
    out["hybrid p50 ms"] = percentile(timings, 0.5)
    out["hybrid p95 ms"] = percentile(timings, 0.95)
    index.close()
    return out


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
    parser.add_argument("--skip-locomo", action="store_true",
                        help="leave out the LoCoMo part (its data is not in the checkout)")
    parser.add_argument("--data", type=Path, default=bench_retrieval.DEFAULT_DATA)
    parser.add_argument("--chunks", type=int, default=100_000, help="0: no scale part")
    parser.add_argument("--vectors", choices=("clustered", "random"), default="clustered")
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    from clawd.storage.postgres import database

    base = server(args.url)
    root = Path(tempfile.mkdtemp(prefix="clawd-bench-storage-"))
    os.environ["CLAWD_HOME"] = str(root / "home")
    rows: dict[str, dict[str, float]] = {}
    synthetic = corpus(args.chunks, args.vectors) if args.chunks else None
    parts = ("turns",) + (() if args.skip_locomo else ("memory",)) + \
        (("scale",) if synthetic else ())
    for kind in ("files", "postgresql"):
        rows[kind] = {}
        for part in parts:
            workspace = root / kind / part / "ws"
            (workspace / "memory").mkdir(parents=True)
            storage = (FileStorage("main", workspace, root / kind / part / "sessions")
                       if kind == "files"
                       else database(fresh(base, f"bench_{part}")).agent("main"))
            if part == "turns":
                rows[kind].update(turns(storage, workspace, args.history, args.turns))
            elif part == "scale":
                rows[kind].update(scale(storage, workspace, root / kind / "scale-state",
                                        synthetic))
            else:
                rows[kind].update(memory(storage, workspace, root / kind / "state",
                                         args.conversations, args.data))
    print(f"history {args.history} messages, {args.turns} turns; " + (
        "LoCoMo skipped" if args.skip_locomo else f"LoCoMo conversations {args.conversations}"
        f" ({int(rows['files']['questions'])} questions)"))
    if synthetic:
        print(f"scale: {args.chunks:,} chunks, {args.vectors} vectors (build, vector, "
              f"hybrid rows)")
    print(f"{'':<18}{'files':>12}{'postgresql':>12}")
    for name in dict.fromkeys([*rows["files"], *rows["postgresql"]]):
        if name != "questions":
            cells = "".join(f"{rows[k][name]:>12.2f}" if name in rows[k] else f"{'-':>12}"
                            for k in ("files", "postgresql"))
            print(f"{name:<18}{cells}")
    moved = migrate_home(root / "migrate", args.sessions, fresh(base, "bench_migrate"))
    print(f"migrate {args.sessions} sessions (20 messages each) and {args.sessions} notes: "
          f"{moved['migrate s']:.1f} s (exit {moved['exit']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
