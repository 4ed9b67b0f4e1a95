"""Earlier versions of the files that make the assistant who it is, kept before a tool
changes them, so a bad ``write`` or ``edit`` can be undone.

Before ``write`` or ``edit`` overwrites or shrinks a bootstrap file (AGENTS.md, SOUL.md,
USER.md, TOOLS.md, IDENTITY.md) or MEMORY.md, its current bytes are copied to
``<workspace>/.clawd/history/<FILE>/<YYYYMMDD-HHMMSS>.md`` (``-2``, ``-3``… within one
second). An append (the old content stays as it was, at the start) loses nothing and keeps
no copy. The newest ``KEEP`` versions of each file are kept. A version is named
``FILE@STAMP`` (``SOUL.md@20261123-024512``); ``FILE`` alone means its newest version.
``restore`` keeps the current content as a version first, so a restore can be undone too.
``clawd memory forget`` keeps every note it changes the same way, daily logs included
(``memory/2026-11-20.md@STAMP``), so those can be listed and restored too.
The tools refuse to write under ``.clawd/``, so the model cannot rewrite this record;
``.clawd/.gitignore`` keeps it out of git when the workspace is a repository.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from clawd.core.errors import ClawdError
from clawd.workspace.files import BOOTSTRAP_FILES, MEMORY_DIR, MEMORY_FILE

PROTECTED = (*BOOTSTRAP_FILES, MEMORY_FILE)
STATE_DIR = ".clawd"
HISTORY_DIR = f"{STATE_DIR}/history"
KEEP = 50


@dataclass(frozen=True)
class Version:
    name: str  # the protected file, e.g. SOUL.md
    stamp: str  # YYYYMMDD-HHMMSS[-n]
    path: Path

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.stamp}"

    @property
    def when(self) -> str:
        day, clock = self.stamp[:8], self.stamp[9:15]
        return (f"{day[:4]}-{day[4:6]}-{day[6:]} {clock[:2]}:{clock[2:4]}:{clock[4:]}"
                + (f" (#{self.stamp[16:]})" if len(self.stamp) > 15 else ""))


def is_protected(rel_path: str) -> bool:
    return rel_path in PROTECTED


def is_clawd_state(rel_path: str) -> bool:
    """Whether a workspace-relative path lies in clawd's own records (``.clawd/``)."""
    return rel_path == STATE_DIR or rel_path.startswith(f"{STATE_DIR}/")


def loses_content(old: str, new: str) -> bool:
    """Whether replacing ``old`` by ``new`` drops anything (an append does not)."""
    return bool(old) and not new.startswith(old)


def keep(root: Path, rel_path: str, now: datetime) -> Version:
    """Copy the current ``rel_path`` into the history; the new version."""
    directory = root / HISTORY_DIR / rel_path
    directory.mkdir(parents=True, exist_ok=True)
    ignore = root / STATE_DIR / ".gitignore"
    if not ignore.exists():  # a workspace under git does not list clawd's records
        ignore.write_text("# clawd's own records (clawd history); not part of the notes\n*\n")
    base = now.strftime("%Y%m%d-%H%M%S")
    taken = [_order(p.stem)[1] for p in directory.glob(f"{base}*.md")]
    stamp = f"{base}-{max(taken) + 1}" if taken else base  # after any, even pruned ones
    target = directory / f"{stamp}.md"
    shutil.copy2(root / rel_path, target)
    for old in versions(root, rel_path)[:-KEEP]:
        old.path.unlink(missing_ok=True)
    return Version(rel_path, stamp, target)


def versions(root: Path, name: str | None = None) -> list[Version]:
    """The kept versions (of one file, or of all), oldest first."""
    names = [_canonical(name)] if name else [*PROTECTED, *_kept_notes(root)]
    found = []
    for each in names:
        directory = root / HISTORY_DIR / each
        if directory.is_dir():
            found += [Version(each, p.stem, p) for p in directory.glob("*.md")]
    return sorted(found, key=lambda v: (v.name, _order(v.stamp)))


def find(root: Path, ref: str) -> Version:
    """The version ``FILE@STAMP`` names (``FILE`` alone: its newest)."""
    name, _, stamp = ref.partition("@")
    kept = versions(root, name)
    if not kept:
        raise ClawdError(f"no earlier versions of {_canonical(name)} are kept "
                         f"(in {root / HISTORY_DIR})")
    if not stamp:
        return kept[-1]
    match = next((v for v in kept if v.stamp == stamp), None)
    if match is None:
        raise ClawdError(f"no version {ref}; `clawd history list {kept[0].name}` lists them")
    return match


def restore(root: Path, version: Version, now: datetime) -> Version | None:
    """Put ``version`` back in place; the current content is kept first (returned)."""
    current = root / version.name
    saved = keep(root, version.name, now) if current.exists() else None
    current.parent.mkdir(parents=True, exist_ok=True)
    tmp = current.with_name(f".{current.name}.{os.getpid()}.tmp")
    shutil.copy2(version.path, tmp)
    os.replace(tmp, current)
    return saved


def _canonical(name: str) -> str:
    """The protected file a name means, in any case (``soul.md`` → ``SOUL.md``), or a note
    under ``memory/`` (``memory/2026-11-20.md``, as written)."""
    match = next((p for p in PROTECTED if p.lower() == name.strip().lower()), None)
    if match is None and _is_note(name.strip()):
        return name.strip()
    if match is None:
        raise ClawdError(f"{name} is not a file clawd keeps versions of "
                         f"({', '.join(PROTECTED)}, or a note under {MEMORY_DIR}/)")
    return match


def _is_note(name: str) -> bool:
    """A Markdown file under ``memory/`` named without a way out of it."""
    parts = name.split("/")
    return len(parts) > 1 and parts[0] == MEMORY_DIR and name.endswith(".md") \
        and all(part not in ("", ".", "..") for part in parts)


def _kept_notes(root: Path) -> list[str]:
    """The notes under ``memory/`` with kept versions (each a folder of them)."""
    base = root / HISTORY_DIR
    found = base / MEMORY_DIR
    return sorted(d.relative_to(base).as_posix() for d in found.rglob("*.md")
                  if d.is_dir()) if found.is_dir() else []


def _order(stamp: str) -> tuple[str, int]:
    number = stamp[16:]
    return stamp[:15], int(number) if number.isdigit() else 1
