"""What the memory index reads: the memory files, ``extraPaths`` and (opt-in) transcripts.

``MEMORY.md`` and ``memory/**/*.md`` are found under the workspace; a symlink (to a file or a
folder) leading out of the workspace is skipped, and reported in the ``skipped`` mapping the
caller passes so that the index can warn once, not on every sync. ``extraPaths`` entries
(files or directories of ``.md`` files, relative to the workspace or absolute) are the
user's explicit choice and may lie outside it. Files inside the workspace are keyed by
their workspace-relative path, others by their absolute path.
Session transcripts are indexed only with ``experimental.sessionMemory`` on
and ``"sessions"`` in ``sources``: each JSONL line becomes one text line (user and assistant
text, everything else blank) so a result's line range is the transcript's own line range.

A memory file must be UTF-8 text: ``read_source`` (and ``decode_text`` and ``stored_text``
for ``memory_get``) raises ``NotText`` for one holding NUL bytes or invalid UTF-8, which
the index skips instead of filling itself with binary junk.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from clawd.config import MemorySearch
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

log = logging.getLogger(__name__)


class Stamp(NamedTuple):
    """What a stored file's size and time are (as ``os.stat`` names them)."""

    st_size: int
    st_mtime: float
    st_mtime_ns: int


@dataclass(frozen=True, slots=True)
class SourceFile:
    key: str  # the path results and memory_get use
    source: str  # "memory" | "sessions"
    path: Path | None  # real location on disk; None: kept in a store (``reader``)
    reader: Callable[[], bytes] | None = None
    stamp: Stamp | None = None

    def stat(self) -> Any:
        """Its size and time (``st_size``, ``st_mtime``, ``st_mtime_ns``)."""
        if self.stamp is not None:
            return self.stamp
        assert self.path is not None
        return self.path.stat()

    def read(self) -> bytes:
        if self.reader is not None:
            return self.reader()
        assert self.path is not None
        return self.path.read_bytes()


class StoredSources(Protocol):
    """Memory files and transcripts kept in a store rather than a folder (a database): the
    index reads them through this, and polls ``fingerprint`` where a folder is watched."""

    def sources(self, settings: MemorySearch) -> list[SourceFile]:
        """The memory files (and, with session memory on, the transcripts) to index."""
        ...

    def read(self, key: str) -> bytes | None:
        """The bytes of the memory file ``key`` (workspace-relative), or None."""
        ...

    def fingerprint(self) -> str:
        """Changes whenever a memory file or transcript does (cheap: no file is read)."""
        ...


class NotText(ValueError):
    """A memory file that is not UTF-8 text (binary data, or another encoding)."""


# Why a path was skipped, keyed by the path results would have used.
Skipped = dict[str, str]
LINK_OUT = "a link out of the workspace"
FOLDER_LINK_OUT = "a link to a folder out of the workspace"


def decode_text(raw: bytes) -> str:
    """The text of a memory file, or ``NotText`` saying why it is not one."""
    if b"\x00" in raw:
        raise NotText("not a text file: it contains NUL bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"not UTF-8 text: invalid byte at offset {exc.start}") from None


def stored_text(read: Callable[[], str | None]) -> str | None:
    """The text a store's exact read gives (``WorkspaceFiles.read(path, exact=True)``), None
    for no file, or ``NotText`` saying why it is no memory file, as ``decode_text`` says it."""
    try:
        text = read()
    except UnicodeDecodeError as exc:  # its bytes say why first (NUL bytes, then UTF-8)
        return decode_text(bytes(exc.object))
    if text is not None and "\x00" in text:
        raise NotText("not a text file: it contains NUL bytes")
    return text


def is_under(root: Path, path: Path) -> bool:
    """Whether ``path`` is ``root`` or lies below it (both already resolved)."""
    return path == root or root in path.parents


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


def extra_roots(workspace: Path, settings: MemorySearch) -> list[Path]:
    """The resolved ``extraPaths`` (files or directories) that exist."""
    roots = []
    for entry in settings.extra_paths:
        path = Path(entry).expanduser()
        if not path.is_absolute():
            path = workspace / path
        path = path.resolve()
        if path.exists():
            roots.append(path)
        else:
            log.debug("memorySearch.extraPaths: %s does not exist", entry)
    return roots


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
        files[key] = SourceFile(key, "memory", real)
    for extra in extra_roots(root, settings):
        paths = [extra] if extra.is_file() else _markdown_under(extra)
        for path in paths:
            real = path.resolve()
            if not real.is_file():
                continue
            key = real.relative_to(root).as_posix() if is_under(root, real) else str(real)
            files.setdefault(key, SourceFile(key, "memory", real))
    return sorted(files.values(), key=lambda f: f.key)


def session_files(sessions_dir: Path | None, settings: MemorySearch) -> list[SourceFile]:
    if not (settings.experimental.session_memory and "sessions" in settings.sources):
        return []
    if sessions_dir is None or not sessions_dir.is_dir():
        return []
    return [SourceFile(f"sessions/{path.name}", "sessions", path)
            for path in sorted(sessions_dir.glob("*.jsonl"))]


def all_sources(workspace: Path, settings: MemorySearch, sessions_dir: Path | None,
                skipped: Skipped | None = None,
                stored: StoredSources | None = None) -> list[SourceFile]:
    if stored is not None:
        return stored.sources(settings)
    found = memory_files(workspace, settings, skipped) if "memory" in settings.sources else []
    return found + session_files(sessions_dir, settings)


def transcript_text(raw: str) -> str:
    """One line per transcript line: ``User: ...`` / ``Assistant: ...`` or blank."""
    lines = []
    for line in raw.split("\n"):
        text = ""
        try:
            entry = json.loads(line) if line.strip() else None
        except ValueError:
            entry = None
        if isinstance(entry, dict) and entry.get("type") == "message" \
                and entry.get("role") in ("user", "assistant") and not entry.get("flush"):
            content = entry.get("content")
            if isinstance(content, str):
                body = content
            elif isinstance(content, list):
                body = " ".join(b.get("text", "") for b in content
                                if isinstance(b, dict) and b.get("type") == "text")
            else:
                body = ""
            body = " ".join(body.split())
            if body:
                text = f"{'User' if entry['role'] == 'user' else 'Assistant'}: {body}"
        lines.append(text)
    return "\n".join(lines)


def read_source(source: SourceFile) -> str:
    """The text to index; ``NotText`` for a memory file that is not UTF-8 text (transcripts,
    written by clawd, are read leniently)."""
    raw = source.read()
    if source.source == "sessions":
        return transcript_text(raw.decode("utf-8", errors="replace"))
    return decode_text(raw)
