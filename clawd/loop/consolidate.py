"""One consolidation run: the notes since the last run into MEMORY.md, checked, then written.

``consolidate`` reads the dated notes (daily logs and session files) whose date is on or
after the day of the last run, shows their lines to the model in batches small enough for
a small window (``BATCH_LINES``), and applies what it answers through the policy of
``context.consolidation`` (parsed, checked against the lines it cites, applied without
losing a line). A malformed or empty answer changes nothing; a result that would lose a line
of MEMORY.md is not written. Before a write, MEMORY.md is kept in the backups (``clawd
history``); the day of the run is kept in the agent's records (``consolidation``:
``consolidation.json`` beside its sessions, or a database row), so the next run reads only
what came after. ``dry_run`` asks the
model and shows the diff, and writes nothing.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import date, datetime

from clawd.context.consolidation import (
    SECTIONS,
    Outcome,
    Source,
    apply,
    bullets,
    check,
    lost_lines,
    parse,
    source_lines,
)
from clawd.core.errors import ClawdError
from clawd.core.events import Event, Notice, Waiting
from clawd.core.messages import Message, ModelRequest
from clawd.core.templates import render
from clawd.loop.runtime import ModelHandle, Runtime
from clawd.memory.recency import dated
from clawd.providers.base import Provider, complete
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

log = logging.getLogger(__name__)
BATCH_LINES = 60  # note lines shown in one request (a few thousand tokens)
RECORD = "consolidation"  # the record of the last run (consolidation.json in the files)
CLAIM = "consolidation-day"  # the day whose automatic run a process has taken


@dataclass
class ConsolidationReport:
    """What a run did, for the command line and the REPL."""

    sources: int = 0  # note lines read
    added: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    diff: str = ""
    written: bool = False
    message: str = ""


def last_run(rt: Runtime) -> date | None:
    """The day of the last consolidation that wrote (None: never)."""
    try:
        return date.fromisoformat((rt.storage.records.get(RECORD) or {})["lastRunDate"])
    except (ValueError, KeyError, TypeError):
        return None


def _record(rt: Runtime, now: datetime) -> None:
    rt.storage.records.put(RECORD, {"lastRunAt": now.isoformat(timespec="seconds"),
                                    "lastRunDate": now.date().isoformat()})


def notes_since(rt: Runtime, since: date | None) -> dict[str, str]:
    """The dated notes from ``since`` on (all of them when None), by path."""
    found = {}
    for path in rt.files.listing(MEMORY_DIR):
        day = dated(path)
        if day is not None and (since is None or day >= since):
            found[path] = rt.files.read(path) or ""
    return found


def ask(provider: Provider, memory: str, batch: list[Source], max_tokens: int) -> str:
    """The model's answer for one batch of note lines."""
    lines = memory.splitlines()
    shown = [(ref, lines[i].strip().lstrip("-*+ ")) for ref, i in bullets(memory).items()]
    prompt = render("consolidate.md.j2", sections=SECTIONS, bullets=shown, sources=batch)
    request = ModelRequest(system=["You bring a memory file up to date. Answer only in the "
                                   "format you are given."],
                           messages=[Message.user(prompt.strip())], max_tokens=max_tokens)
    return complete(provider, request).message.text


def refusal(model: ModelHandle) -> str | None:
    """Why ``model`` may not consolidate (its profile), or None."""
    if model.profile.consolidates:
        return None
    return (f"{model.ref} runs under the {model.profile.name} model profile, which does not "
            f"consolidate: a small model makes facts up and misses most "
            f"(docs/real-models-notes.md); "
            f"choose another with --model PROVIDER/MODEL, or set profile: \"strong\" on its "
            f"provider if it is capable")


def consolidate(rt: Runtime, provider: Provider, *, dry_run: bool = False,
                since: date | None = None, max_tokens: int = 1024) -> ConsolidationReport:
    """Run once (see the module docstring); ``since`` overrides the day of the last run."""
    now = rt.clock()
    start = since or last_run(rt)
    sources = source_lines(notes_since(rt, start))
    report = ConsolidationReport(sources=len(sources))
    if not sources:
        report.message = ("nothing to consolidate: no daily log or session file "
                          + (f"since {start.isoformat()}" if start else "yet"))
        return report
    original = rt.files.read(MEMORY_FILE) or ""
    memory = original
    for first in range(0, len(sources), BATCH_LINES):
        batch = sources[first:first + BATCH_LINES]
        answer = ask(provider, memory, batch, max_tokens)
        ops = parse(answer)
        if ops is None:
            report.refused.append(f"the model's answer is not a list of changes: "
                                  f"{answer.strip()[:80]!r}")
            continue
        ok, refused = check(ops, batch, memory)
        outcome: Outcome = apply(memory, ok, batch, now.date())
        memory = outcome.text
        report.added += outcome.added
        report.replaced += outcome.replaced
        report.merged += outcome.merged
        report.refused += refused + outcome.refused
    if lost := lost_lines(original, memory):
        report.message = (f"MEMORY.md was not changed: the result would lose {len(lost)} of "
                          f"its lines (first: {lost[0].strip()[:60]!r})")
        return report
    report.diff = "".join(difflib.unified_diff(
        original.splitlines(keepends=True), memory.splitlines(keepends=True),
        fromfile=f"a/{MEMORY_FILE}", tofile=f"b/{MEMORY_FILE}"))
    if memory == original:
        report.message = _summary(report, "nothing changed")
        if not dry_run and not report.refused:
            _record(rt, now)
        return report
    if dry_run:
        report.message = _summary(report, "dry run, nothing written")
        return report
    if original and rt.files.stat(MEMORY_FILE) is not None:
        version = rt.backups.keep(MEMORY_FILE, now)
        backup = f"; the previous version is kept (clawd history restore {version.ref})"
    else:
        backup = ""
    rt.files.write(MEMORY_FILE, memory)
    report.written = True
    _record(rt, now)
    if rt.memory is not None:
        rt.memory.mark_dirty()
    report.message = _summary(report, f"MEMORY.md updated{backup}")
    log.info("consolidation: %s", report.message)
    return report


def after_session(rt: Runtime, model: ModelHandle, provider: Provider | None, *,
                  private: bool) -> Generator[Event, None, None]:
    """The automatic run when a session ends (its caller, ``lifecycle.end_session``, runs it
    only with ``hooks.consolidation.enabled``): only for a private session, at most once a
    day, said in one notice; an error is said, not raised."""
    if (not private or provider is None
            or last_run(rt) == rt.clock().date()
            or not rt.writable()):
        return
    if (why := refusal(model)) is not None:
        yield Notice(f"memory consolidation did not run: {why}")
        return
    if not rt.storage.records.claim(CLAIM, rt.clock().date().isoformat()):
        return  # another process (a worker on the same database) runs today's
    yield Waiting("consolidation")
    try:
        report = consolidate(rt, provider)
    except (ClawdError, OSError) as exc:
        yield Notice(f"memory consolidation did not run: {exc}")
        return
    if report.sources:
        yield Notice(f"memory consolidation: {report.message}")


def _summary(report: ConsolidationReport, what: str) -> str:
    parts = [f"{len(report.added)} added", f"{len(report.replaced)} replaced",
             f"{len(report.merged)} already there", f"{len(report.refused)} refused"]
    return f"{what}: {', '.join(parts)} (from {report.sources} note lines)"
