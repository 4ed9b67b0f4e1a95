"""The embedded ``AgentStorage``: files under ``~/.clawd/agents/<id>`` and the workspace.

``sessions/sessions.json`` is the session store, ``sessions/<id>.jsonl`` the transcripts
(``sessions/deleted/`` keeps those of deleted sessions), ``<name>.json`` beside
``sessions/`` the agent's small records, and the session lease an OS file lock
(``sessions.lock``). The workspace is a folder of Markdown files with earlier versions kept
under ``.clawd/history``; the memory index reads the notes and transcripts where they lie
(``memory.DiskSources``) and keeps its rows in a SQLite file under the state folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from clawd.core.messages import now_iso
from clawd.core.metrics import METRICS
from clawd.core.paths import state_dir
from clawd.memory.index_store import IndexStore
from clawd.memory.sources import MemorySources
from clawd.sessions import lock
from clawd.sessions.interface import SessionRecords
from clawd.sessions.lock import CHAT_HINT
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.locking import locked_file
from clawd.storage.files.memory import DiskSources
from clawd.storage.files.sessions import SessionStore
from clawd.storage.files.transcripts import DELETED_DIR, Transcript, transcripts
from clawd.storage.files.workspace import DiskFiles
from clawd.storage.interface import KeyValue
from clawd.storage.session_ids import checked_id
from clawd.workspace.interface import Backups, WorkspaceFiles


class FileLease:
    """A session key's OS file lock (``sessions.lock``)."""

    def __init__(self, sessions_dir: Path, key: str, wait: float | None, hint: str):
        self.sessions_dir, self.key = sessions_dir, key
        self._held: Path | None = None
        started = time.monotonic()  # the wait is counted (``METRICS``)
        try:
            self._held = lock.acquire(sessions_dir, key, wait=wait, hint=hint)
        finally:
            METRICS.lease(time.monotonic() - started, self._held is not None)

    lost = False  # an OS lock goes only with its process

    def describe(self, until: float | None) -> None:
        if self._held is not None:
            lock.describe(self.sessions_dir, self.key, until)

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            lock.release(held)


class JsonRecords:
    """``KeyValue`` as ``<folder>/<name>.json`` files, each replaced whole."""

    def __init__(self, folder: Path):
        self.folder = folder

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.folder / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def claim(self, name: str, token: str) -> bool:
        """A read and a write under a lock on ``<name>.json.lock``."""
        with locked_file(self.folder / f"{name}.json.lock"):
            if (self.get(name) or {}).get("claim") == token:
                return False
            self.put(name, {"claim": token})
            return True

    def put(self, name: str, value: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{name}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value) + "\n", encoding="utf-8")
        os.replace(tmp, path)


class FileStorage:
    """One agent's files: ``sessions_dir`` and the folder ``workspace``."""

    kind = "files"

    def __init__(self, agent_id: str, workspace: Path, sessions_dir: Path,
                 now: Callable[[], str] = now_iso):
        self.agent_id = agent_id
        self.workspace, self.sessions_dir = workspace, sessions_dir
        self.location = str(sessions_dir.parent)
        sessions_dir.mkdir(parents=True, exist_ok=True)
        self.sessions: SessionRecords = SessionStore(sessions_dir / "sessions.json", now=now)
        self.files: WorkspaceFiles = DiskFiles(workspace)
        self.backups: Backups = DiskBackups(workspace)
        self.records: KeyValue = JsonRecords(sessions_dir.parent)
        self.memory_sources: MemorySources = DiskSources(workspace, sessions_dir)
        self.memory_index: Callable[[], IndexStore] | None = None  # a SQLite file
        self.index_home = state_dir()

    def transcript(self, session_id: str, key: str | None = None) -> Transcript:
        return Transcript(self.sessions_dir / f"{checked_id(session_id)}.jsonl")

    def session_file(self, session_id: str) -> str:
        return str(self.sessions_dir / f"{checked_id(session_id)}.jsonl")

    def session_ids(self) -> list[str]:
        return [path.stem for path in transcripts(self.sessions_dir)]

    def set_aside(self, session_id: str, *, purge: bool = False) -> str:
        path = self.transcript(session_id).path
        if purge:
            path.unlink()
            return f"deleted session {session_id} and its transcript"
        target = path.parent / DELETED_DIR / path.name
        target.parent.mkdir(exist_ok=True)
        shutil.move(str(path), target)
        return f"deleted session {session_id}; its transcript is kept in {target}"

    def hold(self, key: str, wait: float | None = None, hint: str = CHAT_HINT) -> FileLease:
        return FileLease(self.sessions_dir, key, wait, hint)

    def workspace_exists(self) -> bool:
        return self.workspace.is_dir()

    def check(self, access: str) -> Iterator[tuple[bool, str, str]]:
        """The workspace folder: it exists and a file can be made in it."""
        workspace = self.workspace
        try:
            with tempfile.NamedTemporaryFile(dir=workspace, prefix=".clawd-doctor-"):
                pass
            yield True, "workspace", f"{workspace} is writable" + (
                "" if access == "rw" else f" (workspaceAccess {access!r}: clawd "
                "will not write it)")
        except OSError as exc:
            missing = not workspace.exists()
            yield False, "workspace", (f"{workspace} does not exist (run clawd init)" if missing
                                       else f"{workspace} is not writable: "
                                       f"{exc.strerror or exc}")
