"""The narrow interface through which the loop and the front ends use the agent's files.

``WorkspaceFiles`` reads and writes the workspace by relative path (forward slashes): the
bootstrap files and daily logs a request carries, the notes the runtime appends (a flush's
notes, the words you asked it to keep, ``/memory add``) and the session-memory file of
``/new``. Every path is checked to stay inside the workspace. The embedded implementation is
``workspace.disk.DiskFiles`` (Markdown files in a folder); a hosted, many-user clawd keeps
the same files elsewhere (rows of a database) as a second implementation.
``tests/test_storage_contracts.py`` is the suite any implementation must pass.
"""

from __future__ import annotations

from typing import Protocol


class WorkspaceFiles(Protocol):
    """One agent's workspace files."""

    location: str  # where they are, as the system prompt and messages name it

    def read(self, path: str) -> str | None:
        """The file's text (undecodable bytes replaced), or None when there is no such
        file; a path outside the workspace is a ``SandboxError``."""
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

    def listing(self, folder: str) -> list[str]:
        """The files directly in ``folder``, as workspace-relative paths, sorted."""
        ...
