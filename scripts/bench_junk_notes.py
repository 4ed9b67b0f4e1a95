"""How the junk-note guard judges labelled daily-log writes (``guards.junk_notes.junk``).

``tests/data/daily_notes.jsonl`` was written before the detector; the detector was written
knowing it. ``tests/data/daily_notes_fresh.jsonl`` was written after, of other shapes; one
change was made after scoring it (a line without repeats and with two words of its own is a
note: "Meetings at 09:00, 10:00 and 11:00 on Tuesday" had been refused). Each write is
labelled ``junk`` or ``note`` beside the user's message of its turn; the script prints
how many of each are judged right, and every mistake.

    python scripts/bench_junk_notes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clawd.guards.junk_notes import junk  # noqa: E402

SETS = [ROOT / "tests" / "data" / "daily_notes.jsonl",
        ROOT / "tests" / "data" / "daily_notes_fresh.jsonl"]


def main() -> None:
    for path in SETS:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip()]
        right = {"junk": 0, "note": 0}
        wrong = []
        for row in rows:
            why = junk(row["content"], row["user"])
            if (why is not None) == (row["label"] == "junk"):
                right[row["label"]] += 1
            else:
                wrong.append(f"  {row['label']} judged {why or 'a note'}: {row['content']!r}")
        totals = {label: sum(r["label"] == label for r in rows) for label in right}
        print(f"{path.relative_to(ROOT)}: junk refused {right['junk']}/{totals['junk']}, "
              f"notes let through {right['note']}/{totals['note']}")
        print("\n".join(wrong) or "  no mistakes")


if __name__ == "__main__":
    main()
