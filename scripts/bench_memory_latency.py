"""Latency and throughput benchmark of memory search.

Search: an index of N synthetic chunks (about 400 tokens of Zipf-distributed words each,
a 384-d chunk vector and five segment vectors, as the local model stores them) is filled
directly through the store, then natural-language questions run through
``MemoryIndex.search`` (hybrid: the vector stage + FTS5 + segment re-scoring + merge); p50/p95
are reported per size, beside the raw baselines of the same run: a vec0 KNN alone and a
numpy scan of a matrix of the same vectors. The vector stage (the in-process matrix,
``matrix.py``) is timed on its own, with its recall@10 against vec0's exact KNN and its
memory. The query vector is precomputed so the numbers are the index's own; the local
model's query-embedding time is reported on its own line.

Search during a sync: on the smaller index, search p50/p95 while a sync embeds new notes
with the local model in the background, beside the same searches on the idle index.

Indexing: a workspace of Markdown notes is synced with the local model from scratch
(chunking, segmenting, embedding, writing), and its chunks/s is set against the raw speed
of the model embedding the same chunks whole.

The machine may be shared: every figure is printed beside its baseline measured in the same
run, and the goals are ratios to those baselines where that is what they mean.

    python scripts/bench_memory_latency.py [--sizes 10000,100000] [--queries 60]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np

from clawd.config import MemorySearch
from clawd.memory import indexing
from clawd.memory.chunker import chunk_text
from clawd.memory.embeddings import signature
from clawd.memory.index import open_index
from clawd.memory.search import STOP_WORDS

DIMS = 384
SEGMENTS = 5
COMMON = sorted(STOP_WORDS - {"s", "t", "d", "ll", "m", "re", "ve"})


class PresetEmbedder:
    """Stands in for the model at query time: returns the vector it is given."""

    provider, model, fingerprint = "preset", "random-384", "bench"
    segment_tokens, calibration = 96, (0.1, 0.5)

    def __init__(self) -> None:
        self.dims = DIMS
        self.next: np.ndarray | None = None

    def embed_query(self, text: str) -> np.ndarray:
        return self.next

    def embed_documents(self, texts, progress=None):
        """Documents go through the real local model (search during a sync)."""
        return self.documents.embed_documents(texts, progress)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    @property
    def documents(self):
        """The local model, for the documents a sync embeds."""
        from clawd.memory.local import LocalEmbedder

        if not hasattr(self, "_documents"):
            self._documents = LocalEmbedder()
        return self._documents


def vocabulary(rng: random.Random, size: int = 30000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def zipf_words(rng: np.random.Generator, vocab: list[str], n: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.15, n), len(vocab)) - 1
    return [vocab[r] for r in ranks]


def unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def build(size: int, state: Path, seed: int = 7):
    rng = np.random.default_rng(seed)
    vocab = vocabulary(random.Random(seed))
    embedder = PresetEmbedder()
    settings = MemorySearch.model_validate({"sync": {"watch": False}, "fallback": "none"})
    workspace = state / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    index = open_index(f"bench{size}", workspace, settings, state, embedder=embedder)
    store = index.store
    started = time.perf_counter()
    with store.lock, store.transaction():
        store.reset(DIMS)
        for i in range(size):
            words = zipf_words(rng, vocab, 230)
            filler = rng.choice(COMMON, 70)
            text = " ".join(np.concatenate([words, filler])[rng.permutation(300)])
            lines = "\n".join(text[j:j + 120] for j in range(0, len(text), 120))
            segments = unit(rng, (SEGMENTS, DIMS))
            mean = segments.mean(axis=0)
            mean /= np.linalg.norm(mean)
            store.insert_chunk(f"memory/n{i // 20}.md", "memory", (i % 20) * 30 + 1,
                               (i % 20) * 30 + 30, "Notes", lines, str(i),
                               mean.tobytes(), segments.tobytes())
        store.set_meta("embedding", signature(embedder))
        store.set_meta("chunking", indexing.chunking_signature(index))
    index.dirty = False
    return index, embedder, vocab, time.perf_counter() - started


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def bench_search(size: int, queries: int, state: Path, during_sync: bool = False) -> dict:
    index, embedder, vocab, build_s = build(size, state)
    rng = np.random.default_rng(1)
    qrng = random.Random(3)
    # Questions mix a common, a mid-frequency and a rare word with stop words.
    questions = [f"what did we decide about the {vocab[qrng.randint(0, 50)]} "
                 f"{vocab[qrng.randint(50, 2000)]} and {vocab[qrng.randint(2000, 29999)]}?"
                 for _ in range(queries)]
    vectors = unit(rng, (queries, DIMS))
    for q, v in zip(questions[:5], vectors[:5]):  # warm the page cache
        embedder.next = v
        index.search(q)
    index.vectors.settle()  # the in-process matrix, loaded in the background
    # The numpy baseline: a matrix of the same vectors, scanned in the same loop as the rest
    # so that every figure meets the same machine load.
    ids, blobs = zip(*index.store.all_vectors())
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), DIMS)
    hybrid, knn, stage, scan = [], [], [], []
    for q, v in zip(questions, vectors):
        embedder.next = v
        t0 = time.perf_counter()
        index.search(q, max_results=6)
        hybrid.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        index.store.vec_knn(v.tobytes(), 24)
        knn.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        index.vectors.nearest(index.store, v, 24, wait=False)
        stage.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        sims = matrix @ v
        np.argpartition(-sims, 24)[:24]
        scan.append((time.perf_counter() - t0) * 1000)
    # recall@10 of the vector stage against vec0's exact KNN
    hits = 0
    for v in vectors:
        exact = {cid for cid, _ in index.store.vec_knn(v.tobytes(), 10)}
        hits += len(exact & set(index.vectors.nearest(index.store, v, 10, wait=False) or []))
    recall = hits / (10 * len(vectors))
    del matrix
    result = {"size": size, "build_s": build_s, "hybrid": hybrid, "knn": knn, "scan": scan,
              "stage": stage, "recall": recall, "matrix_mb": index.vectors.nbytes / 2**20}
    if during_sync:
        result.update(search_during_sync(index, embedder, questions, vectors, state))
    index.close()
    return result


def search_during_sync(index, embedder, questions, vectors, state: Path) -> dict:
    """Search latencies on the idle index, then while a sync embeds new notes."""
    write_notes(index.workspace, 60, random.Random(5))
    idle = []
    for q, v in zip(questions, vectors):
        embedder.next = v
        t0 = time.perf_counter()
        index.search(q, max_results=6)
        idle.append((time.perf_counter() - t0) * 1000)
    embedder.documents.embed_query("warm up")
    index.mark_dirty()
    t_sync = time.perf_counter()
    index.sync_in_background()
    busy = []
    while index._background is not None and index._background.is_alive():
        for q, v in zip(questions, vectors):
            embedder.next = v
            t0 = time.perf_counter()
            index.search(q, max_results=6)
            busy.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.02)
    return {"idle": idle, "busy": busy, "sync_s": time.perf_counter() - t_sync,
            "synced": index.last_sync or {}}


def write_notes(workspace: Path, files: int, rng: random.Random) -> None:
    vocab = vocabulary(rng, 5000)
    for f in range(files):
        body = [f"# Notes {f}", ""]
        for _ in range(40):  # about four chunks per file
            words = [rng.choice(COMMON) if rng.random() < 0.4 else rng.choice(vocab)
                     for _ in range(rng.randint(8, 30))]
            body.append("- " + " ".join(words))
        path = workspace / "memory" / f"note-{f:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n", encoding="utf-8")


def bench_indexing(state: Path, chunks_wanted: int) -> dict:
    from clawd.memory.local import LocalEmbedder

    workspace = state / "ws"
    write_notes(workspace, max(1, chunks_wanted // 4), random.Random(11))
    settings = MemorySearch.model_validate({"provider": "local", "sync": {"watch": False},
                                            "fallback": "none"})
    embedder = LocalEmbedder()
    embedder.embed_query("warm up")
    index = open_index("indexing", workspace, settings, state, embedder=embedder)
    t0 = time.perf_counter()
    summary = index.sync()
    sync_s = time.perf_counter() - t0
    chunks = index.status()["chunks"]
    index.close()
    texts = []
    for path in sorted((workspace / "memory").glob("*.md")):
        texts += [c.context_text() for c in chunk_text(path.read_text(encoding="utf-8"))]
    t0 = time.perf_counter()
    embedder.embed_documents(texts)
    raw_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    query_ms = []
    for i in range(30):
        t1 = time.perf_counter()
        embedder.embed_query(f"what did we decide about item {i} last week?")
        query_ms.append((time.perf_counter() - t1) * 1000)
    return {"chunks": chunks, "segments": summary["embedded"], "sync_s": sync_s,
            "raw_chunks": len(texts), "raw_s": raw_s, "query_ms": query_ms,
            "model": embedder.model}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--index-chunks", type=int, default=160,
                        help="chunks in the indexing-throughput workspace (0: skip)")
    parser.add_argument("--no-sync-test", dest="sync_test", action="store_false",
                        help="skip searching while a sync runs")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="clawd-latency-") as tmp:
        print(f"hybrid search latency (384-d, {SEGMENTS} segment vectors per chunk, "
              f"max_results 6, {args.queries} queries)")
        print(f"{'chunks':>8} {'hybrid p50':>11} {'p95':>8} | {'stage p50':>10} "
              f"{'vec0 KNN p50':>13} {'numpy scan p50':>15} | recall@10  matrix MB  (build s)")
        found = {}
        for size in sizes:
            r = bench_search(size, args.queries, Path(tmp) / f"s{size}",
                             during_sync=args.sync_test and size == min(sizes))
            found[size] = r
            print(f"{size:>8} {percentile(r['hybrid'], 50):>9.1f}ms "
                  f"{percentile(r['hybrid'], 95):>6.1f}ms | {percentile(r['stage'], 50):>8.2f}ms "
                  f"{percentile(r['knn'], 50):>11.1f}ms {percentile(r['scan'], 50):>13.2f}ms | "
                  f"{r['recall']:>9.3f} {r['matrix_mb']:>10.0f}  ({r['build_s']:.0f})", flush=True)
        small, large = found[min(sizes)], found[max(sizes)]
        scan_l, scan_s = percentile(large["scan"], 50), percentile(small["scan"], 50)
        rows.append((f"hybrid search p50 @{max(sizes) // 1000}k",
                     (f"{percentile(large['hybrid'], 50):.1f} ms "
                      f"({percentile(large['hybrid'], 50) / scan_l:.1f}x numpy)"),
                     f"numpy scan {scan_l:.1f} ms", "<= 15 ms",
                     percentile(large["hybrid"], 50) <= 15))
        rows.append((f"vector stage @{max(sizes) // 1000}k",
                     (f"matrix {percentile(large['stage'], 50):.1f} ms "
                      f"(recall@10 {large['recall']:.3f})"),
                     f"numpy {scan_l:.1f} ms, vec0 {percentile(large['knn'], 50):.1f} ms",
                     "<= 2x numpy", percentile(large["stage"], 50) <= 2 * scan_l
                     and large["recall"] >= 0.99))
        rows.append((f"hybrid p50 @{min(sizes) // 1000}k",
                     (f"{percentile(small['hybrid'], 50):.1f} ms "
                      f"({percentile(small['hybrid'], 50) / scan_s:.1f}x numpy)"),
                     f"numpy {scan_s:.2f} ms",
                     "<= 6 ms", percentile(small["hybrid"], 50) <= 6))
        if "busy" in small:
            busy, idle = percentile(small["busy"], 95), percentile(small["idle"], 95)
            rows.append((f"search p95 during a sync @{min(sizes) // 1000}k",
                         (f"{busy:.1f} ms ({len(small['busy'])} searches, sync "
                          f"{small['sync_s']:.0f} s, {small['synced'].get('chunks', 0)} chunks)"),
                         f"idle p95 {idle:.1f} ms", "no wait for the sync",
                         busy < 1000 * small["sync_s"] / 4))
        if args.index_chunks:
            r = bench_indexing(Path(tmp) / "indexing", args.index_chunks)
            speed, raw = r["chunks"] / r["sync_s"], r["raw_chunks"] / r["raw_s"]
            print(f"\nindexing with the local model ({r['model']}): {r['chunks']} chunks "
                  f"({r['segments']} segments embedded) in {r['sync_s']:.1f} s = "
                  f"{speed:.1f} chunks/s")
            print(f"raw model speed on the same chunks embedded whole: {r['raw_chunks']} in "
                  f"{r['raw_s']:.1f} s = {raw:.1f} chunks/s")
            print(f"query embedding p50 {percentile(r['query_ms'], 50):.1f} ms, "
                  f"p95 {percentile(r['query_ms'], 95):.1f} ms")
            rows.append(("indexing", f"{speed:.1f} chunks/s", f"raw model {raw:.1f} chunks/s",
                         ">= 0.95x raw", speed >= 0.95 * raw))
    print("\n| figure | now | baseline in the same run | goal | met |")
    print("|---|---|---|---|---|")
    for name, now, base, goal, met in rows:
        print(f"| {name} | {now} | {base} | {goal} | {'yes' if met else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
