"""Forgetting a fact: finding the note lines that hold it, and taking them out of the notes.

``clawd memory forget TEXT`` and ``/memory forget TEXT`` name what to forget in one of two
ways (``parse``):

- **Text**: every line of ``MEMORY.md`` and ``memory/**/*.md`` holding ``TEXT`` (case does
  not matter) goes; at least ``MIN_CHARS`` characters, so a stray letter cannot empty a
  note.
- **Lines**: ``PATH#Lx-Ly`` (or ``PATH#Lx``), the form search results cite, names lines of
  one note; blank lines in the range stay.

Only the notes are touched: never a file outside the workspace (a link leading out of it is
passed over) nor an ``extraPaths`` folder or a transcript. ``find`` lists the lines
(``NoteLine``: path, number, text) for the front end to show and confirm; ``remove`` checks that
each is still there as shown (else nothing is written), keeps each file's current version in
the backups (``.clawd/history``, which the index never reads) and writes the file without
them, both through the workspace's interfaces (``WorkspaceFiles``, ``Backups``). ``forget``
does both through the index's ``Memory.forget``, which purges what the index kept of those
lines (``purge.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clawd.core.errors import ClawdError, SandboxError
from clawd.memory.interface import Memory
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE, is_private_memory
from clawd.workspace.interface import Backups, Version, WorkspaceFiles, notes

MIN_CHARS = 3
LINES_RE = re.compile(r"^(?P<path>.+?\.md)#L(?P<start>\d+)(?:-L?(?P<end>\d+))?$",
                      re.IGNORECASE)


@dataclass(frozen=True)
class Request:
    """What to forget: ``text`` (a substring) or lines ``start..end`` of ``path``."""

    text: str = ""
    path: str = ""
    start: int = 0
    end: int = 0

    def describe(self) -> str:
        if self.path:
            return f"{self.path}#L{self.start}" + (f"-L{self.end}" if self.end != self.start
                                                    else "")
        return f"“{self.text}”"


@dataclass(frozen=True)
class NoteLine:
    path: str  # workspace-relative, e.g. memory/2026-11-20.md
    number: int  # 1-based
    text: str  # the line as it is, without its line ending


@dataclass
class Forgotten:
    """What ``forget`` did: the lines taken out, the versions kept, the index's summary."""

    lines: list[NoteLine]
    kept: list[Version]
    index: dict[str, Any] | None  # ``Memory.forget``'s summary (None: no memory index)


def parse(argument: str) -> Request:
    """``PATH#Lx-Ly`` or a text; one clear line (``ClawdError``) for what is neither."""
    text = " ".join(argument.split()) if isinstance(argument, str) else ""
    found = LINES_RE.match(text)
    if found:
        start = int(found["start"])
        end = int(found["end"] or start)
        if start < 1 or end < start:
            raise ClawdError(f"{text}: lines run from L1 on, the first before the last "
                             f"(e.g. {found['path']}#L3-L4)")
        return Request(path=found["path"], start=start, end=end)
    if len(text) < MIN_CHARS:
        raise ClawdError(f"nothing to forget by {text!r}: give at least {MIN_CHARS} characters "
                         f"of the text, or the lines as PATH#Lx-Ly")
    return Request(text=text)


def _read(files: WorkspaceFiles, rel: str) -> list[str] | None:
    """The file's lines with their endings; None for a file that is not UTF-8 text."""
    try:
        text = files.read(rel, exact=True)
    except UnicodeDecodeError:
        return None
    return None if text is None or "\x00" in text else text.splitlines(keepends=True)


def _strip(line: str) -> str:
    return line.rstrip("\r\n")


def find(files: WorkspaceFiles, request: Request) -> list[NoteLine]:
    """The lines ``request`` names, in file and line order (among the ``notes``: MEMORY.md
    and ``memory/**/*.md``; no extraPaths, no links out of the workspace)."""
    if request.path:
        rel = _note_path(files, request.path)
        lines = _read(files, rel)
        if lines is None:
            raise ClawdError(f"{rel} is not UTF-8 text; nothing was forgotten")
        if request.start > len(lines):
            raise ClawdError(f"{rel} has {len(lines)} lines, none at L{request.start}")
        return [NoteLine(rel, number, _strip(lines[number - 1]))
                for number in range(request.start, min(request.end, len(lines)) + 1)
                if lines[number - 1].strip()]
    needle = request.text.casefold()
    found: list[NoteLine] = []
    for rel in notes(files):
        lines = _read(files, rel) or []
        found += [NoteLine(rel, number, _strip(line)) for number, line in enumerate(lines, 1)
                  if needle in line.casefold()]
    return found


def _note_path(files: WorkspaceFiles, path: str) -> str:
    """``path`` as a note forget may change (workspace-relative), or one clear line."""
    try:
        rel = files.canonical(path)
    except SandboxError:
        raise ClawdError(f"{path} is outside the workspace; forget changes only the notes "
                         f"({MEMORY_FILE} and {MEMORY_DIR}/)") from None
    if not is_private_memory(rel) or not rel.endswith(".md"):
        raise ClawdError(f"{path} is not a note; forget changes only {MEMORY_FILE} and the "
                         f"Markdown files under {MEMORY_DIR}/")
    stat = files.stat(rel)
    if stat is None or stat.kind != "file":
        raise ClawdError(f"no such note: {rel}")
    return rel


def remove(files: WorkspaceFiles, backups: Backups, lines: Sequence[NoteLine],
           now: datetime) -> list[Version]:
    """Take ``lines`` out of their files, each file's current version kept first; the
    versions kept. Every line is checked first: if one is no longer as it was shown,
    nothing is written (``ClawdError``)."""
    by_file: dict[str, list[NoteLine]] = {}
    for line in lines:
        by_file.setdefault(line.path, []).append(line)
    new: dict[str, str] = {}
    for rel, gone in by_file.items():
        current = _read(files, rel) or []
        numbers = {line.number for line in gone}
        for line in gone:
            if line.number > len(current) or _strip(current[line.number - 1]) != line.text:
                raise ClawdError(f"{rel} changed since its lines were listed (L{line.number}); "
                                 f"nothing was forgotten: run it again")
        new[rel] = "".join(text for number, text in enumerate(current, 1)
                           if number not in numbers)
    kept = []
    for rel, text in new.items():
        kept.append(backups.keep(rel, now))
        files.write(rel, text)
    return kept


def forget(files: WorkspaceFiles, backups: Backups, memory: Memory | None,
           lines: Sequence[NoteLine], now: datetime) -> Forgotten:
    """Remove ``lines`` from the notes (``remove``) and, with an index, purge what it kept of
    them (``Memory.forget``: the sync after the edit, keyword rows, vectors, cache)."""
    kept: list[Version] = []

    def edit() -> None:
        kept.extend(remove(files, backups, lines, now))

    if memory is None:
        edit()
        return Forgotten(list(lines), kept, None)
    places: dict[str, set[int]] = {}
    for line in lines:
        places.setdefault(line.path, set()).add(line.number)
    summary = memory.forget(places, edit)
    return Forgotten(list(lines), kept, summary)


def still_found(memory: Memory | None, request: Request) -> list[str]:
    """Where a keyword search still finds a forgotten text (an ``extraPaths`` file, a
    transcript: places forget does not change), as citations."""
    if memory is None or not request.text:
        return []
    needle = request.text.casefold()
    found = memory.search(request.text, max_results=20, min_score=0.0, mode="text")
    return [hit["citation"] for hit in found["results"] if needle in hit["snippet"].casefold()]
