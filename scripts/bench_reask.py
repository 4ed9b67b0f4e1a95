"""How a real model answers clawd's request to answer again, by wording.

When a weak model's answer only repeats the user's message, the ``echo`` guard drops it and
asks once more (``prompts/blank_retry.md.j2``). The 1.5B model once answered that request
with "Your last message did not provide new information …", which, kept in its history, it
then gave as the answer to every later statement. This sends the request as clawd builds it
(the system prompt, the workspace files of a fresh ``clawd init``, the user's statement, the
echo left out, the request to answer again) with each wording to an OpenAI-compatible
server, ``--samples`` times per statement, and counts what came back:

- ``answer``: words of its own (what the request is for);
- ``echo``: the statement again (``replytext.is_echo``);
- ``meta``: talk about the last answer or message instead of an answer;
- ``copy``: the instructions copied (``replytext.copies``);
- ``blank``: nothing, or ``NO_REPLY``;
- ``call``: a tool call (allowed: a statement may deserve a note).

The statements are split in two halves, ``tune`` and ``held-out``; choose a wording on the
first and report both. Not part of the test suite: it needs a model server.

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_reask.py --base-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STATEMENTS = {
    "tune": [
        "Hi! I'm Priya. I live in Leeds and I work night shifts as a nurse.",
        "By the way, my budget for the Lisbon trip is 2400 euros in total.",
        "Remember that my daughter Mira's school play is on 12 December at 6pm.",
    ],
    "held-out": [
        "Actually the play moved to 13 December, same time.",
        "My partner Sam and I are planning a trip to Porto in March.",
        "The plumber is coming on Thursday morning to fix the boiler.",
    ],
}
WORDINGS = {
    "current": None,  # the template as it is
    "first": "Your last answer only repeated my message back to me. Reply to it now, in your "
             "own words.",  # the wording before this measurement
    "respond2": "That was my own message copied back. Respond to what I told you now, in one "
                "or two sentences of your own.",
    "assistant": "Reply to my message above as my assistant would, in your own words: do "
                 "not repeat it.",
}
# talk about the exchange instead of an answer, the request's own words among it
_META = re.compile(r"\b(?:last|previous) (?:answer|message|reply)\b|\brepeat(?:ed|ing)?\b|"
                   r"\bnew information\b|copied back|your own message|(?:did not|didn't) "
                   r"receive|respond to what you told|one or two sentences|in your own words",
                   re.IGNORECASE)


def classify(reply, statement: str, instructions: str) -> str:
    from clawd.context.flush import is_blank
    from clawd.context.replytext import copies, is_echo

    if reply.tool_calls:
        return "call"
    if is_blank(reply.text):
        return "blank"
    if is_echo(reply.text, statement):
        return "echo"
    if copies(reply.text, instructions, statement):
        return "copy"
    return "meta" if _META.search(reply.text) else "answer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--wordings", default=",".join(WORDINGS))
    parser.add_argument("--show", action="store_true", help="print every answer")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    home = Path(tempfile.mkdtemp(prefix="clawd-reask-"))
    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    config = {"agents": {"defaults": {"workspace": str(workspace),
                                      "model": f"bench/{args.model}"}},
              "models": {"providers": {"bench": {
                  "api": "openai-completions", "baseUrl": args.base_url,
                  "timeoutSeconds": 600, "models": [{"id": args.model,
                                                      "contextWindow": args.window,
                                                      "maxTokens": 300}]}}}}
    (state / "clawd.json").write_text(json.dumps(config))
    from clawd.config import load_config
    from clawd.core.messages import Message, ModelResponse
    from clawd.core.templates import render
    from clawd.frontends.compose import build_runtime
    from clawd.guards.base import TurnView
    from clawd.loop.session import Session
    from clawd.loop.turn import Turn
    from clawd.workspace.init import apply, plan_init

    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    runtime = build_runtime(load_config(state / "clawd.json"), None, with_memory=False)
    counts: dict[tuple[str, str], Counter[str]] = {}
    for name in args.wordings.split(","):
        for half, statements in STATEMENTS.items():
            tally = counts.setdefault((name, half), Counter())
            for i, statement in enumerate(statements):
                ask = WORDINGS[name] or render("blank_retry.md.j2", kind="echo",
                                               request=statement)
                for k in range(args.samples):
                    session = Session.open(runtime, f"agent:main:reask-{name}-{half}-{i}-{k}")
                    session.conversation.append(Message.user(statement))
                    turn = Turn(TurnView(text=statement), ask=Message.user(ask))
                    request, layers = session.call.request(session.history.messages, turn,
                                                           flush=False)
                    reply = next(e.message for e in session.provider.stream(request)
                                 if isinstance(e, ModelResponse))
                    kind = classify(reply, statement, layers.instructions)
                    tally[kind] += 1
                    if args.show:
                        print(f"[{name} {half} {kind}] {statement[:40]!r} -> "
                              f"{(reply.text or str(reply.tool_calls))[:160]!r}", flush=True)
    kinds = ("answer", "call", "echo", "meta", "copy", "blank")
    print(f"{'wording':<10} {'half':<9} " + " ".join(f"{k:>6}" for k in kinds))
    for (name, half), tally in counts.items():
        print(f"{name:<10} {half:<9} " + " ".join(f"{tally[k]:>6}" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
