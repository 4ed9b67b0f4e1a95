"""The embedded transcripts: ``<sessions>/<session id>.jsonl``, one file per session, one
entry per line (``sessions.transcript``), appended to and never rewritten; the transcripts
of deleted sessions are kept in ``<sessions>/deleted/``, out of every listing.

A torn last line (a crash cut the write) is ended before the next append, so one bad write
never spoils the next. ``rebuild`` reads the store's entries back from the files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from clawd.core.messages import Message, new_id, now_iso
from clawd.sessions.entry import SessionEntry
from clawd.sessions.files import TranscriptSummary, entries_from, summarize
from clawd.sessions.interface import Loaded
from clawd.sessions.transcript import begin, parse_lines

DELETED_DIR = "deleted"  # transcripts of deleted sessions: kept, but out of every listing


class Transcript:
    """One session's JSONL file."""

    def __init__(self, path: Path):
        self.path = path
        self.session_id = path.stem
        self.location = str(path)
        self._needs_newline: bool | None = None

    @classmethod
    def create(cls, path: Path, agent_id: str, **about: Any) -> Transcript:
        """The transcript file ``path`` (named ``<session id>.jsonl``), its header line
        written when it is new (``begin``)."""
        transcript = cls(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        begin(transcript, agent_id, **about)
        return transcript

    def append(self, entry: dict[str, Any]) -> None:
        """Write one entry as a line and flush it to the OS before returning."""
        entry.setdefault("id", new_id())
        entry.setdefault("timestamp", now_iso())
        data = orjson.dumps(entry) + b"\n"
        if self._needs_newline is None:
            self._needs_newline = _ends_torn(self.path)
        if self._needs_newline:
            data = b"\n" + data
        with open(self.path, "ab") as handle:
            handle.write(data)
            handle.flush()
        self._needs_newline = False

    def append_message(self, message: Message) -> None:
        self.append(message.to_entry())

    def load(self, *, quiet: bool = False) -> Loaded:
        """Every valid entry, skipping (and reporting) torn or invalid lines; ``quiet``
        leaves the logging of the warnings to the caller."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Loaded(None, [], [])
        return parse_lines(enumerate(raw.split(b"\n"), start=1), self.location, quiet=quiet)


def read_summary(path: Path) -> TranscriptSummary | None:
    """The summary of one transcript file; None when it has no header line."""
    return summarize(Transcript(path).load(quiet=True), str(path))


def transcripts(sessions_dir: Path) -> list[Path]:
    """Every live transcript of an agent (deleted sessions' are set apart)."""
    return sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.is_dir() else []


def rebuild(sessions_dir: Path, agent_id: str | None = None) -> dict[str, SessionEntry]:
    """Store entries from the transcript files of ``sessions_dir`` (``entries_from``)."""
    return entries_from((read_summary(path) for path in transcripts(sessions_dir)), agent_id)


def _ends_torn(path: Path) -> bool:
    """True when the file's last byte is not a newline (a crash cut the last write)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except (FileNotFoundError, OSError):
        return False
