"""What the memory index reads: the memory files, ``extraPaths`` and (opt-in) transcripts,
always through the agent's store (``MemorySources``), never a folder of its own.

The store lists them as ``SourceFile``s (a key, a size and time, a way to read it) and says
when any changed: the embedded files by a watch on their folders
(``storage.files.memory.DiskSources``), a database by a ``fingerprint`` polled before a
search (``storage.postgres.memory_sources``). ``MEMORY.md`` and ``memory/**/*.md`` are keyed
by their workspace-relative path; ``extraPaths`` entries (files or directories of ``.md``
files, relative to the workspace or absolute: ``extra_roots``) are the user's explicit
choice and may lie outside it, keyed by their absolute path. A link leading out of the
workspace is skipped, and reported in the ``skipped`` mapping the caller passes so that the
index can warn once, not on every sync.
Session transcripts are indexed only with ``experimental.sessionMemory`` on and
``"sessions"`` in ``sources``: read as the store's parsed entries (``TranscriptLog.load``),
each transcript line becomes one text line (user and assistant text, everything else blank)
so a result's line range is the transcript's own line range.

A memory file must be UTF-8 text: ``read_source`` (and ``decode_text`` and ``stored_text``
for ``memory_get``) raises ``NotText`` for one holding NUL bytes or invalid UTF-8, which
the index skips instead of filling itself with binary junk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from clawd.config import MemorySearch
from clawd.sessions.interface import Loaded

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
    stamp: Stamp | Callable[[], Any]  # its size and time, or how to ask (OSError: gone)
    reader: Callable[[], bytes] | None = None  # a memory file's bytes
    log: Callable[[], Loaded] | None = None  # a transcript's entries, as its store parsed them

    def stat(self) -> Any:
        """Its size and time (``st_size``, ``st_mtime``, ``st_mtime_ns``)."""
        return self.stamp() if callable(self.stamp) else self.stamp

    def read(self) -> bytes:
        assert self.reader is not None, "a transcript is read as entries (log)"
        return self.reader()


# Why a path was skipped, keyed by the path results would have used.
Skipped = dict[str, str]
LINK_OUT = "a link out of the workspace"
FOLDER_LINK_OUT = "a link to a folder out of the workspace"


class Watching(Protocol):
    """A watch on the memory files, calling back after each burst of changes."""

    def stop(self) -> None: ...


class MemorySources(Protocol):
    """The memory files and transcripts of one agent, as its store keeps them: the index
    reads them only through this."""

    def sources(self, settings: MemorySearch, skipped: Skipped | None = None
                ) -> list[SourceFile]:
        """The memory files (and, with session memory on, the transcripts) to index; a file
        left out for a reason (a link out of the workspace) goes to ``skipped``."""
        ...

    def read(self, key: str) -> bytes | None:
        """The bytes of the memory file ``key`` (as ``sources`` keys it), or None."""
        ...

    def fingerprint(self) -> str:
        """Changes whenever a memory file or transcript does (cheap: no file is read); a
        store that is watched (``watch``) may keep it constant."""
        ...

    def watch(self, settings: MemorySearch, on_change: Callable[[], None]
              ) -> Watching | None:
        """Call ``on_change`` shortly after the files change (``sync.watch``), started; None
        when the store is not watched (the index polls ``fingerprint`` instead)."""
        ...


class NotText(ValueError):
    """A memory file that is not UTF-8 text (binary data, or another encoding)."""


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


def transcript_text(loaded: Loaded) -> str:
    """One line per transcript line (``loaded.lines`` of them): ``User: ...`` /
    ``Assistant: ...``, or blank for every other entry and for lines that are none."""
    lines = [""] * loaded.lines
    for number, entry in zip(loaded.numbers, loaded.entries):
        if entry.get("type") == "message" and entry.get("role") in ("user", "assistant") \
                and not entry.get("flush"):
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
                lines[number - 1] = \
                    f"{'User' if entry['role'] == 'user' else 'Assistant'}: {body}"
    return "\n".join(lines)


def read_source(source: SourceFile) -> str:
    """The text to index; ``NotText`` for a memory file that is not UTF-8 text (transcripts,
    written by clawd, are read leniently)."""
    if source.log is not None:
        return transcript_text(source.log())
    return decode_text(source.read())
