"""The kept versions of the embedded workspace (``workspace.backups``): copies under
``<workspace>/.clawd/history/<FILE>/<STAMP>.md``, the newest ``KEEP`` of each file."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path

from clawd.workspace import backups
from clawd.workspace.backups import (
    HISTORY_DIR,
    PROTECTED,
    STAMP,
    find_version,
    ignore_records,
    kept_name,
    next_stamp,
    stamp_order,
)
from clawd.workspace.files import MEMORY_DIR
from clawd.workspace.interface import Version


class DiskBackups:
    """``Backups`` as copies under ``<root>/.clawd/history``."""

    def __init__(self, root: Path):
        self.root = root
        self.location = str(root / HISTORY_DIR)

    def keep(self, path: str, now: datetime) -> Version:
        directory = self.root / HISTORY_DIR / path
        directory.mkdir(parents=True, exist_ok=True)
        ignore_records(self.root)
        stamp = next_stamp(now, [p.stem for p in directory.glob(f"{now.strftime(STAMP)}*.md")])
        target = directory / f"{stamp}.md"
        shutil.copy2(self.root / path, target)
        for old in self.versions(path)[:-backups.KEEP]:  # read when used: it may be lowered
            self._file(old).unlink(missing_ok=True)
        return Version(path, stamp, target.stat().st_size)

    def versions(self, name: str | None = None) -> list[Version]:
        names = [kept_name(name)] if name else [*PROTECTED, *self._kept_notes()]
        found = []
        for each in names:
            directory = self.root / HISTORY_DIR / each
            if directory.is_dir():
                found += [Version(each, p.stem, p.stat().st_size)
                          for p in directory.glob("*.md")]
        return sorted(found, key=lambda v: (v.name, stamp_order(v.stamp)))

    def find(self, ref: str) -> Version:
        return find_version(self, ref)

    def text(self, version: Version) -> str:
        return self._file(version).read_text(encoding="utf-8", errors="replace")

    def where(self, version: Version) -> str:
        return f"{HISTORY_DIR}/{version.name}/{version.stamp}.md"

    def restore(self, version: Version, now: datetime) -> Version | None:
        current = self.root / version.name
        saved = self.keep(version.name, now) if current.exists() else None
        current.parent.mkdir(parents=True, exist_ok=True)
        tmp = current.with_name(f".{current.name}.{os.getpid()}.tmp")
        shutil.copy2(self._file(version), tmp)
        os.replace(tmp, current)
        return saved

    def _file(self, version: Version) -> Path:
        return self.root / self.where(version)

    def _kept_notes(self) -> list[str]:
        """The notes under ``memory/`` with kept versions (each a folder of them)."""
        base = self.root / HISTORY_DIR
        found = base / MEMORY_DIR
        return sorted(d.relative_to(base).as_posix() for d in found.rglob("*.md")
                      if d.is_dir()) if found.is_dir() else []
