"""The narrow interfaces through which the loop, the tools and the front ends use the
agent's files: ``WorkspaceFiles`` (the files themselves) and ``Backups`` (earlier versions
of them).

``WorkspaceFiles`` reads and writes the workspace by relative path (forward slashes): the
bootstrap files and daily logs a request carries, the notes the runtime appends (a flush's
notes, the words you asked it to keep, ``/memory add``), the session-memory file of
``/new``, consolidation's MEMORY.md and the model's ``read``, ``write`` and ``edit``. Every
path is checked to stay inside the workspace. ``Backups`` keeps a file's current text before
something replaces it, lists the kept versions and puts one back.

The embedded implementations are ``storage.files.workspace.DiskFiles`` (Markdown files in a
folder) and ``storage.files.backups.DiskBackups`` (copies under ``.clawd/history``); a
hosted, many-user clawd keeps the same files and versions elsewhere (rows of a database) as
a second implementation. ``tests/storage/test_storage_contracts.py`` is the suite any
implementation must pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol


@dataclass(frozen=True)
class Stat:
    """What a path is: a file or a folder, and a file's size in bytes."""

    kind: Literal["file", "folder"]
    size: int


class WorkspaceFiles(Protocol):
    """One agent's workspace files."""

    location: str  # where they are, as the system prompt and messages name it

    def canonical(self, path: str) -> str:
        """The workspace-relative path ``path`` names (``.`` for the workspace itself); a
        path outside the workspace (``..``, absolute, a link out) is a ``SandboxError``."""
        ...

    def stat(self, path: str) -> Stat | None:
        """Whether ``path`` is a file or a folder (and its size), or None when it is
        neither."""
        ...

    def read(self, path: str, *, exact: bool = False) -> str | None:
        """The file's text, or None when there is no such file. Undecodable bytes are
        replaced, or with ``exact`` a ``UnicodeDecodeError`` (an edit must not change bytes
        it never showed); an unreadable file is an ``OSError``."""
        ...

    def read_many(self, paths: list[str]) -> dict[str, str | None]:
        """``read`` of several files at once (one round trip where the files are remote), by
        the path as given; a path outside the workspace is left out."""
        ...

    def append(self, path: str, text: str) -> None:
        """Add ``text`` at the end of the file, creating it (and its folders) if needed."""
        ...

    def create(self, path: str, text: str) -> None:
        """Write a new file; ``FileExistsError`` if there is one (a race never overwrites)."""
        ...

    def write(self, path: str, text: str) -> None:
        """Replace the file's text (atomically: a reader sees the old or the new text)."""
        ...

    def writable(self) -> bool:
        """Whether notes can be written (the folder exists and may be written, say)."""
        ...

    def listing(self, folder: str) -> list[str]:
        """The files directly in ``folder``, as workspace-relative paths, sorted."""
        ...

    def entries(self, folder: str) -> list[str]:
        """What ``folder`` holds, by name, sorted, each folder with a trailing ``/``."""
        ...


def markdown_under(files: WorkspaceFiles, folder: str) -> list[str]:
    """Every ``.md`` file under ``folder``, at any depth, sorted; a link out of the
    workspace is left out (and a link inside it found once, under its own path)."""
    from clawd.core.errors import SandboxError

    found: set[str] = set()
    for name in files.entries(folder):
        try:
            path = files.canonical(f"{folder}/{name.rstrip('/')}")
        except SandboxError:
            continue
        if name.endswith("/"):
            found.update(markdown_under(files, path))
        elif path.endswith(".md") and path.startswith(f"{folder}/"):
            found.add(path)
    return sorted(found)


def notes(files: WorkspaceFiles) -> list[str]:
    """The notes: MEMORY.md and ``memory/**/*.md``."""
    head = ["MEMORY.md"] if (files.stat("MEMORY.md") or Stat("folder", 0)).kind == "file" else []
    return head + markdown_under(files, "memory")


@dataclass(frozen=True)
class Version:
    """One kept version of a file."""

    name: str  # the file, workspace-relative: SOUL.md, memory/2026-11-20.md
    stamp: str  # YYYYMMDD-HHMMSS[-n]
    size: int  # bytes

    @property
    def ref(self) -> str:
        """How the version is named to the user: ``FILE@STAMP``."""
        return f"{self.name}@{self.stamp}"

    @property
    def when(self) -> str:
        day, clock = self.stamp[:8], self.stamp[9:15]
        return (f"{day[:4]}-{day[4:6]}-{day[6:]} {clock[:2]}:{clock[2:4]}:{clock[4:]}"
                + (f" (#{self.stamp[16:]})" if len(self.stamp) > 15 else ""))


class Backups(Protocol):
    """Earlier versions of one agent's files."""

    location: str  # where the versions are kept, as messages name it

    def keep(self, path: str, now: datetime) -> Version:
        """Keep the current text of the file ``path`` as a new version."""
        ...

    def versions(self, name: str | None = None) -> list[Version]:
        """The kept versions (of the file ``name``, or of every file), oldest first."""
        ...

    def find(self, ref: str) -> Version:
        """The version ``FILE@STAMP`` names (``FILE`` alone: its newest); a ``ClawdError``
        that says what there is when there is no such version."""
        ...

    def text(self, version: Version) -> str:
        """What the file held in ``version``."""
        ...

    def where(self, version: Version) -> str:
        """Where ``version`` is kept, as a message names it."""
        ...

    def restore(self, version: Version, now: datetime) -> Version | None:
        """Put ``version`` back; the current text is kept first (that version returned)."""
        ...
