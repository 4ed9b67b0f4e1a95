"""What a transcript says about its session: the facts behind ``sessions.json`` and listings.

The store is an index over the transcripts. ``summary_of`` reads one transcript (header
line and entries) into a ``TranscriptSummary``: its key, model, title, message count, last activity,
and the counters the store keeps, recomputed from the usage each call reported.
``entry_from`` turns a summary into a store entry, which is how a lost or unreadable
``sessions.json`` is rebuilt and how ``clawd chat --resume ID`` points a key at a session.
``find_session`` resolves an id (or a unique prefix of one) among the sessions kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from clawd.core.errors import ClawdError
from clawd.core.messages import Message
from clawd.sessions.entry import SessionEntry, new_entry
from clawd.sessions.interface import Loaded

if TYPE_CHECKING:
    from clawd.sessions.interface import TranscriptLog

TITLE_CHARS = 60
TITLE_ENTRY = "title"  # ``{"type": "title", "title"}``: the session renamed
# An entry naming the session key, appended to a transcript whose header predates the key.
KEY_ENTRY = "session-key"


@dataclass
class TranscriptSummary:
    """One session as its transcript records it."""

    location: str  # where the transcript is, as messages name it
    session_id: str
    agent_id: str | None
    key: str | None
    created: str | None
    last_activity: str | None
    model: str | None
    model_override: str | None
    title: str
    messages: int  # user and assistant messages, the memory flush's excluded
    counters: dict[str, int] = field(default_factory=dict)
    latest: dict[str, Any] = field(default_factory=dict)  # OpenClaw's latest-turn fields
    flush_at: str | None = None
    flush_cycle: int | None = None  # compactionCount when the latest flush ran
    loaded: Loaded | None = None


def session_key_of(loaded: Loaded) -> str | None:
    """The session key a transcript names: its header's, else a later key entry's."""
    key = _text((loaded.header or {}).get("key"))
    for entry in loaded.entries:
        if entry.get("type") == KEY_ENTRY:
            key = key or _text(entry.get("key"))
    return key


def summary_of(log: TranscriptLog) -> TranscriptSummary | None:
    """The summary of one transcript log; None when it has no header line."""
    return summarize(log.load(quiet=True), log.location)


def summarize(loaded: Loaded, location: str) -> TranscriptSummary | None:
    """What a loaded transcript says; None when it has no header line (not a transcript)."""
    header = loaded.header
    if header is None or not isinstance(header.get("id"), str):
        return None
    counters = dict.fromkeys(("cumulativeInputTokens", "cumulativeOutputTokens",
                              "cumulativeCacheReadTokens", "cumulativeCacheWriteTokens",
                              "compactionCount", "memoryFlushCount"), 0)
    title, count, model, last = "", 0, None, _text(header.get("timestamp"))
    flush_at, flush_cycle = None, None
    turn = {"inputTokens": 0, "outputTokens": 0}
    latest: dict[str, Any] = {"totalTokens": 0, "totalTokensFresh": False}
    named = ""  # a rename (a ``title`` entry): the newest names the session
    for entry in loaded.entries:
        if entry.get("type") == TITLE_ENTRY:  # no activity: not counted as such
            named = _one_line(str(entry.get("title") or "")) or named
            continue
        last = _text(entry.get("timestamp")) or last
        if entry.get("type") == "compaction":
            counters["compactionCount"] += 1
        if entry.get("type") in ("compaction", "undo"):  # the history changed since
            latest["totalTokensFresh"] = False
            continue
        if entry.get("type") != "message":
            continue
        try:
            message = Message.from_entry(entry)
        except (ValueError, KeyError, TypeError):
            continue
        if message.flush and message.role == "user":
            counters["memoryFlushCount"] += 1
            flush_at, flush_cycle = message.timestamp or None, counters["compactionCount"]
        elif not message.flush and message.role == "user":
            turn = {"inputTokens": 0, "outputTokens": 0}
            title = title or _one_line(message.text)
        if not message.flush and message.role in ("user", "assistant"):
            count += 1
        # a provider/model reference; a bare model id says less than the header does
        if message.role == "assistant" and message.model and (
                "/" in message.model or not header.get("model")):
            model = message.model
        usage = message.usage
        if usage is None:
            continue
        counters["cumulativeInputTokens"] += usage.input_tokens
        counters["cumulativeOutputTokens"] += usage.output_tokens
        counters["cumulativeCacheReadTokens"] += usage.cache_read_tokens
        counters["cumulativeCacheWriteTokens"] += usage.cache_write_tokens
        if not message.flush:
            turn["inputTokens"] += usage.input_tokens
            turn["outputTokens"] += usage.output_tokens
        if usage.prompt_tokens:
            latest = {"totalTokens": usage.prompt_tokens, "totalTokensFresh": True}
    return TranscriptSummary(location=location, session_id=header["id"],
                             agent_id=_text(header.get("agentId")),
                             key=session_key_of(loaded), created=_text(header.get("timestamp")),
                             last_activity=last, model=model or _text(header.get("model")),
                             model_override=_text(header.get("modelOverride")),
                             title=named or title, messages=count, counters=counters,
                             latest={**turn, **latest}, flush_at=flush_at,
                             flush_cycle=flush_cycle, loaded=loaded)


def entry_from(summary: TranscriptSummary, default_model: str = "", session_file: str | None = None
               ) -> SessionEntry:
    """A ``sessions.json`` entry that says what the transcript says (``session_file``: what
    its ``sessionFile`` says; by default the transcript's location)."""
    created = summary.created or summary.last_activity
    entry = cast(SessionEntry, {
        **new_entry(summary.session_id, session_file or summary.location,
                    summary.model or default_model,
                    created), **summary.counters, **summary.latest})
    entry["updatedAt"] = summary.last_activity or created
    if summary.model_override:
        entry["modelOverride"] = summary.model_override
    if summary.flush_cycle is not None:
        entry["memoryFlushAt"] = summary.flush_at
        entry["memoryFlushCompactionCount"] = summary.flush_cycle
    return entry


def entries_from(summaries: Iterable[TranscriptSummary | None], agent_id: str | None = None,
                 session_file: Callable[[str], str] | None = None) -> dict[str, SessionEntry]:
    """Store entries from transcripts' summaries: per key, the session with the latest
    activity (``session_file``: what an entry's ``sessionFile`` says for a session id).

    A transcript written before headers carried the key gets a key of its own
    (``agent:<agentId>:session-<id>``): it can be resumed, and never takes another's place.
    """
    found: dict[str, tuple[str, SessionEntry]] = {}
    for summary in summaries:
        if summary is None:
            continue
        agent = summary.agent_id or agent_id or "main"
        key = summary.key or f"agent:{agent}:session-{summary.session_id}"
        when = summary.last_activity or ""
        if key not in found or when >= found[key][0]:
            found[key] = (when, entry_from(summary, session_file=session_file(
                summary.session_id) if session_file else None))
    return {key: entry for key, (_, entry) in found.items()}


def find_session(ids: list[str], wanted: str, where: str) -> str:
    """The session id ``wanted`` names in ``ids``: itself, or the one id it begins."""
    wanted = wanted.strip()
    if wanted in ids:
        return wanted
    matches = [one for one in ids if wanted and one.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ClawdError(f"no session {wanted!r} in {where} (see clawd sessions list)")
    raise ClawdError(f"{wanted!r} matches {len(matches)} sessions "
                     f"({', '.join(matches[:4])}…); give more of the id")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
