"""Memory over weeks: facts that change and facts that stay, asked in fresh sessions.

``tests/data/memory_weeks.json`` (written and committed before any run) holds four weeks of
daily logs and two session files (2026-03-02 to 2026-03-29) in which eight facts change (a
recital date moved twice, an address, a renamed server, a budget, a phone number, a line
manager, a door code, a parking space) and four are stated once, in the first week, among
small talk and requests. Four variants are built, each in its own fresh state dir and
workspace (``clawd init``), the same way: day by day the note is written, then, in the
variants with consolidation, ``loop.consolidate.consolidate`` runs as the automatic run
(``hooks.consolidation``) would, at most once a day (``last_run`` is not today), after that
day's note, with the runtime's clock on that day (the real prompt, parser, checks and
writer). Decay is ``memorySearch.query.temporalDecay`` (``--half-life``, 30 days by
default), its "today" the runtime's clock. On 2026-03-30 each question is asked in a fresh
session through the chat loop (``Chat.handle``, as ``clawd chat`` runs it):

- variants: plain (the default: no consolidation, no decay; the baseline), decay,
  consolidation, consolidation + decay;
- an answer is *right* when it holds the newest value, *stale* when it holds an older value
  and not the newest, *neither* otherwise (whole words in any case; digits split by a space
  or comma are read together, ``2 May`` also as ``May 2`` or ``2nd May``);
- MEMORY.md's size at the end (lines, bytes, estimated tokens).

Two models:

- **stand-in** (always; no server): a deterministic model behind ``ScriptedProvider``
  (``default=``), under the ``strong`` profile so it is offered ``memory_search``. Asked a
  question it does what a careful model does with the tools: it calls ``memory_search``
  with the question and answers with the first result's text. So its figures measure what
  search puts first. The automatic recall block the loop puts in front of the question is
  scored too, apart (its first note; MEMORY.md lines already in the context are not in it).
  For consolidation it is an **oracle**: it reads the real prompt and, knowing the data's
  facts, answers the right ``ADD``/``REPLACE`` lines in the format ``context.consolidation``
  parses. Its consolidation figures measure the pipeline (checks, writer, replacement,
  search over MEMORY.md) given a perfect consolidator, not a model's skill.
- **real model** (``--model-url``, e.g. the local llama.cpp server): answers through the
  same loop under the profile its config gives it (``weak`` for a declared provider: no
  ``memory_search`` tool, automatic recall instead). Consolidation runs through the same
  code even though the ``weak`` profile refuses it (``Profile.consolidates``; the refusal is
  bypassed, as in ``bench_consolidation.py``); its figures are labelled so. The
  consolidation + decay variant gets a copy of the consolidation variant's MEMORY.md (one
  consolidation run per model; the two differ only in decay). ``--samples N`` asks each
  question N times (the server samples). One request at a time (llama.cpp has one slot).
  ``--oracle-consolidation`` has the oracle consolidate for the real model too, so the
  model's answers are measured over a MEMORY.md kept as a perfect consolidator keeps it.

    python scripts/bench_memory_weeks.py                     # stand-in only, about a minute
    CTX=8192 ../shared/tools/local-llm/serve.sh start qwen-1.5b
    python scripts/bench_memory_weeks.py --model-url http://127.0.0.1:8080/v1 \\
        --model qwen2.5-coder-1.5b-instruct --keep /tmp/weeks
    ../shared/tools/local-llm/serve.sh stop

``--keep DIR`` leaves each variant's state dir (transcripts), workspace and the
consolidation answers (``consolidation.jsonl``) in ``DIR/<model>/<variant>``; ``--json``
prints one JSON object; ``--facts N`` asks N of the facts that change and N // 2 of those
that stay; ``--variants`` runs some of the four.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "memory_weeks.json"
VARIANTS = {  # name -> (consolidation, decay)
    "plain": (False, False),
    "decay": (False, True),
    "consolidation": (True, False),
    "consolidation + decay": (True, True),
}
BASELINE = "plain"
MONTHS = ("January February March April May June July August September October November "
          "December").split()
_DAY_MONTH = re.compile(rf"^(\d{{1,2}}) ({'|'.join(MONTHS)})$")
_SEARCH_SYSTEM = "You bring a memory file up to date."  # consolidate.ask's system prompt


# --- scoring ----------------------------------------------------------------------------------

def _normal(text: str) -> str:
    """Lower case, digits split by a space or comma read together (``07700 900871``,
    ``4,200``)."""
    return re.sub(r"(?<=\d)[ ,](?=\d)", "", text.lower())


def _patterns(value: str) -> list[str]:
    found = _DAY_MONTH.match(value)
    if found:
        day, month = found.group(1), found.group(2).lower()
        return [rf"(?<!\w){day}(?:st|nd|rd|th)?(?: of)? {month}(?!\w)",
                rf"(?<!\w){month} {day}(?:st|nd|rd|th)?(?!\w)"]
    return [rf"(?<!\w){re.escape(_normal(value))}(?!\w)"]


def holds(value: str, text: str) -> bool:
    """``value`` in ``text`` as whole words (see the module docstring)."""
    low = _normal(text)
    return any(re.search(p, low) for p in _patterns(value))


def verdict(fact: dict, text: str) -> str:
    """right, stale or neither."""
    if holds(fact["new"], text):
        return "right"
    if any(holds(old, text) for old in fact["old"]):
        return "stale"
    return "neither"


# --- the stand-in model -----------------------------------------------------------------------

_M_LINE = re.compile(r"^(M\d+): (.*)$")
_S_LINE = re.compile(r"^(S\d+) \(([^()]+)\): (.*)$")


def stated(fact: dict, text: str) -> str | None:
    """The value of ``fact`` a line states: the newest of its values the line holds
    (``moved from 17 April to 24 April`` states 24 April)."""
    values = [*fact["old"], fact["new"]]
    held = [v for v in values if holds(v, text)]
    return held[-1] if held else None


def oracle_answer(prompt: str, facts: list[dict]) -> str:
    """A perfect consolidator's answer to the real prompt: for each fact, the last note line
    shown that states a value of it is added, or replaces the bullet holding another value
    (bullets of ``## Replaced``, which the prompt shows too, are left alone)."""
    bullets, sources = [], []
    for line in prompt.splitlines():
        if m := _M_LINE.match(line):
            bullets.append((m.group(1), m.group(2)))
        elif s := _S_LINE.match(line):
            sources.append((s.group(1), s.group(3)))
    ops = []
    for fact in facts:
        latest = next(((ref, text, value) for ref, text in reversed(sources)
                       if (value := stated(fact, text)) is not None), None)
        if latest is None:
            continue
        ref, text, value = latest
        fact_text = re.sub(r"^[-*+]\s+", "", text)
        held = next(((m, stated(fact, b)) for m, b in bullets
                     if "— replaced on" not in b and stated(fact, b) is not None), None)
        if held is None:
            ops.append(f"ADD Facts and references | {fact_text} | {ref}")
        elif held[1] != value:
            ops.append(f"REPLACE {held[0]} | {fact_text} | {ref}")
    return "\n".join(ops) or "NONE"


def _question(text: str) -> str:
    """The user's message without an automatic recall block in front of it."""
    return text.rsplit("The user's message:]", 1)[-1].strip()


def _first_recalled(text: str) -> str | None:
    """The first note of a recall block (None: no block)."""
    if "The user's message:]" not in text or "\nFrom " not in text:
        return None
    body = text.split("\nFrom ", 1)[1].split("\n", 1)[-1]
    return re.split(r"\nFrom \S+#L|\n\[End of the notes", body, maxsplit=1)[0].strip()


class StandIn:
    """The deterministic model (``ScriptedProvider(default=StandIn(facts))``)."""

    def __init__(self, facts: list[dict]):
        self.facts = facts
        self.recalled: dict[str, str | None] = {}  # question -> first recalled note

    def __call__(self, request):
        from clawd.providers.scripted import Reply, tool

        if request.system and request.system[0].startswith(_SEARCH_SYSTEM):
            return oracle_answer(request.messages[-1].text, self.facts)
        if not request.tools:  # a summary (not expected in these short sessions)
            return "## Goal\nQuestions about notes."
        last = request.messages[-1]
        if last.role == "user":
            if "memory_search" not in {t.name for t in request.tools}:
                return "NO_REPLY"  # a flush or a session without the tool
            question = _question(last.text)
            self.recalled[question] = _first_recalled(last.text)
            return Reply("", [tool("memory_search", query=question)])
        if last.role == "toolResult" and last.tool_name == "memory_search":
            try:
                results = json.loads(last.text).get("results") or []
            except ValueError:
                results = []
            return results[0]["snippet"] if results else "Nothing about that in my notes."
        return "Done."


# --- building a variant -----------------------------------------------------------------------

@dataclass
class Model:
    name: str  # "stand-in" or the real model's name
    url: str | None
    window: int
    max_tokens: int


def write_config(state: Path, workspace: Path, model: Model, decay: bool,
                 half_life: float) -> None:
    provider = {"api": "openai-completions", "baseUrl": model.url or "http://127.0.0.1:9/v1",
                "models": [{"id": model.name, "contextWindow": model.window,
                            "maxTokens": model.max_tokens}], "timeoutSeconds": 600}
    query = {"temporalDecay": {"enabled": True, "halfLifeDays": half_life}} if decay else {}
    config = {"agents": {"defaults": {
        "workspace": str(workspace), "model": f"bench/{model.name}",
        "memorySearch": {"enabled": True, "provider": "local", "query": query}}},
        "models": {"providers": {"bench": provider}}}
    (state / "clawd.json").write_text(json.dumps(config, indent=2))


def at(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, 0, tzinfo=timezone.utc)


def runtime_for(home: Path, model: Model, decay: bool, half_life: float,
                stand_in: StandIn | None):
    """A fresh state dir and workspace (``clawd init``) and their runtime."""
    state, workspace = home / "state", home / "workspace"
    state.mkdir(parents=True, exist_ok=True)
    os.environ["CLAWD_HOME"] = str(state)
    os.environ.pop("CLAWD_CONFIG", None)
    from clawd.config import load_config
    from clawd.frontends.compose import build_runtime
    from clawd.workspace.init import apply, plan_init

    write_config(state, workspace, model, decay, half_life)
    apply(plan_init(state, state / "clawd.json", workspace, "main"))
    write_config(state, workspace, model, decay, half_life)  # init keeps an existing one
    rt = build_runtime(load_config(state / "clawd.json"), None)
    if stand_in is not None:
        from clawd.loop.runtime import fixed_models
        from clawd.providers.scripted import ScriptedProvider

        rt.models = fixed_models(ScriptedProvider(default=stand_in), model.window,
                                 max_tokens=model.max_tokens, profile="strong")
    if rt.memory is not None:
        rt.memory.today = lambda: rt.clock().date()  # decay counts ages from the clock's day
    return rt


def build(rt, data: dict, consolidating: bool, log: list[dict],
          copy_from: Path | None = None, oracle: bool = False) -> dict[str, int]:
    """The notes day by day, each followed by the day's consolidation when asked for (by
    the oracle with ``oracle``)."""
    from clawd.loop import consolidate as running
    from clawd.loop.consolidate import RECORD, consolidate, last_run, refusal
    from clawd.providers.scripted import ScriptedProvider

    handle = rt.models(rt.settings.model)
    provider = (ScriptedProvider(default=StandIn(data["facts"])) if oracle
                else handle.connect())
    totals = {"runs": 0, "added": 0, "replaced": 0, "merged": 0, "refused": 0}
    asking = running.ask

    def recorded(*a, **kw):  # the model's answers, kept for reading
        answer = asking(*a, **kw)
        log.append({"day": rt.clock().date().isoformat(), "answer": answer})
        return answer

    running.ask = recorded
    try:
        for note in data["notes"]:
            day = date.fromisoformat(Path(note["path"]).name[:10])
            rt.clock = lambda day=day: at(day, 22)
            path = rt.workspace / note["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(note["lines"]) + "\n")
            if not consolidating or copy_from is not None or last_run(rt) == day:
                continue
            # as after_session runs it (once a day); a weak profile's refusal is bypassed
            totals["refusal bypassed"] = int(refusal(handle) is not None)
            report = consolidate(rt, provider)
            totals["runs"] += 1
            for key in ("added", "replaced", "merged", "refused"):
                totals[key] += len(getattr(report, key))
            log.append({"day": day.isoformat(), "report": report.message,
                        "refused": report.refused})
    finally:
        running.ask = asking
    if copy_from is not None:  # the consolidation variant's result, for decay on top of it
        shutil.copyfile(copy_from / "workspace" / "MEMORY.md", rt.workspace / "MEMORY.md")
        sessions = rt.storage.sessions_dir  # state/agents/<id>/sessions
        record = sessions.parent / f"{RECORD}.json"  # the runs made
        shutil.copyfile(copy_from / "state" / record.relative_to(sessions.parents[2]), record)
        totals["copied"] = 1
    return totals


def ask_all(rt, data: dict, facts: list[dict], samples: int,
            stand_in: StandIn | None) -> list[dict]:
    from clawd.core.events import ErrorEvent, Recalled, TurnDone
    from clawd.frontends.commands import Chat

    asked = date.fromisoformat(data["ask"])
    rt.clock = lambda: at(asked, 10)
    if rt.memory is not None:
        rt.memory.sync()
    answers = []
    for k in range(samples):
        for fact in facts:
            chat = Chat.open(rt, f"agent:main:ask-{fact['key']}-{k + 1}")
            reply, recalled, errors, blank = "", [], [], False
            for event in chat.handle(fact["question"]):
                if isinstance(event, TurnDone):
                    reply = event.text
                    blank = not reply.strip() and not event.aborted
                elif isinstance(event, Recalled):
                    recalled = [f"{p}#L{a}-L{b}" for p, a, b, _ in event.places]
                elif isinstance(event, ErrorEvent):
                    errors.append(event.message)
            row = {"key": fact["key"], "sample": k + 1, "changed": bool(fact["old"]),
                   "reply": reply, "verdict": verdict(fact, reply), "recalled": recalled,
                   "errors": errors, "blank": blank}
            if stand_in is not None:
                first = stand_in.recalled.get(fact["question"])
                row["recallFirst"] = first
                row["recallVerdict"] = verdict(fact, first) if first is not None else "none"
            answers.append(row)
    return answers


def tally(answers: list[dict], key: str = "verdict") -> dict[str, int]:
    out = dict.fromkeys(("right", "stale", "neither", "none", "kept", "kept of",
                         "changed", "blank", "errors"), 0)
    for a in answers:
        if a["changed"]:
            out["changed"] += 1
            out[a[key]] += 1
        else:
            out["kept of"] += 1
            out["kept"] += a[key] == "right"
        out["blank"] += a["blank"]
        out["errors"] += bool(a["errors"])
    return out


def memory_size(workspace: Path) -> dict[str, int]:
    from clawd.core.tokens import estimate_text

    text = (workspace / "MEMORY.md").read_text(encoding="utf-8")
    return {"lines": len(text.splitlines()), "bytes": len(text.encode()),
            "tokens": estimate_text(text)}


def run_model(model: Model, data: dict, facts: list[dict], home: Path, samples: int,
              half_life: float, variants: list[str], reuse: bool = False,
              oracle: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    built: dict[str, Path] = {}
    for name in variants:
        consolidating, decay = VARIANTS[name]
        where = home / re.sub(r"\W+", "-", name)
        stand_in = StandIn(data["facts"]) if model.url is None else None
        started = time.perf_counter()
        rt = runtime_for(where, model, decay, half_life, stand_in)
        log: list[dict] = []
        if reuse and "consolidation" not in built and (home / "consolidation").is_dir():
            built["consolidation"] = home / "consolidation"  # kept by an earlier run
        copy = built.get("consolidation") if (consolidating and decay and model.url) else None
        try:
            ops = build(rt, data, consolidating, log, copy_from=copy,
                        oracle=oracle and model.url is not None)
            if consolidating:
                built[name] = where
            build_s = time.perf_counter() - started
            answers = ask_all(rt, data, facts, samples, stand_in)
        finally:
            if rt.memory is not None:
                rt.memory.close()
        (where / "consolidation.jsonl").write_text(
            "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in log))
        (where / "answers.json").write_text(json.dumps(answers, indent=1, ensure_ascii=False))
        out[name] = {"answers": tally(answers), "memory": memory_size(where / "workspace"),
                     "consolidation": ops if consolidating else None,
                     "seconds": {"build": round(build_s, 1),
                                 "ask": round(time.perf_counter() - started - build_s, 1)},
                     "detail": answers}
        if stand_in is not None:
            out[name]["recall"] = tally(answers, "recallVerdict")
        print(f"  {model.name}: {name} done in {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)
    return out


# --- output -----------------------------------------------------------------------------------

def print_model(label: str, rows: dict[str, Any], samples: int, note: str) -> None:
    print(f"\n{label}")
    print(note)
    print(f"{'variant':<24}{'right':>7}{'stale':>7}{'neither':>9}{'kept':>7}"
          f"{'  MEMORY.md lines / bytes / ~tokens':<36}{'consolidation':>0}")
    base = rows.get(BASELINE, {}).get("answers")
    for name, row in rows.items():
        a, m, ops = row["answers"], row["memory"], row["consolidation"]
        what = ("" if ops is None else
                "copied from the consolidation variant" if ops.get("copied") else
                f"{ops['runs']} runs: {ops['added']} added, {ops['replaced']} replaced, "
                f"{ops['refused']} refused")
        print(f"{name:<24}{a['right']:>4}/{a['changed']:<2}{a['stale']:>5}{a['neither']:>8}"
              f"{a['kept']:>5}/{a['kept of']:<2}  {m['lines']:>4} / {m['bytes']:>5} / "
              f"{m['tokens']:>4}    {what}")
        if "recall" in row:
            r = row["recall"]
            print(f"{'  recall block, 1st note':<24}{r['right']:>4}/{r['changed']:<2}"
                  f"{r['stale']:>5}{r['neither']:>8}{r['kept']:>5}/{r['kept of']:<2}  "
                  f"(no block: {r['none']} changed)")
        if a["blank"] or a["errors"]:
            print(f"{'':<24}blank replies {a['blank']}, turns with errors {a['errors']}")
    if base:
        print(f"baseline: {BASELINE} (no consolidation, no decay, as clawd ships) "
              f"{base['right']} right, {base['stale']} stale of {base['changed']} answers "
              f"about changed facts; {base['kept']}/{base['kept of']} unchanged facts "
              f"right ({samples} sample{'s' * (samples > 1)} a question)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-url", default=None,
                        help="an OpenAI-compatible server for the real-model run (none: "
                             "the stand-in only)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--samples", type=int, default=1, help="asks of each question by "
                        "the real model")
    parser.add_argument("--half-life", type=float, default=30.0,
                        help="temporalDecay.halfLifeDays of the decay variants")
    parser.add_argument("--facts", type=int, default=None,
                        help="ask N facts that change and N // 2 that stay (a shorter run)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated, of: " + ", ".join(VARIANTS))
    parser.add_argument("--no-stand-in", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="leave the runs here")
    parser.add_argument("--oracle-consolidation", action="store_true",
                        help="the oracle consolidates for the real model too")
    parser.add_argument("--reuse-consolidation", action="store_true",
                        help="with --keep: a real model's 'consolidation + decay' takes the "
                        "MEMORY.md of a 'consolidation' run kept there before, instead of "
                        "consolidating again")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",")]
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant(s): {unknown}")
    data = json.loads(DATA.read_text(encoding="utf-8"))
    facts = data["facts"]
    if args.facts is not None:  # N that change and N // 2 that stay (at least one)
        facts = ([f for f in facts if f["old"]][:args.facts]
                 + [f for f in facts if not f["old"]][:max(1, args.facts // 2)])
    scratch = None if args.keep else tempfile.TemporaryDirectory(prefix="clawd-weeks-")
    home = args.keep or Path(scratch.name)
    started = time.perf_counter()
    report: dict[str, Any] = {"data": str(DATA.relative_to(ROOT)), "halfLifeDays":
                              args.half_life, "facts": len(facts), "samples": args.samples}
    try:
        if not args.no_stand_in:
            report["stand-in"] = run_model(Model("stand-in", None, args.window, 400), data,
                                           facts, home / "stand-in", 1, args.half_life,
                                           variants)
        if args.model_url:
            model = Model(args.model, args.model_url, args.window, args.max_tokens)
            report[args.model] = run_model(model, data, facts, home / "real", args.samples,
                                           args.half_life, variants,
                                           reuse=args.reuse_consolidation,
                                           oracle=args.oracle_consolidation)
    finally:
        if scratch is not None:
            scratch.cleanup()
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    changed = sum(bool(f["old"]) for f in facts)
    print(f"memory over weeks: {len(data['notes'])} notes from {data['notes'][0]['path'][7:17]} "
          f"to {data['notes'][-1]['path'][7:17]}, asked on {data['ask']}; {changed} facts that "
          f"change, {len(facts) - changed} that stay; decay half-life {args.half_life:g} days")
    print("right: the newest value; stale: an older one and not the newest; kept: unchanged "
          "facts answered right")
    if "stand-in" in report:
        print_model("stand-in model (deterministic): answers with memory_search's first "
                    "result", report["stand-in"], 1,
                    "consolidation by an ORACLE that knows the facts: it measures the pipeline "
                    "(checks, writer, replacement, search over MEMORY.md) given a perfect "
                    "consolidator, not a model's skill")
    if args.model_url:
        print_model(f"real model {args.model} at {args.model_url} (profile from its config)",
                    report[args.model], args.samples,
                    "consolidation by the ORACLE (--oracle-consolidation): the model's answers "
                    "over a MEMORY.md a perfect consolidator keeps" if args.oracle_consolidation
                    else "consolidation by the model itself, its weak profile's refusal "
                    "bypassed (as bench_consolidation.py does); the consolidation + decay "
                    "variant uses the consolidation variant's MEMORY.md")
    print(f"\n{report['seconds']:.0f} s" + (f"; runs kept in {home}" if args.keep else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
