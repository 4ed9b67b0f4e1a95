"""Benchmark of time in search: temporal decay and MMR against the plain ranking, same run.

Two sets, each indexed once with the real local model, then searched under each variant
(``VARIANTS``: plain, decay, MMR, both, and a few other half-lives and lambdas):

- ``tests/data/memory_over_time.json`` (written before any setting was tried): three months
  of daily logs and a session file in which ten facts change (an address, a dentist date, a
  server renamed twice ...) and ten are stated once, long ago, or in MEMORY.md. Searched at
  the defaults (minScore 0.35) with 5 results. For the changed facts: found@1 / found@5 of
  a line with the newest value, and stale@1 (the first result holds only an older value).
  For the unchanged ones: found@1 / found@5, and how many of the found would fall under
  minScore if it were applied after decay instead of before (``lost if after``).
- LoCoMo conversations 0-4 (``scripts/bench_retrieval.py``'s questions and scoring, data at
  ``../shared/data/locomo-dev.json``). Its session files are written twice: as
  ``bench_retrieval.py`` writes them (``memory/session-NN.md``, undated: decay cannot touch
  them, MMR can) and under dated names (``memory/2023-05-08-session-01.md``, the date of the
  session in its name), with today the day of the conversation's last session. R@1 / R@5 /
  R@10 of hybrid search with minScore 0, as ``bench_retrieval.py`` measures, and for a few
  variants at the default minScore (``@minScore``), which decay comes after.

``--state DIR`` keeps the indexes and their embedding caches between runs (embedding LoCoMo
takes minutes); ``--skip-locomo`` runs the first set only.

    python scripts/bench_time_in_search.py [--state DIR] [--skip-locomo] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_retrieval import DEFAULT_DATA, conversations, evidence_ids, hits, session_files

from clawd.config import MemorySearch, Query
from clawd.memory.index import MemoryIndex
from clawd.storage.files.memory import open_file_index

OVER_TIME = ROOT / "tests" / "data" / "memory_over_time.json"
# name -> query settings on top of the defaults
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "decay 30d": {"temporalDecay": {"enabled": True, "halfLifeDays": 30}},
    "mmr 0.7": {"mmr": {"enabled": True, "lambda": 0.7}},
    "decay 30d + mmr 0.7": {"temporalDecay": {"enabled": True, "halfLifeDays": 30},
                            "mmr": {"enabled": True, "lambda": 0.7}},
    "decay 7d": {"temporalDecay": {"enabled": True, "halfLifeDays": 7}},
    "decay 90d": {"temporalDecay": {"enabled": True, "halfLifeDays": 90}},
    "decay 365d": {"temporalDecay": {"enabled": True, "halfLifeDays": 365}},
    "mmr 0.5": {"mmr": {"enabled": True, "lambda": 0.5}},
    "mmr 0.9": {"mmr": {"enabled": True, "lambda": 0.9}},
}
# LoCoMo variants also run at the default minScore (the others at 0, as bench_retrieval.py)
AT_DEFAULT_MIN = ("plain", "decay 30d", "decay 365d")
DEFAULT_MIN = Query().min_score
KS = (1, 5, 10)
_DAY = re.compile(r"(\d{1,2}) (\w+),? (\d{4})")


def holds(value: str, text: str) -> bool:
    """``value`` in ``text`` as whole words."""
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


def rank(right: list[bool]) -> str:
    """The 1-based rank of the first right result, or -."""
    return str(right.index(True) + 1) if any(right) else "-"


def write_files(workspace: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for old in workspace.rglob("*.md"):  # a file of an earlier layout
        if old.relative_to(workspace).as_posix() not in files:
            old.unlink()


def open_set(name: str, state: Path, files: dict[str, str], today: date,
             seed: Path | None = None) -> MemoryIndex:
    """The index of one workspace (``state/name``), synced; ``seed``: an index file whose
    embedding cache a new index starts from (the same text under other names)."""
    workspace = state / name / "workspace"
    write_files(workspace, files)
    agent = name.replace("-", "")  # conv0: the index bench_retrieval.py --state keeps
    target = state / name / "memory" / f"{agent}.sqlite"
    if seed is not None and seed.exists() and not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seed, target)
    settings = MemorySearch.model_validate({"provider": "local", "fallback": "none",
                                            "sync": {"watch": False}})
    index = open_file_index(agent, workspace, settings, state / name, today=lambda: today)
    index.sync()
    return index


def use(index: MemoryIndex, variant: str) -> None:
    index.settings.query = Query.model_validate(VARIANTS[variant])


# --- the set where facts change -------------------------------------------------------------

def over_time(state: Path, verbose: bool) -> dict[str, dict[str, int]]:
    data = json.loads(OVER_TIME.read_text(encoding="utf-8"))
    notes = {n["path"]: n["lines"] for n in data["notes"]}
    index = open_set("over-time", state, {p: "\n".join(lines) + "\n"
                                           for p, lines in notes.items()},
                     date.fromisoformat(data["today"]))

    def covers(result: dict, value: str) -> bool:
        lines = notes[result["path"]][result["startLine"] - 1:result["endLine"]]
        return any(holds(value, line) for line in lines)

    out: dict[str, dict[str, int]] = {}
    min_score = index.settings.query.min_score
    try:
        for variant in VARIANTS:
            use(index, variant)
            row = dict.fromkeys(("new@1", "new@5", "stale@1", "old@1", "old@5", "lost"), 0)
            for case in data["changed"]:
                results = index.search(case["query"], max_results=5)["results"]
                right = [covers(r, case["value"]) for r in results]
                row["new@1"] += bool(right[:1] and right[0])
                row["new@5"] += any(right)
                row["stale@1"] += bool(results) and not right[0] and any(
                    covers(results[0], old) for old in case["old"])
                if verbose:
                    print(f"  {variant:<20} changed   {rank(right)}  {case['query']}",
                          file=sys.stderr)
            for case in data["unchanged"]:
                results = index.search(case["query"], max_results=5)["results"]
                right = [covers(r, case["value"]) for r in results]
                row["old@1"] += bool(right[:1] and right[0])
                row["old@5"] += any(right)
                row["lost"] += any(right) and all(
                    r["score"] < min_score for r, ok in zip(results, right) if ok)
                if verbose:
                    print(f"  {variant:<20} unchanged {rank(right)}  {case['query']}",
                          file=sys.stderr)
            out[variant] = row
    finally:
        index.close()
    return out


# --- LoCoMo ---------------------------------------------------------------------------------

def session_day(text: str) -> date:
    """The date of a LoCoMo session (``1:56 pm on 8 May, 2023``)."""
    found = _DAY.search(text)
    if not found:
        raise ValueError(f"no date in {text!r}")
    return datetime.strptime(" ".join(found.groups()), "%d %B %Y").date()


def locomo(state: Path, data_path: Path, chosen: list[int]) -> dict[str, dict[str, float]]:
    data = json.loads(data_path.read_text(encoding="utf-8"))
    found: dict[str, dict[int, int]] = {}
    count = 0
    for number in chosen:
        conversation = data[number]["conversation"]
        files = session_files(conversation)
        days = [session_day(conversation[f"session_{n}_date_time"])
                for n in range(1, len(files) + 1)]
        renamed = {rel: f"memory/{day.isoformat()}-{Path(rel).name}"
                   for (rel, _, _), day in zip(files, days)}
        where = {dia: (rel, line) for rel, _, lines in files for dia, line in lines.items()}
        questions = []
        for q in data[number]["qa"]:
            evidence = [where[d] for d in evidence_ids(q) if d in where]
            if q.get("category") in (1, 2, 3, 4) and evidence:
                questions.append((q["question"], evidence))
        count += len(questions)
        for layout in ("undated", "dated"):
            name = f"conv-{number}" if layout == "undated" else f"conv-{number}-dated"
            rel_of = (lambda rel: rel) if layout == "undated" else renamed.__getitem__
            index = open_set(name, state, {rel_of(rel): text for rel, text, _ in files},
                             max(days), seed=state / f"conv-{number}" / "memory" /
                             f"conv{number}.sqlite")
            try:
                runs = [(v, 0.0) for v in VARIANTS if layout == "dated" or "decay" not in v]
                if layout == "dated":  # at the default minScore too: decay comes after it
                    runs += [(v, DEFAULT_MIN) for v in AT_DEFAULT_MIN]
                for variant, min_score in runs:
                    use(index, variant)
                    label = f"{layout}: {variant}" + (" @minScore" if min_score else "")
                    tally = found.setdefault(label, dict.fromkeys(KS, 0))
                    for question, evidence in questions:
                        results = index.search(question, max_results=max(KS),
                                               min_score=min_score)["results"]
                        moved = [(rel_of(rel), line) for rel, line in evidence]
                        for k in KS:
                            tally[k] += hits(results, moved, k)[0]
            finally:
                index.close()
        print(f"conversation {number}: {len(files)} sessions ({days[0]} to {max(days)}), "
              f"{len(questions)} questions", file=sys.stderr)
    return {name: {f"R@{k}": round(100 * tally[k] / count, 1) for k in KS} | {"questions": count}
            for name, tally in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state", type=Path, default=None,
                        help="keep the indexes and embedding caches here")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", default="0-4", help="e.g. 0-4 or 0,2")
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    chosen = conversations(args.conversations)
    scratch = None if args.state else tempfile.TemporaryDirectory(prefix="clawd-time-")
    state = args.state or Path(scratch.name)
    try:
        report: dict[str, Any] = {"overTime": over_time(state, args.verbose)}
        if not args.skip_locomo:
            report["locomo"] = locomo(state, args.data, chosen)
    finally:
        if scratch is not None:
            scratch.cleanup()
    if args.json:
        print(json.dumps(report))
        return 0
    print("facts over time (10 changed, 10 unchanged; 5 results at minScore 0.35): newest "
          "value found@1 / found@5, stale@1; unchanged found@1 / found@5, lost if minScore "
          "came after decay")
    print(f"{'variant':<22}{'new@1':>7}{'new@5':>7}{'stale@1':>9}{'old@1':>7}{'old@5':>7}"
          f"{'lost if after':>15}")
    for variant, row in report["overTime"].items():
        print(f"{variant:<22}{row['new@1']:>7}{row['new@5']:>7}{row['stale@1']:>9}"
              f"{row['old@1']:>7}{row['old@5']:>7}{row['lost']:>15}")
    if "locomo" in report:
        some = next(iter(report["locomo"].values()))
        print(f"\nLoCoMo conversations {args.conversations}: {some['questions']} questions, "
              "hybrid, minScore 0 or @minScore 0.35 (undated: bench_retrieval.py's files; dated: "
              "the session's date in the name, today = the last session's day)")
        print(f"{'layout: variant':<36}{'R@1':>7}{'R@5':>7}{'R@10':>7}")
        for name, row in report["locomo"].items():
            print(f"{name:<36}{row['R@1']:>7}{row['R@5']:>7}{row['R@10']:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
