"""Transcripts: one append-only log per session, one entry per line (in the embedded store a
JSONL file, ``storage.files.transcripts``; in PostgreSQL rows of ``transcript_lines``).

Line 1 is the header ``{"type":"session","version":1,"id","agentId","timestamp"}`` plus the
session ``key`` (and ``model`` / ``modelOverride``), so the session store can be rebuilt from
the transcripts alone; every later line is an entry with ``type``, ``id`` and ``timestamp``
(messages, compactions and undos). Nothing is ever rewritten. A torn or invalid line is
skipped and reported (naming the file and line), and the next append starts on a fresh line
so one bad write never spoils the next.
``History`` is what the model sees: the latest compaction summary, then every message kept
by it and appended since (flush-turn entries, blank replies that were asked again, messages
refused as too large and turns taken back by an undo entry stay on disk but out of the
history).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from clawd.core.errors import ClawdError
from clawd.core.messages import Message, now_iso
from clawd.sessions.interface import Loaded

if TYPE_CHECKING:
    from clawd.sessions.interface import TranscriptLog

log = logging.getLogger(__name__)
VERSION = 1


@dataclass
class History:
    """The conversation as the model sees it (before pruning)."""

    summary: str | None = None
    messages: list[Message] = field(default_factory=list)
    compactions: int = 0
    # messages[after_compaction:] were written after the latest compaction, so the usage
    # they report describes this history
    after_compaction: int = 0
    # the user message of a turn the latest compaction summarised in part (kept verbatim
    # before the turn's kept steps): that turn can no longer be undone
    summarised_turn: str | None = None


def parse_lines(lines: Iterable[tuple[int, bytes | str]], where: str, *,
                quiet: bool = False) -> Loaded:
    """A transcript from its numbered lines: the header, then every readable entry in order;
    a line that is not an entry object is skipped and reported (``where:number``)."""
    header, entries, warnings, invalid, numbers, count = None, [], [], [], [], 0
    for number, line in lines:
        count = number
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
            if not isinstance(entry, dict) or "type" not in entry:
                raise ValueError("not an entry object")
        except ValueError as exc:
            warning = f"{where}:{number}: skipped an invalid line ({_short(exc)})"
            if not quiet:
                log.warning(warning)
            warnings.append(warning)
            invalid.append(number)
            continue
        if entry["type"] == "session" and header is None:
            header = entry
        else:
            entries.append(entry)
            numbers.append(number)
    return Loaded(header, entries, warnings, invalid, numbers, count)


def begin(log: TranscriptLog, agent_id: str, **about: Any) -> Loaded:
    """Load ``log``, first writing its header line when it is new (a log that holds
    anything, even unreadable lines, is kept as it is); ``about``: what else the header
    records (``key``, ``model``, ``modelOverride``, ``timestamp``)."""
    loaded = log.load(quiet=True)
    if loaded.header is None and not loaded.entries and not loaded.invalid_lines:
        header = {"type": "session", "version": VERSION, "id": log.session_id,
                  "agentId": agent_id, "timestamp": now_iso()}
        header.update({k: v for k, v in about.items() if v is not None})
        log.append(header)
        loaded.header = header
    return loaded


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:80]


def unanswered_ids(messages: list[Message], *, last: bool = False) -> set[str]:
    """The user messages that got no reply: each one followed by another user message
    with no answer between them (its turn failed, or was stopped before any answer), and
    with ``last`` the final message too when nothing came after it. The transcript keeps
    them as they were; a request folds them into the next message
    (``context.layers.fold_unanswered``)."""
    found: set[str] = set()
    waiting: Message | None = None
    for message in messages:
        if message.flush or message.retried:
            continue
        if message.role == "user":
            if waiting is not None:
                found.add(waiting.id)
            waiting = message
        else:
            waiting = None
    if last and waiting is not None:
        found.add(waiting.id)
    return found


def build_history(entries: list[dict[str, Any]]) -> History:
    """The model's view of a transcript: latest summary, then the kept and newer messages,
    less the turns undone since."""
    history = History()
    for entry in entries:
        kind = entry.get("type")
        if kind == "message":
            if entry.get("flush") or entry.get("retried") or entry.get("refused"):
                continue
            try:
                history.messages.append(Message.from_entry(entry))
            except (ValueError, KeyError, TypeError):
                log.warning("skipped a malformed message entry %s", entry.get("id"))
        elif kind == "compaction":
            if not isinstance(entry.get("summary"), str) or not entry["summary"].strip():
                # Applying it would hide the earlier messages behind no summary at all.
                log.warning("skipped a compaction entry %s without a summary", entry.get("id"))
                continue
            apply_compaction(history, entry)
        elif kind == "undo" and not apply_undo(history, entry.get("messageId")):
            log.warning("skipped an undo entry %s: its turn is not in the history",
                        entry.get("id"))
    return history


def apply_compaction(history: History, entry: dict[str, Any]) -> None:
    """Drop the messages a compaction summarised and put its summary first.

    A compaction inside a long turn names the turn's user message (``turnMessageId``): it
    stays verbatim, before the turn's kept steps.
    """
    keep_from = entry.get("firstKeptId")
    index = next((i for i, m in enumerate(history.messages) if m.id == keep_from),
                 len(history.messages))
    request = next((m for m in history.messages[:index]
                    if entry.get("turnMessageId") and m.id == entry["turnMessageId"]), None)
    del history.messages[:index]
    if request is not None:
        history.messages.insert(0, request)
    history.summary = entry.get("summary") or history.summary
    history.compactions += 1
    history.after_compaction = len(history.messages)
    history.summarised_turn = request.id if request is not None else None


def undo_last(history: History, transcript: TranscriptLog, verb: str = "undo"
              ) -> tuple[Message, bool]:
    """Take the last turn (its user message and everything after it) out of ``history``
    and record an ``undo`` entry in ``transcript``, which keeps the turn itself.

    Returns the turn's user message, and whether a memory flush ran after it (the notes it
    saved stay in ``memory/``). A turn a compaction summarised, even in part, cannot be
    undone: the summary would still tell it. ``verb`` (``undo``, ``retry``) words the refusal.
    """
    request = next((m for m in reversed(history.messages) if m.role == "user"), None)
    if request is None:
        raise ClawdError(f"nothing to {verb}: " + (
            "the earlier turns are summarised (compacted) and cannot be taken back"
            if history.summary else "this session has no turns yet"))
    if request.id == history.summarised_turn:
        raise ClawdError(f"cannot {verb}: the last turn was partly summarised by a compaction")
    entries = transcript.load(quiet=True).entries
    start = next((i for i, e in enumerate(entries) if e.get("id") == request.id), len(entries))
    flushed = any(e.get("flush") and e.get("role") == "user" for e in entries[start:])
    transcript.append({"type": "undo", "messageId": request.id, "reason": verb})
    apply_undo(history, request.id)
    return request, flushed


def apply_undo(history: History, message_id: Any) -> bool:
    """Drop the turn that starts at user message ``message_id``, and everything after it;
    False (nothing dropped) when that message is not in the history."""
    index = next((i for i, m in enumerate(history.messages) if m.id == message_id), None)
    if index is None:
        return False
    del history.messages[index:]
    history.after_compaction = min(history.after_compaction, index)
    return True


UNDONE = {"undo": "taken back with /undo", "retry": "taken back with /retry"}


def taken_back(entries: list[dict[str, Any]]) -> dict[str, str]:
    """The ids of the messages of every turn an ``undo`` entry took back (a user message and
    everything after it until the next one), each with the entry's reason."""
    turns: dict[str, list[str]] = {}
    current: list[str] | None = None
    out: dict[str, str] = {}
    for entry in entries:
        kind = entry.get("type")
        if kind == "message" and not entry.get("flush") and isinstance(entry.get("id"), str):
            if entry.get("role") == "user":
                current = turns.setdefault(entry["id"], [])
            if current is not None:
                current.append(entry["id"])
        elif kind == "undo" and entry.get("messageId") in turns:
            reason = str(entry.get("reason")) if entry.get("reason") in UNDONE else "undo"
            out.update(dict.fromkeys(turns[entry["messageId"]], reason))
    return out
