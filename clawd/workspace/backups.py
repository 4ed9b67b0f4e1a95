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
``storage.files.backups.DiskBackups`` is this record as the embedded
``workspace.interface.Backups``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from clawd.core.errors import ClawdError
from clawd.workspace.files import BOOTSTRAP_FILES, MEMORY_DIR, MEMORY_FILE
from clawd.workspace.interface import Backups, Version

PROTECTED = (*BOOTSTRAP_FILES, MEMORY_FILE)
STATE_DIR = ".clawd"
HISTORY_DIR = f"{STATE_DIR}/history"
KEEP = 50
STAMP = "%Y%m%d-%H%M%S"  # a version's second; a number follows within one second


def is_protected(rel_path: str) -> bool:
    return rel_path in PROTECTED


def is_clawd_state(rel_path: str) -> bool:
    """Whether a workspace-relative path lies in clawd's own records (``.clawd/``)."""
    return rel_path == STATE_DIR or rel_path.startswith(f"{STATE_DIR}/")


def ignore_records(root: Path) -> None:
    """``<root>/.clawd/.gitignore``, if it is not there: a workspace under git does not list
    clawd's records."""
    ignore = root / STATE_DIR / ".gitignore"
    if not ignore.exists():
        ignore.parent.mkdir(parents=True, exist_ok=True)
        ignore.write_text("# clawd's own records (clawd history); not part of the notes\n*\n")


def loses_content(old: str, new: str) -> bool:
    """Whether replacing ``old`` by ``new`` drops anything (an append does not)."""
    return bool(old) and not new.startswith(old)


def next_stamp(now: datetime, taken: list[str]) -> str:
    """The stamp of a version kept at ``now``, given the stamps of that second already
    taken: ``YYYYMMDD-HHMMSS``, then ``-2``, ``-3``… after any (even pruned ones)."""
    base = now.strftime(STAMP)
    numbers = [stamp_order(stamp)[1] for stamp in taken]
    return f"{base}-{max(numbers) + 1}" if numbers else base


def find_version(backups: Backups, ref: str) -> Version:
    """The version ``FILE@STAMP`` names in ``backups`` (``FILE`` alone: its newest)."""
    name, _, stamp = ref.partition("@")
    kept = backups.versions(name)
    if not kept:
        raise ClawdError(f"no earlier versions of {kept_name(name)} are kept "
                         f"(in {backups.location})")
    if not stamp:
        return kept[-1]
    match = next((v for v in kept if v.stamp == stamp), None)
    if match is None:
        raise ClawdError(f"no version {ref}; `clawd history list {kept[0].name}` lists them")
    return match


def kept_name(name: str) -> str:
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


def stamp_order(stamp: str) -> tuple[str, int]:
    number = stamp[16:]
    return stamp[:15], int(number) if number.isdigit() else 1
