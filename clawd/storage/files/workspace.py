"""The workspace as a folder of files (``DiskFiles``): the embedded ``WorkspaceFiles``.

Every path goes through ``files.resolve``, so ``..``, absolute paths and symlinks that point
out of the workspace are refused. Appends go straight to the end of the file; a whole-file
write goes to a temporary file beside it and is renamed over it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from clawd.core.errors import SandboxError
from clawd.workspace.files import is_writable, relative, resolve
from clawd.workspace.interface import Stat


class DiskFiles:
    """``WorkspaceFiles`` over the folder ``root``."""

    def __init__(self, root: Path):
        self.root = root
        self.location = str(root)

    def canonical(self, path: str) -> str:
        return relative(self.root, resolve(self.root, path))

    def stat(self, path: str) -> Stat | None:
        real = resolve(self.root, path)
        if real.is_dir():
            return Stat("folder", 0)
        return Stat("file", real.stat().st_size) if real.is_file() else None

    def read(self, path: str, *, exact: bool = False) -> str | None:
        try:
            data = resolve(self.root, path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return data.decode("utf-8") if exact else data.decode("utf-8", errors="replace")

    def read_many(self, paths: list[str]) -> dict[str, str | None]:
        found: dict[str, str | None] = {}
        for path in paths:
            with contextlib.suppress(SandboxError):  # a link out of the workspace: left out
                found[path] = self.read(path)
        return found

    def append(self, path: str, text: str) -> None:
        real = self._parent_made(path)
        with real.open("a", encoding="utf-8", newline="") as handle:
            handle.write(text)

    def create(self, path: str, text: str) -> None:
        real = self._parent_made(path)
        with real.open("x", encoding="utf-8", newline="") as handle:
            handle.write(text)

    def write(self, path: str, text: str) -> None:
        real = self._parent_made(path)
        fd, temp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
            if real.exists():
                os.chmod(temp, real.stat().st_mode & 0o777)
            os.replace(temp, real)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def writable(self) -> bool:
        return is_writable(self.root)

    def listing(self, folder: str) -> list[str]:
        real = resolve(self.root, folder)
        if not real.is_dir():
            return []
        return sorted(relative(self.root, p) for p in real.iterdir() if p.is_file())

    def entries(self, folder: str) -> list[str]:
        real = resolve(self.root, folder)
        if not real.is_dir():
            return []
        return sorted(p.name + ("/" if p.is_dir() else "") for p in real.iterdir())

    def _parent_made(self, path: str) -> Path:
        real = resolve(self.root, path)
        real.parent.mkdir(parents=True, exist_ok=True)
        return real
