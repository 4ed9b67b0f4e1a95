"""After an empty memory search, does a real model answer the user, or only say "nothing found"?

A small model that searched its memory and found nothing tends to answer every message with
"I have no information about that", even a plain statement ("My server is called tern") or
a request that needs no memory at all. This measures, against any OpenAI-compatible server,
the options for the step after an empty ``memory_search`` and for whole turns:

- ``baseline``: clawd as it is;
- ``worded``: the empty result says that nothing matched and leads back to the message
  (``tools.memory.EMPTY_NOTE``);
- ``scoped``: AGENTS.md's recall rule applies to questions about the past only
  (``SCOPED_RULE``), so "say you found nothing" is not read as the answer to everything;
- ``both``: worded and scoped;
- ``no-search`` (whole turns only): ``memory_search`` is not offered, since automatic
  recall searched for the message (what the weak profile now does: ``recall_only``).

Each case is a fresh session per sample. The step case builds the history the model would
have made (your message, its ``memory_search`` call with your words as the query, the
empty result) and asks for the next step once; the turn case runs a whole turn through
``Chat.handle``. A reply is *answered* when it is not blank, does not say that nothing was
found or that it cannot help (``NO_ANSWER``), does not open with an apology or a tool call
written out as text (``NOT_AN_ANSWER``), does not talk about the search instead
(``ABOUT_THE_SEARCH``) and is not the message echoed. It prints the share answered per
option and message kind and leaves every reply in ``--keep``/replies.jsonl. Needs a model
server (not part of the tests):

    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_empty_search.py --samples 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

# (message, kind): statements to keep, requests that need no memory, questions of fact
MESSAGES = [
    ("My home server is called tern and it runs Debian 12.", "statement"),
    ("Correction: the server is called heron now, not tern.", "statement"),
    ("I'm allergic to peanuts.", "statement"),
    ("We're moving the deploy day to Thursdays from now on.", "statement"),
    ("Suggest a name for my new cat.", "request"),
    ("Write a haiku about autumn in Lisbon.", "request"),
    ("What's 15% of 2400 euros?", "question"),
    ("How do I list the open ports on a Debian machine?", "question"),
]
NO_ANSWER = re.compile(
    r"can(?:no|')t (?:assist|help)|unable to (?:assist|help|find)|"
    r"no (?:relevant |matching |such |specific )?(?:information|notes?|results?|records?|"
    r"memor(?:y|ies)|entries|data)\b|"
    r"nothing (?:matches|matched|was found|found|relevant)|found nothing|"
    r"(?:could|did|do|ca)n[o']?t find|cannot find|unable to provide|not find any|"
    r"(?:don't|do not|doesn't) (?:have|contain) "
    r"(?:enough |any )?(?:information|record|details|notes)|no (?:entry|entries|mention)",
    re.I)
SCOPED_RULE = ("Before answering a question about earlier work, decisions, dates, people, "
               "preferences or anything \"we talked about\", run `memory_search` first.",
               "When the user asks about earlier work, decisions, dates, people, preferences "
               "or anything \"we talked about\", run `memory_search` first; a statement, a "
               "request or a general question needs no search.")
EMPTY_RULE = ("If the search finds nothing, say so plainly rather than inventing an answer.",
              "If a search about the past finds nothing, say so plainly rather than inventing "
              "an answer; anything else, answer as the message asks.")


# an apology first ("I'm sorry, but I'm not sure what you mean") or a tool call written out
# as text is no answer either
NOT_AN_ANSWER = re.compile(r"^\s*(?:I'?m sorry|I am sorry|sorry|I apologi[sz]e|[{\[`])", re.I)


# talk about the search itself ("the tool returned no results", "You can try searching"), a
# plan to look further, or a request for more is not an answer to the message either
ABOUT_THE_SEARCH = re.compile(
    r"\b(?:search(?:ing|ed)?|tool|memory_search|results?|query|databases?|MEMORY\.md)\b|"
    r"\bI need to find\b|\bprovide (?:more|the|additional)\b|\bclarify\b", re.I)


def answered(text: str, message: str = "") -> bool:
    """Whether ``text`` answers ``message`` (see the module docstring)."""
    def same(a: str) -> str:
        return " ".join(re.findall(r"\w+", a.lower()))
    return (bool(text.strip()) and not NO_ANSWER.search(text)
            and not NOT_AN_ANSWER.search(text) and not ABOUT_THE_SEARCH.search(text)
            and same(text) != same(message))


def setup(home: Path, args: argparse.Namespace):
    from bench_real_model import write_config

    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    args.memory_search, args.recall, args.api_key = True, True, None
    from clawd.config import load_config
    from clawd.frontends.compose import build_runtime
    from clawd.workspace.init import apply, plan_init

    write_config(state, workspace, args)
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    write_config(state, workspace, args)
    return build_runtime(load_config(state / "clawd.json"), None), workspace


def set_agents(workspace: Path, original: str, scoped: bool) -> None:
    text = original
    if scoped:  # the rule's words, however the file wraps them
        for old, new in (SCOPED_RULE, EMPTY_RULE):
            pattern = r"\s+".join(re.escape(word) for word in old.split())
            text, count = re.subn(pattern, new.replace("\\", "\\\\"), text)
            assert count == 1, old
    (workspace / "AGENTS.md").write_text(text)


# the ``worded`` option's empty result (measured, not kept: no gain on whole turns)
EMPTY_NOTE = ("No note matches. If the user asked about something from the past, tell them "
              "you found nothing; otherwise the search does not matter: reply to the user's "
              "message itself (keep what they told you, do what they asked).")


def worded_search(search):
    """``visible_search`` whose empty results carry ``EMPTY_NOTE``."""
    def searched(*a, **kw):
        result = dict(search(*a, **kw))
        return result if result["results"] else {**result, "note": EMPTY_NOTE}
    return searched


def empty_result(runtime, session, query: str, worded: bool) -> str:
    from clawd.tools.memory import visible_search

    result: dict = dict(visible_search(runtime.memory, session.access, query))
    result["results"] = []  # the case measured: whatever the notes hold, nothing matched
    if worded:
        result["note"] = EMPTY_NOTE
    return json.dumps(result, ensure_ascii=False)


def run_step(runtime, session, message: str, worded: bool) -> str:
    from clawd.core.messages import Message, ToolCall
    from clawd.loop.model_call import Replied

    session.window.withheld = lambda: frozenset()  # type: ignore[method-assign]
    user = Message.user(message)
    call = ToolCall(id="call_search", name="memory_search", arguments={"query": message})
    history = session.history.messages
    for m in (user, Message.assistant("", tool_calls=[call]),
              Message.tool_result(call, empty_result(runtime, session, message, worded),
                                  False)):
        session.conversation.append(m)
    run = session.call.run(history, show=False)
    try:
        while True:
            next(run)
    except StopIteration as stop:
        outcome = stop.value
    return outcome.message.text if isinstance(outcome, Replied) else ""


def run_turn(runtime, key: str, message: str, hide_search: bool) -> str:
    from clawd.core.events import TurnDone
    from clawd.frontends.commands import Chat

    chat = Chat.open(runtime, key)
    if not hide_search:  # the weak profile withholds it (``recall_only``): offered again
        chat.session.window.withheld = lambda: frozenset()  # type: ignore[method-assign]
    reply = ""
    for event in chat.handle(message):
        if isinstance(event, TurnDone):
            reply = event.text
    return reply


def print_table(rows: list[dict]) -> None:
    """The share answered per case and message kind (scored again with ``answered``)."""
    table: dict[tuple[str, str], dict[str, list[bool]]] = {}
    for row in rows:
        table.setdefault((row["what"], row["option"]), {}).setdefault(row["kind"], []).append(
            answered(row["reply"], row["message"]))
    kinds = sorted({k for _, k in MESSAGES})
    print(f"{'case':16}" + "".join(f"{k:>12}" for k in kinds) + f"{'all':>12}")
    for (what, option), by_kind in table.items():
        cells = [f"{sum(v)}/{len(v)}" for v in (by_kind.get(k, []) for k in kinds)]
        every = [x for v in by_kind.values() for x in v]
        print(f"{what + ' ' + option:16}" + "".join(f"{c:>12}" for c in cells)
              + f"{sum(every)}/{len(every)}".rjust(12))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=300)
    parser.add_argument("--samples", type=int, default=3, help="per message and option")
    parser.add_argument("--what", choices=["step", "turn", "both"], default="both")
    parser.add_argument("--options", default=None,
                        help="comma-separated options to run (default: all of each case)")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--rescore", type=Path, default=None, metavar="JSONL",
                        help="no model: score the replies of an earlier run again")
    args = parser.parse_args(argv)
    if args.rescore:
        print_table([json.loads(line) for line in args.rescore.read_text().splitlines()])
        return 0
    sys.path.insert(0, str(ROOT))
    home = args.keep or Path(tempfile.mkdtemp(prefix="clawd-empty-"))
    runtime, workspace = setup(home, args)
    from clawd.loop.session import Session
    from clawd.tools import memory as memory_tools

    plain_search = memory_tools.visible_search
    original = (workspace / "AGENTS.md").read_text()
    out = (home / "replies.jsonl").open("a")
    cases = []
    if args.what in ("step", "both"):
        cases += [("step", o) for o in ("baseline", "worded", "scoped", "both")]
    if args.what in ("turn", "both"):
        cases += [("turn", o) for o in ("baseline", "worded", "scoped", "no-search")]
    if args.options:
        cases = [(what, o) for what, o in cases if o in args.options.split(",")]
    started, n = time.perf_counter(), 0
    for what, option in cases:
        set_agents(workspace, original, option in ("scoped", "both"))
        worded = option in ("worded", "both")
        memory_tools.visible_search = (worded_search(plain_search) if worded  # whole turns
                                       else plain_search)
        for message, kind in MESSAGES:
            for _ in range(args.samples):
                n += 1
                key = f"agent:main:bench-{what}-{option}-{n}"
                if what == "step":
                    session = Session.open(runtime, key)
                    text = run_step(runtime, session, message, worded)
                    session.close()
                else:
                    text = run_turn(runtime, key, message, option == "no-search")
                ok = answered(text, message)
                out.write(json.dumps({"what": what, "option": option, "kind": kind,
                                      "message": message, "answered": ok,
                                      "reply": text}) + "\n")
                out.flush()
                print(f"{what:4} {option:9} {'ok ' if ok else 'NO '} {message[:40]!r}: "
                      f"{text[:90]!r}", flush=True)
    print(f"\nanswered (not blank, not only 'nothing found'), {args.samples} samples per "
          f"message; {n} cases in {time.perf_counter() - started:.0f} s; replies in "
          f"{home / 'replies.jsonl'}")
    print_table([json.loads(line) for line in (home / "replies.jsonl").read_text().splitlines()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
