"""Everything one agent keeps, as the loop and the front ends reach it: ``AgentStorage``.

One object per agent, built by the composition root (``storage.open_storage``) and handed
to the ``Runtime``: the session store, the transcripts (opened by session id, never by
path), the workspace files and their kept versions, a small key-value of the agent's own
records (consolidation's last run), and the one-writer-per-session lease. Nothing above this
layer knows whether these are files under ``~/.clawd`` and the workspace
(``storage.files.storage.FileStorage``, the embedded default) or rows of a PostgreSQL
database (``storage.postgres.storage.PgStorage``): messages name a store by its
``location``, not a path, and what differs between them (whether the workspace must be made
first, what ``clawd doctor`` checks) is asked of the store.
``tests/storage/test_storage_contracts.py`` is the suite every implementation passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clawd.sessions.lock import CHAT_HINT

if TYPE_CHECKING:
    from clawd.memory.index_store import IndexStore
    from clawd.memory.sources import MemorySources
    from clawd.sessions.interface import SessionRecords, TranscriptLog
    from clawd.workspace.interface import Backups, WorkspaceFiles


class Lease(Protocol):
    """One process's hold on a session key: nobody else runs its turns meanwhile."""

    def describe(self, until: float | None) -> None:
        """Say to a waiter when this holder lets the session go (``until``, a
        ``time.time()``; None: not known, e.g. while a turn runs)."""
        ...

    def release(self) -> None: ...

    @property
    def lost(self) -> bool:
        """Whether another process took the session while this one believed it held it
        (its writes are refused since: see ``storage.postgres.fencing``)."""
        ...


class KeyValue(Protocol):
    """Small JSON records of the agent's own (consolidation's last run, say)."""

    def get(self, name: str) -> dict[str, Any] | None: ...

    def put(self, name: str, value: dict[str, Any]) -> None: ...

    def claim(self, name: str, token: str) -> bool:
        """Take ``token`` (a day, a job) under ``name`` for this process: True only for the
        one call, in any process, that set it; background work that must run once."""
        ...


class AgentStorage(Protocol):
    """One agent's sessions, transcripts, workspace files and records."""

    agent_id: str
    kind: str  # "files" or "postgresql"
    location: str  # where it all is, as messages name it
    sessions: SessionRecords
    files: WorkspaceFiles
    backups: Backups
    records: KeyValue
    # what the memory index reads (the notes and transcripts, as this store keeps them),
    # where it keeps its rows (None: a SQLite file under ``index_home``)
    memory_sources: MemorySources
    memory_index: Callable[[], IndexStore] | None
    index_home: Path

    def transcript(self, session_id: str, key: str | None = None) -> TranscriptLog:
        """The log of session ``session_id`` (empty until something is appended);
        ``key``: the session key it is written under, for a store that fences writes."""
        ...

    def session_file(self, session_id: str) -> str:
        """What a session entry's ``sessionFile`` says for ``session_id``."""
        ...

    def session_ids(self) -> list[str]:
        """Every session with a transcript, deleted ones left out, sorted."""
        ...

    def set_aside(self, session_id: str, *, purge: bool = False) -> str:
        """Take a session's transcript out of every listing: kept apart (``deleted``), or
        gone with ``purge``. What was done, as a message says it."""
        ...

    def hold(self, key: str, wait: float | None = None, hint: str = CHAT_HINT) -> Lease:
        """Hold session ``key`` for this process, waiting up to ``wait`` seconds (None:
        the default wait); a ``SessionBusyError`` ending with ``hint`` when someone else
        holds it. Held again within one process, it is counted."""
        ...

    def workspace_exists(self) -> bool:
        """Whether the workspace is there to be read and written: a folder must be made
        first (``clawd init``), rows need nothing."""
        ...

    def check(self, access: str) -> Iterator[tuple[bool, str, str]]:
        """``clawd doctor``'s lines for this store, (ok, what, detail): it is reached and
        the workspace can be written (``access``: ``workspaceAccess``, which the detail
        names when clawd will not write)."""
        ...
