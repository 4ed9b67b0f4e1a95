"""What a transcript says about its session: the facts behind ``sessions.json`` and listings.

The store is an index over the transcripts. ``read_summary`` reads one transcript (header
line and entries) into a ``Summary``: its key, model, title, message count, last activity,
and the counters the store keeps, recomputed from the usage each call reported.
``entry_from`` turns a summary into a store entry, which is how a lost or unreadable
``sessions.json`` is rebuilt and how ``clawd chat --resume ID`` points a key at a session.
``find_transcript`` resolves an id (or a unique prefix of one) to its file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from clawd.core.errors import ClawdError
from clawd.core.messages import Message
from clawd.sessions.entry import SessionEntry, new_entry
from clawd.sessions.transcript import Loaded, Transcript

TITLE_CHARS = 60
TITLE_ENTRY = "title"  # ``{"type": "title", "title"}``: the session renamed
# An entry naming the session key, appended to a transcript whose header predates the key.
KEY_ENTRY = "session-key"
DELETED_DIR = "deleted"  # transcripts of deleted sessions: kept, but out of every listing


@dataclass
class Summary:
    """One session as its transcript records it."""

    path: Path
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


def read_summary(path: Path) -> Summary | None:
    """The summary of one transcript; None when it has no header line (not a transcript)."""
    loaded = Transcript(path).load(quiet=True)
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
    return Summary(path=path, session_id=header["id"], agent_id=_text(header.get("agentId")),
                   key=session_key_of(loaded), created=_text(header.get("timestamp")),
                   last_activity=last, model=model or _text(header.get("model")),
                   model_override=_text(header.get("modelOverride")), title=named or title,
                   messages=count, counters=counters, latest={**turn, **latest},
                   flush_at=flush_at, flush_cycle=flush_cycle, loaded=loaded)


def entry_from(summary: Summary, default_model: str = "") -> SessionEntry:
    """A ``sessions.json`` entry that says what the transcript says."""
    created = summary.created or summary.last_activity
    entry = cast(SessionEntry, {
        **new_entry(summary.session_id, summary.path, summary.model or default_model,
                    created), **summary.counters, **summary.latest})
    entry["updatedAt"] = summary.last_activity or created
    if summary.model_override:
        entry["modelOverride"] = summary.model_override
    if summary.flush_cycle is not None:
        entry["memoryFlushAt"] = summary.flush_at
        entry["memoryFlushCompactionCount"] = summary.flush_cycle
    return entry


def transcripts(sessions_dir: Path) -> list[Path]:
    """Every live transcript of an agent (deleted sessions' are set apart)."""
    return sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.is_dir() else []


def rebuild(sessions_dir: Path, agent_id: str | None = None) -> dict[str, SessionEntry]:
    """Store entries from the transcripts: per key, the session with the latest activity.

    A transcript written before headers carried the key gets a key of its own
    (``agent:<agentId>:session-<id>``): it can be resumed, and never takes another's place.
    """
    found: dict[str, tuple[str, SessionEntry]] = {}
    for path in transcripts(sessions_dir):
        summary = read_summary(path)
        if summary is None:
            continue
        agent = summary.agent_id or agent_id or "main"
        key = summary.key or f"agent:{agent}:session-{summary.session_id}"
        when = summary.last_activity or ""
        if key not in found or when >= found[key][0]:
            found[key] = (when, entry_from(summary))
    return {key: entry for key, (_, entry) in found.items()}


def find_transcript(sessions_dir: Path, wanted: str) -> Path:
    """The transcript of a session id, or of the one session whose id starts with it."""
    wanted = wanted.strip()
    exact = sessions_dir / f"{wanted}.jsonl"
    if wanted and "/" not in wanted and exact.is_file():
        return exact
    matches = [p for p in transcripts(sessions_dir) if wanted and p.stem.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ClawdError(f"no session {wanted!r} in {sessions_dir} (see clawd sessions list)")
    raise ClawdError(f"{wanted!r} matches {len(matches)} sessions "
                     f"({', '.join(p.stem for p in matches[:4])}…); give more of the id")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
