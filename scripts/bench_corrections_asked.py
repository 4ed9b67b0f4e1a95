"""After a correction, does a real model answer the new value in a fresh session?

Each conversation runs on a real ``clawd serve`` (the embedded default) over an
OpenAI-compatible model server: a fact told and asked to be remembered, then a correction
of it in other words ("Also, Joao relocated to Aveiro.", "Correction: Ingrid moved to
Bergen last month."), both in session ``main``; then the question, in session ``fresh``,
where only the notes and the context's daily logs carry the correction. Each answer is
counted as ``new`` (the new value only), ``old`` (the old value only: the failure), ``both``
or ``neither``, ``--runs`` times per conversation. Run it with ``PYTHONPATH`` set to another
tree to measure that tree's clawd (``clawd serve`` is started from the one on the path).
Not part of the test suite: it needs a model server.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_corrections_asked.py --model qwen2.5-coder-1.5b-instruct --runs 2
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_hosted import AUTH, free_port, home_for, start  # noqa: E402

# (what is said in ``main``, the question asked in ``fresh``, the new value, the old one)
CONVERSATIONS = [
    (["My friend Joao lives in Braga and works at Bosch. Please remember that.",
      "Also, Joao relocated to Aveiro."], "Where does Joao live?", r"Aveiro", r"Braga"),
    (["Hi! My sister's name is Ingrid and she lives in Tromsø. Please remember that.",
      "Correction: Ingrid moved to Bergen last month."], "Where does my sister live?",
     r"Bergen", r"Troms"),
    (["Please remember: our team standup is at 9:30 every day.",
      "Actually, the standup is at 10:00 now."], "When is our standup?", r"\b10(:00)?\b",
     r"9:30"),
]


def judged(reply: str, new: str, old: str) -> str:
    says_new, says_old = bool(re.search(new, reply)), bool(re.search(old, reply))
    return {(True, True): "both", (True, False): "new", (False, True): "old",
            (False, False): "neither"}[(says_new, says_old)]


def converse(base_url: str, model: str, told: list[str], question: str) -> str:
    """One conversation on a fresh home; the answer to the question."""
    root = Path(tempfile.mkdtemp(prefix="clawd-corrections-"))
    port = free_port()
    env = home_for(root, base_url.removesuffix("/v1"), port, None)
    path = Path(env["CLAWD_HOME"], "clawd.json")
    config = json.loads(path.read_text())
    config["models"]["providers"]["local"]["models"] = [{"id": model, "contextWindow": 8192}]
    config["agents"]["defaults"]["model"] = f"local/{model}"
    path.write_text(json.dumps(config))
    served = start(["-m", "clawd", "serve"], env, port)
    try:
        with httpx.Client(timeout=300, base_url=f"http://127.0.0.1:{port}") as client:
            for text in told:
                client.post("/api/sessions/main/messages", json={"text": text}, headers=AUTH)
            events = client.post("/api/sessions/fresh/messages", json={"text": question},
                                 headers=AUTH).json()["events"]
    finally:
        served.stop()
    return next((str(e.get("text") or "") for e in events if e.get("type") == "reply"), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    tally: Counter[str] = Counter()
    for _ in range(args.runs):
        for told, question, new, old in CONVERSATIONS:
            reply = converse(args.base_url, args.model, told, question)
            verdict = judged(reply, new, old)
            tally[verdict] += 1
            print(f"{told[-1][:40]!r}: {verdict}: {reply[:120]!r}", flush=True)
    total = sum(tally.values())
    print(f"{total} answers: " + ", ".join(f"{tally[k]} {k}" for k in
                                           ("new", "old", "both", "neither")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
