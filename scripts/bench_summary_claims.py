"""What a real model's compaction summaries claim that the conversation never said, and
what the ``summary_claims`` guard leaves out of them.

Conversations written beforehand (a user telling plans, decisions and numbers among
requests, an assistant answering) are summarised by the model at ``--base-url`` with
clawd's own compaction (``context.compaction.summarize``, the prompts a session uses),
``--samples`` times each. Each summary line goes through ``guards.notes.founded_summary``
against the conversation it summarises, and the lines left out are printed, with the line
kept beside them for reading: the figure is how many lines were left out, and of those, how
many a reader finds invented (printed for you to judge; nothing here decides it). Not
part of the test suite: it needs a model server.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_summary_claims.py --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct --samples 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (user, assistant) turns: what the summary may draw on, and nothing else
CONVERSATIONS = [
    [("I'm building tidepool, a small app that shows tide charts offline.",
      "Nice. Offline means the tide tables must be stored on the device."),
     ("Right. I want it on Android first, iOS later.",
      "Then a cross-platform toolkit could help, or plain Kotlin for Android."),
     ("Let's keep it simple: Kotlin, and SQLite for the tables.",
      "Good choice: SQLite ships with Android and handles tables of that size."),
     ("The harbour data comes from a CSV of 1,200 stations.",
      "Import it once at first start and index the station names."),
     ("Can you suggest a name for the settings screen?",
      "\"Harbour & units\" says what it holds.")],
    [("We're moving to Lisbon in March with our cat Mochi.",
      "Exciting! Moving with a cat needs some planning."),
     ("The flat is in Alfama; the lease starts on 1 March.",
      "Alfama is lovely, if hilly. Noted: the lease starts on 1 March."),
     ("Mochi hates her carrier. Any tips for the flight?",
      "Leave the carrier open at home for a few weeks, with a blanket she knows."),
     ("The vet appointment for her papers is on 9 January.",
      "Good: that leaves time for the papers before March."),
     ("What should I pack first?",
      "Start with what you will not need before the move: books, winter clothes.")],
    [("My budget for the kitchen renovation is 8,500 euros.",
      "That is enough for new cabinets and a worktop if the plumbing stays where it is."),
     ("The plumbing stays. I picked oak for the worktop.",
      "Oak is warm and durable; oil it twice a year."),
     ("The fitter, Rui, starts on 3 February.",
      "Then order the cabinets by mid-January: delivery takes two to three weeks."),
     ("Actually the budget went up to 9,000 because of the sink.",
      "Noted: 9,000 euros now, the sink included.")],
    [("I run the Thursday book club; we read 'The Remains of the Day' next.",
      "A fine choice: restraint and memory make for long discussions."),
     ("There are 7 of us and we meet at Carla's place.",
      "Seven is a good size for everyone to speak."),
     ("Write three discussion questions, please.",
      "1. What does Stevens's loyalty cost him? 2. Is his dignity real? 3. What does the "
      "ending promise?"),
     ("Great. Next month we switch to Tuesdays.",
      "Noted: Tuesdays from next month.")],
]


def messages_of(turns):
    from clawd.core.messages import Message

    out = []
    for user, assistant in turns:
        out += [Message.user(user), Message.assistant(assistant)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=700)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from clawd.config import Compaction, parse_config
    from clawd.context.compaction import summarize
    from clawd.guards.notes import founded_summary
    from clawd.loop.upkeep import said_in
    from clawd.providers.registry import make_provider

    config = parse_config(json.dumps({"models": {"providers": {"bench": {
        "api": "openai-completions", "baseUrl": args.base_url,
        "models": [{"id": args.model}], "timeoutSeconds": 600}}}}))
    provider = make_provider(config, f"bench/{args.model}", env={})
    settings = Compaction()
    started = time.perf_counter()
    lines = dropped = 0
    for n, turns in enumerate(CONVERSATIONS):
        messages = messages_of(turns)
        history = said_in(None, messages)
        for k in range(args.samples):
            summary = summarize(provider, messages, previous_summary=None, instructions=None,
                                settings=settings, max_tokens=args.max_tokens)
            kept, left_out = founded_summary(summary.text, history)
            body = [line for line in summary.text.splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
            lines += len(body)
            dropped += len(left_out)
            print(f"\n=== conversation {n}, sample {k} ({summary.method}) ===\n{summary.text}")
            for line in left_out:
                print(f"  LEFT OUT: {line}")
    print("\n" + "=" * 72)
    print(f"model {args.model}: {lines} summary lines, {dropped} left out as unfounded "
          f"({args.samples} samples of {len(CONVERSATIONS)} conversations); "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
