"""What the memory index reads of the embedded files (``memory.sources.MemorySources``):
``DiskSources`` finds the notes under the workspace folder and ``extraPaths`` and the
transcripts of the sessions folder, reads them, and watches the folders.

``MEMORY.md`` and ``memory/**/*.md`` are found under the workspace; a symlink (to a file or
a folder) leading out of the workspace is skipped and reported (``skipped``). Files inside
the workspace are keyed by their workspace-relative path, others (``extraPaths``) by their
absolute path. A transcript is read through ``Transcript.load``, keyed
``sessions/<id>.jsonl``. ``open_file_index`` is the memory index over such a folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawd.config import MemorySearch
from clawd.memory.sources import (
    FOLDER_LINK_OUT,
    LINK_OUT,
    Skipped,
    SourceFile,
    extra_roots,
    is_under,
)
from clawd.storage.files.memory_watch import Watcher
from clawd.storage.files.transcripts import Transcript, transcripts
from clawd.storage.files.workspace import DiskFiles
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

if TYPE_CHECKING:
    from clawd.memory.index import MemoryIndex


class DiskSources:
    """The notes of the folder ``workspace`` and the transcripts of ``sessions_dir`` (None:
    no transcripts)."""

    def __init__(self, workspace: Path, sessions_dir: Path | None = None):
        self.workspace, self.sessions_dir = workspace, sessions_dir

    def sources(self, settings: MemorySearch, skipped: Skipped | None = None
                ) -> list[SourceFile]:
        found = memory_files(self.workspace, settings, skipped) \
            if "memory" in settings.sources else []
        return found + self._transcripts(settings)

    def read(self, key: str) -> bytes | None:
        try:
            return (self.workspace / key).read_bytes()
        except FileNotFoundError:
            return None

    def fingerprint(self) -> str:
        return ""  # the folders are watched (``watch``), not polled

    def watch(self, settings: MemorySearch, on_change: Callable[[], None]) -> Watcher:
        watcher = Watcher(self.workspace, settings, self.sessions_dir, on_change)
        watcher.start()
        return watcher

    def _transcripts(self, settings: MemorySearch) -> list[SourceFile]:
        if not (settings.experimental.session_memory and "sessions" in settings.sources):
            return []
        if self.sessions_dir is None:
            return []
        return [SourceFile(f"sessions/{path.name}", "sessions", path.stat,
                           log=partial(Transcript(path).load, quiet=True))
                for path in transcripts(self.sessions_dir)]


def memory_files(workspace: Path, settings: MemorySearch,
                 skipped: Skipped | None = None) -> list[SourceFile]:
    """The memory files to index; links out of the workspace go to ``skipped`` instead."""
    root = workspace.resolve()
    skipped = {} if skipped is None else skipped
    candidates: list[Path] = []
    if (root / MEMORY_FILE).is_file():
        candidates.append(root / MEMORY_FILE)
    if (root / MEMORY_DIR).is_dir():
        candidates += _markdown_under(root / MEMORY_DIR, root, skipped)
    files: dict[str, SourceFile] = {}
    for path in candidates:
        real = path.resolve()
        key = path.relative_to(root).as_posix()
        if not is_under(root, real):
            skipped[key] = LINK_OUT
            continue
        files[key] = _on_disk(key, real)
    for extra in extra_roots(root, settings):
        paths = [extra] if extra.is_file() else _markdown_under(extra)
        for path in paths:
            real = path.resolve()
            if not real.is_file():
                continue
            key = real.relative_to(root).as_posix() if is_under(root, real) else str(real)
            files.setdefault(key, _on_disk(key, real))
    return sorted(files.values(), key=lambda f: f.key)


def _on_disk(key: str, real: Path) -> SourceFile:
    return SourceFile(key, "memory", real.stat, real.read_bytes)


def _markdown_under(directory: Path, root: Path | None = None,
                    skipped: Skipped | None = None) -> list[Path]:
    """The ``.md`` files below ``directory``. Linked folders are not followed; with ``root``
    given, those leading out of it are recorded in ``skipped``."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if root is not None and skipped is not None:
            for name in dirnames:
                link = Path(dirpath) / name
                if link.is_symlink() and not is_under(root, link.resolve()):
                    skipped[link.relative_to(root).as_posix()] = FOLDER_LINK_OUT
        found += [Path(dirpath) / name for name in sorted(filenames)
                  if name.lower().endswith(".md") and not name.startswith(".")]
    return found


def open_file_index(agent_id: str, workspace: Path, settings: MemorySearch, state_dir: Path,
                    sessions_dir: Path | None = None, **options: Any) -> MemoryIndex:
    """The memory index over the folder ``workspace`` (and, with session memory on, the
    transcripts in ``sessions_dir``), its rows in a SQLite file under ``state_dir`` unless
    ``open_store`` says otherwise; ``options``: those of ``memory.index.open_index``."""
    from clawd.memory.index import open_index

    return open_index(agent_id, workspace, settings, state_dir,
                      sources=DiskSources(workspace, sessions_dir), files=DiskFiles(workspace),
                      **options)
