"""Run the bad-input property tests (tests/core/test_fuzz.py) with many more examples.

The normal suite runs a few dozen examples per property, derandomised so it is repeatable;
this runs N fresh random examples per property and prints, per property, how many examples
ran, how many were invalid (filtered by hypothesis) and the time taken, then pytest's
verdict. A failure prints hypothesis' falsifying example.

    python scripts/fuzz.py [--examples N] [-k EXPR]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000,
                        help="examples per property (default 1000)")
    parser.add_argument("-k", metavar="EXPR", help="only the properties matching EXPR")
    args = parser.parse_args()
    env = {**os.environ, "CLAWD_FUZZ_EXAMPLES": str(args.examples)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               "--hypothesis-show-statistics", str(ROOT / "tests" / "core" / "test_fuzz.py")]
    if args.k:
        command += ["-k", args.k]
    done = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    total = 0
    print(f"{'property':<62} {'examples':>8} {'invalid':>8}  time")
    for block in re.split(r"\n(?=tests/core/test_fuzz\.py::)", done.stdout):
        name = re.match(r"tests/core/test_fuzz\.py::(\S+?):?\n", block)
        if not name:
            continue
        passing = sum(int(n) for n in re.findall(r"(\d+) passing", block))
        failing = sum(int(n) for n in re.findall(r"(\d+) failing", block))
        invalid = sum(int(n) for n in re.findall(r"(\d+) invalid", block))
        seconds = sum(float(t) for t in re.findall(r"phase \(([\d.]+) seconds\)", block))
        total += passing + failing
        print(f"{name.group(1):<62} {passing + failing:>8} {invalid:>8}  {seconds:.1f}s")
    print(f"total examples: {total}")
    verdict = re.search(r"\d+ (?:passed|failed)[^\n]*", done.stdout)
    print(f"pytest: {verdict.group(0) if verdict else 'no result'} (exit {done.returncode})")
    if done.returncode != 0:
        print(done.stdout[-6000:], done.stderr[-2000:], sep="\n")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
