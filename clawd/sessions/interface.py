"""The narrow interfaces through which the loop and the front ends keep conversations.

``SessionRecords`` is the session store (one entry per session key: which session id it
points at, its counters, its model pin); ``TranscriptLog`` is one session's append-only log of
entries (messages, compactions, undos), read back as ``Loaded`` (each entry with its line
number). The embedded implementations are ``storage.files.sessions.SessionStore``
(``sessions.json``, locked and atomically replaced) and ``storage.files.transcripts.Transcript``
(a JSONL file). A
hosted, many-user clawd (stateless workers, one PostgreSQL database) is a second
implementation of both: ``tests/storage/test_storage_contracts.py`` is the suite any implementation
must pass. An entry is a ``SessionEntry`` (``sessions.entry``): typed fields, stored as JSON;
a transcript read back is a ``Loaded``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from clawd.sessions.entry import SessionEntry

if TYPE_CHECKING:
    from clawd.core.messages import Message

Entry = SessionEntry


@dataclass
class Loaded:
    """What ``TranscriptLog.load`` read: the header, the entries in order and what was
    skipped."""

    header: dict[str, Any] | None
    entries: list[dict[str, Any]]
    warnings: list[str]
    invalid_lines: list[int] = field(default_factory=list)  # the skipped lines' numbers
    numbers: list[int] = field(default_factory=list)  # each entry's line number (from 1)
    lines: int = 0  # how many lines were read, blank ones included


class SessionRecords(Protocol):
    """The session store."""

    location: str  # where it lives, as messages name it

    def rebuild(self) -> tuple[int, int]:
        """Recount every entry from its transcript and add the sessions only transcripts
        know; (entries recounted, entries added)."""
        ...

    def entries(self) -> dict[str, Entry]:
        """Every entry by session key (normalised: lower-case)."""
        ...

    def get(self, key: str) -> Entry | None: ...

    def count(self) -> int:
        """How many entries (sessions with a key) there are."""
        ...

    def page(self, limit: int, after: tuple[str, str] | None = None
             ) -> list[tuple[str, Entry]]:
        """At most ``limit`` (key, entry), newest activity first, after the place ``after``
        (``sessions.paging``: its order and cursors)."""
        ...

    def update(self, key: str, change: Callable[[Entry | None], Entry | None], *,
               touch: bool = True) -> Entry | None:
        """Apply ``change`` to one entry atomically, against what is stored (``None`` in:
        no entry yet; ``None`` out: remove it); the new entry. ``touch``: set
        ``updatedAt`` (the last activity)."""
        ...

    def patch(self, key: str, base: Entry | None = None, add: dict[str, int] | None = None,
              copy: dict[str, str] | None = None, touch: bool = True,
              **fields: Any) -> Entry | None:
        """Set fields, add to counters, copy fields, atomically; a missing entry is
        re-created from ``base`` (without it nothing is written)."""
        ...


class TranscriptLog(Protocol):
    """One session's append-only log."""

    session_id: str
    location: str  # where it lives, as messages name it

    def append(self, entry: dict[str, Any]) -> None:
        """Add an entry (``id`` and ``timestamp`` filled in when missing), durably."""
        ...

    def append_message(self, message: Message) -> None: ...

    def load(self, *, quiet: bool = False) -> Loaded:
        """The header and every readable entry in order; unreadable ones reported."""
        ...
