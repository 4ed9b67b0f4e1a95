"""What the memory index reads of an agent in PostgreSQL (``memory.sources.MemorySources``):
its notes (``workspace_files`` rows) and transcripts (``transcript_lines``), stamped by size
and change time, and a fingerprint of both that the index polls before a search (a
database is not watched). ``extraPaths`` are folders of the disk: a database's index does
not read them."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from clawd.config import MemorySearch
from clawd.memory.sources import Skipped, SourceFile, Stamp
from clawd.sessions.interface import Loaded, TranscriptLog

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections
    from clawd.storage.postgres.files import PgFiles


class PgMemorySources:
    """The notes and transcripts of one agent as the memory index reads them
    (``memory.sources.MemorySources``): rows, stamped by size and change time."""

    def __init__(self, db: Connections, agent_id: str, files: PgFiles,
                 transcript: Callable[[str], TranscriptLog]):
        self.db, self.agent_id, self.files, self._transcript = db, agent_id, files, transcript

    def sources(self, settings: MemorySearch, skipped: Skipped | None = None
                ) -> list[SourceFile]:
        found: list[SourceFile] = []
        with self.db.connection() as conn:
            if "memory" in settings.sources:
                rows = conn.execute(
                    "SELECT path, length(data), extract(epoch FROM mtime)::float8 FROM "
                    "workspace_files WHERE agent_id = %s AND (path = 'MEMORY.md' OR "
                    "(starts_with(path, 'memory/') AND path LIKE '%%.md')) ORDER BY path",
                    (self.agent_id,)).fetchall()
                found += [SourceFile(path, "memory", Stamp(size, when, int(when * 1e9)),
                                     partial(self._note, path))
                          for path, size, when in rows]
            if settings.experimental.session_memory and "sessions" in settings.sources:
                rows = conn.execute(
                    "SELECT l.session_id, sum(length(coalesce(line::text, torn)) + 1), "
                    "max(seq) FROM transcript_lines l JOIN session_logs s USING "
                    "(agent_id, session_id) WHERE l.agent_id = %s AND s.deleted_at IS NULL "
                    "GROUP BY l.session_id ORDER BY l.session_id", (self.agent_id,)).fetchall()
                found += [SourceFile(f"sessions/{sid}.jsonl", "sessions",
                                     Stamp(int(size), float(seq), seq),
                                     log=partial(self._log, sid))
                          for sid, size, seq in rows]
        return found

    def read(self, key: str) -> bytes | None:
        return self.files.read_bytes(key)

    def fingerprint(self) -> str:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT concat(count(*), ':', sum(version), ':', max(mtime)) FROM "
                "workspace_files WHERE agent_id = %s AND (path = 'MEMORY.md' OR "
                "starts_with(path, 'memory/'))), (SELECT max(seq) FROM transcript_lines "
                "WHERE agent_id = %s)", (self.agent_id, self.agent_id)).fetchone()
        return f"{row[0]}|{row[1]}" if row else ""

    def _note(self, path: str) -> bytes:
        data = self.files.read_bytes(path)
        if data is None:
            raise FileNotFoundError(path)
        return data

    def watch(self, settings: MemorySearch, on_change: Callable[[], None]) -> None:
        return None  # rows are not watched: the index polls ``fingerprint``

    def _log(self, session_id: str) -> Loaded:
        return self._transcript(session_id).load(quiet=True)
