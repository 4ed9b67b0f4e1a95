"""Precision and recall of the flush fallback's fact selection, against the sentences of
``tests/data/fact_sentences.jsonl`` (labelled ``fact``, ``request`` or ``other``).

The labels were written before the selector, and the split was fixed with them: the odd
lines (1-based) are the tuning half, the even lines the held-out half. A sentence counts as
selected when the fallback would keep it: the new selector (``context.facts.fact_text``) or,
as the baseline in the same run, the old one (a sentence that is not a question or chatter,
and holds a number, identifier or capitalised name: ``references.users_words`` on
``told``). ``tests/data/fact_sentences_fresh.jsonl`` (``fresh``) was written after
the selector, of other shapes, and is scored as it is: never tuned on. Precision and
recall are those of the ``fact`` label. Corrections are scored apart: the new and old values
found (``context.facts.correction``) against those labelled, each matching when one
contains the other, case aside.

    python scripts/bench_fact_selection.py [--mistakes tuning|held-out|fresh|all]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawd.context.facts import correction, fact_text, is_chatter  # noqa: E402
from clawd.context.references import users_words  # noqa: E402
from clawd.core.messages import Message  # noqa: E402
from clawd.core.textcut import sentences  # noqa: E402

DATA = ROOT / "tests" / "data" / "fact_sentences.jsonl"
FRESH = ROOT / "tests" / "data" / "fact_sentences_fresh.jsonl"


def load(path: Path = DATA) -> list[dict]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            row["half"] = "tuning" if number % 2 else "held-out"
            rows.append(row)
    return rows


def told(text: str) -> list[str]:
    """The old reading of what a message tells (the baseline): its sentences but questions
    and chatter."""
    return [s for s in sentences(text) if not s.rstrip().endswith("?") and not is_chatter(s)]


def old_selector(sentence: str) -> bool:
    return bool(users_words("", [Message.user(" ".join(told(sentence)))]))


def new_selector(sentence: str) -> bool:
    return fact_text(sentence) is not None


def scores(rows: list[dict], select: Callable[[str], bool]) -> tuple[float, float, str]:
    picked = [select(r["sentence"]) for r in rows]
    true_pos = sum(p and r["label"] == "fact" for p, r in zip(picked, rows))
    chosen, facts = sum(picked), sum(r["label"] == "fact" for r in rows)
    precision = true_pos / chosen if chosen else 1.0
    recall = true_pos / facts if facts else 1.0
    return precision, recall, f"{true_pos}/{chosen} selected, {true_pos}/{facts} facts"


def _same(found: str | None, wanted: str | None) -> bool:
    if wanted is None or found is None:
        return found is None and wanted is None
    a, b = found.lower(), wanted.lower()
    return bool(a) and (a in b or b in a)


def corrections(rows: list[dict]) -> tuple[int, int]:
    labelled = [r for r in rows if "new" in r]
    right = 0
    for row in labelled:
        found = correction(row["sentence"])
        right += found is not None and _same(found.new, row["new"]) and _same(found.old,
                                                                                row["old"])
    return right, len(labelled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mistakes", choices=("tuning", "held-out", "fresh", "all", "none"),
                        default="none", help="list the new selector's mistakes on a half")
    args = parser.parse_args()
    rows = load()
    fresh = load(FRESH)
    halves = {"tuning": [r for r in rows if r["half"] == "tuning"],
              "held-out": [r for r in rows if r["half"] == "held-out"], "whole": rows,
              "fresh": fresh}
    for path, part in ((DATA, rows), (FRESH, fresh)):
        print(f"{len(part)} sentences ({sum(r['label'] == 'fact' for r in part)} facts), "
              f"{path.relative_to(ROOT)}")
    print()
    print(f"{'half':<9} {'selector':<9} {'precision':>9} {'recall':>7}  counts")
    for name, part in halves.items():
        for label, select in (("old", old_selector), ("new", new_selector)):
            precision, recall, counts = scores(part, select)
            print(f"{name:<9} {label:<9} {precision:>9.2f} {recall:>7.2f}  {counts}")
    print()
    for name, part in halves.items():
        right, total = corrections(part)
        print(f"corrections, {name}: {right}/{total} with the new and old values right")
    if args.mistakes != "none":
        shown = rows + fresh if args.mistakes == "all" else halves[args.mistakes]
        print(f"\nmistakes of the new selector ({args.mistakes}):")
        for row in shown:
            picked = new_selector(row["sentence"])
            if picked != (row["label"] == "fact"):
                print(f"  {'kept' if picked else 'left'} {row['label']:<8} {row['sentence']}")
            if "new" in row:
                found = correction(row["sentence"])
                if not (found and _same(found.new, row["new"]) and _same(found.old, row["old"])):
                    print(f"  correction {found} != ({row['new']!r}, {row['old']!r}): "
                          f"{row['sentence']}")


if __name__ == "__main__":
    main()
