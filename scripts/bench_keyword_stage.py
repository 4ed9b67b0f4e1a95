"""Latency of the keyword stage alone on a large index, beside the unbounded FTS5 query.

An index of N chunks (default 100k) of the synthetic corpus of ``bench_memory_latency.py``
(about 300 Zipf-distributed words per chunk, a quarter of them stop words) is filled
directly through the store, without vectors. Three kinds of question run through the
keyword stage (``candidates.keyword_hits``: query plan, FTS5, coverage and line evidence):

- common: two or three words each found in 20-100% of the chunks, nothing rarer;
- mixed: such words with a word found in 0.5-5% of the chunks;
- rare: common words with one found in at most 20 chunks (an identifier, a name).

In the same loop, each question also runs as the unbounded FTS5 query (every word OR-ed,
all matches ranked by BM25: ``search.fts_query``), and as the plan's MATCH without the
newest-matches bound (what the stage asked before that bound). For rare questions the
chunks holding the rare word that the unbounded query ranks in its top 10 must all be among
the stage's hits.

    python scripts/bench_keyword_stage.py [--size 100000] [--queries 40]
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
sys.path.insert(0, str(ROOT / "scripts"))

import numpy as np
from bench_memory_latency import COMMON, percentile, vocabulary, zipf_words

from clawd.memory import keywords
from clawd.memory import search as policy
from clawd.memory.candidates import keyword_hits
from clawd.memory.store import Store

POOL = 24  # candidates at the defaults: maxResults 6 x candidateMultiplier 4


def build(size: int, path: Path, seed: int = 7) -> tuple[Store, list[str]]:
    rng = np.random.default_rng(seed)
    vocab = vocabulary(random.Random(seed))
    store = Store(path, vector_enabled=False)
    with store.lock, store.transaction():
        for i in range(size):
            words = zipf_words(rng, vocab, 230)
            filler = rng.choice(COMMON, 70)
            text = " ".join(np.concatenate([words, filler])[rng.permutation(300)])
            lines = "\n".join(text[j:j + 120] for j in range(0, len(text), 120))
            store.insert_chunk(f"memory/n{i // 20}.md", "memory", (i % 20) * 30 + 1,
                               (i % 20) * 30 + 30, "Notes", lines, str(i), None, None)
    return store, vocab


def questions(store: Store, vocab: list[str], count: int) -> dict[str, list[str]]:
    total, docs = store.term_stats(vocab)
    by_share = [(docs.get(w, 0) / total, w) for w in vocab]
    common = [w for share, w in by_share if share >= 0.2 and w not in policy.STOP_WORDS]
    mid = [w for share, w in by_share if 0.005 <= share <= 0.05]
    rare = [w for share, w in by_share if 0 < share * total <= 20]
    rng = random.Random(3)
    # Only stop words around the chosen words, so the chosen words are the whole query.
    return {
        "common": [f"what about the {' and '.join(rng.sample(common, rng.randint(2, 3)))}?"
                   for _ in range(count)],
        "mixed": [f"what about {rng.choice(common)} {rng.choice(mid)} and {rng.choice(common)}?"
                  for _ in range(count)],
        "rare": [f"where is the {rng.choice(common)} {rng.choice(rare)}?" for _ in range(count)],
    }


def rare_word(store: Store, question: str) -> str:
    words = policy.query_terms(question)
    _, docs = store.term_stats([t for w in words for t in store.fts_tokens(w)])
    return min(words, key=lambda w: docs.get(store.fts_tokens(w)[0], 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawd-keywords-") as tmp:
        t0 = time.perf_counter()
        store, vocab = build(args.size, Path(tmp) / "index.sqlite")
        build_s = time.perf_counter() - t0
        asked = questions(store, vocab, args.queries)
        for kind in asked:  # warm the page cache and the chunk count
            for q in asked[kind][:3]:
                keyword_hits(store, q, POOL)
                store.fts_search(policy.fts_query(q), POOL)
        print(f"keyword stage at {args.size} chunks (built in {build_s:.0f} s), pool {POOL}, "
              f"{args.queries} questions per kind; p50 / p95 in ms")
        print(f"{'questions':<10}{'stage':>16}{'plan, unbounded':>20}{'all words, unbounded':>24}"
              f"{'bounded':>9}  rare-word recall")
        for kind, qs in asked.items():
            stage, plan_only, unbounded, bounded = [], [], [], 0
            found = wanted = 0
            for q in qs:
                plan = keywords.plan(policy.query_terms(q), policy.compounds(q),
                                     store.fts_tokens, store.term_stats)
                bounded += plan.newest is not None
                t = time.perf_counter()
                hits = keyword_hits(store, q, POOL)
                stage.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                store.fts_search(plan.match, POOL)
                plan_only.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                full = store.fts_search(policy.fts_query(q), POOL)
                unbounded.append((time.perf_counter() - t) * 1000)
                if kind == "rare":
                    word = store.fts_tokens(rare_word(store, q))[0]
                    texts = store.chunk_texts(c for c, _ in full[:10])
                    holding = {c for c, text in texts.items() if word in store.fts_tokens(text)}
                    wanted += len(holding)
                    found += len(holding & set(hits[0] if hits else {}))
            recall = f"{found}/{wanted}" if kind == "rare" else ""
            print(f"{kind:<10}"
                  f"{percentile(stage, 50):>8.1f} /{percentile(stage, 95):>6.1f}"
                  f"{percentile(plan_only, 50):>12.1f} /{percentile(plan_only, 95):>6.1f}"
                  f"{percentile(unbounded, 50):>16.1f} /{percentile(unbounded, 95):>6.1f}"
                  f"{bounded:>6}/{len(qs):<3} {recall}", flush=True)
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
