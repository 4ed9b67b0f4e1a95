"""The agent workspace on disk: bootstrap files, daily logs, and safe path resolution.

Every path a tool touches goes through ``resolve`` so nothing outside the workspace (by
``..``, an absolute path or a symlink pointing out) is ever read or written. The bootstrap
files and daily logs that the context builder injects are read here, each capped at
``bootstrapMaxChars`` with a visible marker; ``fit_files`` then fits them all into the
share of the window they may take (daily logs give up their oldest lines first).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path

from clawd.core import listmark
from clawd.core.errors import SandboxError
from clawd.core.templates import render
from clawd.core.textcut import empty_sections_out, keep_ends
from clawd.core.tokens import at_most
from clawd.workspace.interface import WorkspaceFiles
from clawd.workspace.template import template_lines, template_text

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md")
MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
# the section of MEMORY.md that keeps the bullets consolidation replaced, with what replaced
# them: a record for you, not a memory (never indexed, never shown to be replaced again)
REPLACED_SECTION = "Replaced"
DAILY_LOG_RE = re.compile(r"^memory/\d{4}-\d{2}-\d{2}\.md$")


def resolve(root: Path, path: str) -> Path:
    """The real path of ``path`` (relative to ``root``), refusing anything outside ``root``."""
    if not isinstance(path, str) or not path.strip():
        raise SandboxError("a path is required")
    if "\x00" in path:
        raise SandboxError(f"invalid path: {path!r}")
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        raise SandboxError(f"absolute paths are not allowed: {path} (use a path relative to "
                           f"the workspace)")
    real_root = root.resolve()
    real = (real_root / candidate).resolve()
    if real != real_root and real_root not in real.parents:
        raise SandboxError(f"path escapes the workspace: {path}")
    return real


def relative(root: Path, path: Path) -> str:
    """``path`` relative to the workspace root, with forward slashes."""
    return path.resolve().relative_to(root.resolve()).as_posix()


def is_daily_log(rel_path: str) -> bool:
    return bool(DAILY_LOG_RE.match(rel_path))


def daily_log_path(day: date) -> str:
    return f"{MEMORY_DIR}/{day.isoformat()}.md"


def append_to_day(files: WorkspaceFiles, day: date, block: str, *,
                  section: bool = False) -> str:
    """Append ``block`` (whole lines) to the day's log, made under its date heading when
    it is new; a ``section`` (a block under a heading of its own) is set apart by a blank
    line. The log's workspace-relative path. The one way notes are added to a daily log:
    ``/memory add``, ``memory_add`` and the flush's notes."""
    rel = daily_log_path(day)
    existing = files.read(rel) or ""
    if not existing.strip():
        head = f"# {day.isoformat()}\n\n"
    else:
        head = ("" if existing.endswith("\n") else "\n") + ("\n" if section else "")
    files.append(rel, head + block)
    return rel


def runtime_heading(title: str, now: datetime, source: str) -> str:
    """The heading of a section the runtime writes to a daily log, saying when and from
    whose words ("## Flush notes (20:01, the user's own words: the model saved no notes)")."""
    return f"## {title} ({now.strftime('%H:%M')}, {source})"


# ``runtime_heading``'s form: what a model appends after such a section is not of it
_RUNTIME_SECTION = re.compile(r"^## [^\n]* \(\d{1,2}:\d{2}, [^\n]*\)\s*$")
MODEL_SECTION = "## Notes"


def ends_in_runtime_section(text: str) -> bool:
    """Whether the last section of a daily log is one the runtime wrote under a heading
    saying where its lines come from."""
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    return bool(headings) and _RUNTIME_SECTION.match(headings[-1]) is not None


def is_writable(root: Path, access: str = "rw") -> bool:
    """Whether the memory files can be written: config allows it and the directory does."""
    if access != "rw":
        return False
    memory = root / MEMORY_DIR
    if memory.exists() and not memory.is_dir():  # a file where the folder should be
        return False
    target = memory if memory.is_dir() else root
    return target.is_dir() and os.access(target, os.W_OK)


def is_private_memory(rel_path: str) -> bool:
    """MEMORY.md and everything under memory/: the notes only private sessions see."""
    return rel_path in (MEMORY_FILE, MEMORY_DIR) or rel_path.startswith(f"{MEMORY_DIR}/")


def is_shareable(rel_path: str, shareable: list[str]) -> bool:
    """Whether a workspace-relative path lies in one of ``memorySearch.shareablePaths``
    (each a file, or a folder and everything below it)."""
    return any(rel_path == entry or rel_path.startswith(f"{entry}/") for entry in shareable)


def truncate(text: str, max_chars: int, name: str) -> tuple[str, bool]:
    """Cap ``text``: keep the first 70% and last 20% of ``max_chars`` with a marker between."""
    if len(text) <= max_chars:
        return text, False
    return keep_ends(text, int(max_chars * 0.7), int(max_chars * 0.2),
                     lambda omitted: f"\n\n[... {name} truncated: {omitted} of {len(text)} "
                                     f"characters omitted; read the file for the rest ...]\n\n"
                     ), True


@dataclass(slots=True)
class ContextFile:
    """One file injected into the project context."""

    name: str
    raw_chars: int
    text: str
    truncated: bool


def memory_files(today: date) -> list[str]:
    """The notes a private session's context holds: MEMORY.md, yesterday's and today's log."""
    return [MEMORY_FILE, daily_log_path(today - timedelta(days=1)), daily_log_path(today)]


# the bootstrap files a small window gets in a short form while they are as ``clawd init``
# laid them down (``prompts/short_<NAME>.j2``), and those it gets not at all then: a
# template's blanks ("- Pronouns:") say nothing of the user, and a 1.5B model filled them
# with guesses
SHORT_FORMS = ("AGENTS.md", "SOUL.md", "TOOLS.md")
BLANK_TEMPLATES = ("USER.md", "IDENTITY.md")


def _as_laid_down(name: str, text: str) -> bool:
    return text.strip() == (template_text(name) or "").strip()


def read_context_files(files: WorkspaceFiles, *, include_memory: bool, today: date,
                       max_chars: int, compact: bool = False,
                       mark: Callable[[str, str, str], str] | None = None) -> list[ContextFile]:
    """The bootstrap files, then (in a private session only) MEMORY.md and yesterday's and
    today's daily logs. MEMORY.md's ``## Replaced`` record is left out (one line says so):
    older values, given as current by a small model, in tokens that grow with every run.
    ``mark`` (a daily log's path, its text and MEMORY.md's: the log as handed out) strikes
    through the log's lines that MEMORY.md's record lists as replaced.
    ``compact`` (a small window): a bootstrap file still as ``clawd init`` laid it down is
    sent in its short form (``SHORT_FORMS``), or not at all when it is only blanks to fill
    (``BLANK_TEMPLATES``); a file you changed is sent as it is."""
    names = list(BOOTSTRAP_FILES)
    if include_memory:
        names += memory_files(today)
    found = []
    texts = files.read_many(names)  # a bootstrap file that is a link out is left out
    for name in names:
        raw = texts.get(name)
        if raw is None or not raw.strip():
            continue
        if compact and _as_laid_down(name, raw):
            if name in BLANK_TEMPLATES:
                continue
            if name in SHORT_FORMS:
                raw = render(f"short_{name}.j2").strip() + "\n"
        if name == MEMORY_FILE:
            if not placeholders_left_out(without_replaced(raw)):
                continue  # the template as laid down (a record of replaced lines aside)
            raw = placeholders_left_out(replaced_left_out(raw))
        elif mark is not None and name.startswith(f"{MEMORY_DIR}/"):
            raw = mark(name, raw, texts.get(MEMORY_FILE) or "")
        text, cut = truncate(raw, max_chars, name)
        found.append(ContextFile(name, len(raw), text, cut))
    return found


def _newest_lines(text: str, name: str, budget: int, count: Callable[[str], int]) -> str:
    """The newest lines of a daily log within ``budget`` tokens, after a marker saying how
    to read the rest."""
    lines = text.splitlines(keepends=True)
    kept = 0
    used = 0
    while kept < len(lines) and used + count(lines[-1 - kept]) <= budget - 60:
        used += count(lines[-1 - kept])
        kept += 1
    older = len(lines) - kept
    if older == 0:
        return text
    marker = (f"[... the {older} older lines of {name} are not shown here; read them with "
              f"read path={name} offset=1 limit={older} ...]\n")
    return marker + "".join(lines[older:])


def fit_files(files: list[ContextFile], budget: int,
              count: Callable[[str], int]) -> list[ContextFile]:
    """The files within ``budget`` tokens together (``count`` measures a text).

    The daily logs shrink first (yesterday's, then today's), keeping their newest lines;
    then the other files shrink in proportion, each keeping its head and tail around a
    marker. A file is never dropped without a marker naming it.
    """
    if sum(at_most(f.text) for f in files) <= budget:
        return files  # fits whatever the count: no tokenizer needed (start-up stays fast)
    sizes = [count(f.text) for f in files]
    over = sum(sizes) - budget
    if over <= 0:
        return files
    out = list(files)
    logs = sorted((i for i, f in enumerate(files) if is_daily_log(f.name)),
                  key=lambda i: files[i].name)
    for i in logs:  # oldest day first
        if over <= 0:
            break
        target = max(0, sizes[i] - over)
        text = _newest_lines(files[i].text, files[i].name, target, count)
        over -= sizes[i] - count(text)
        sizes[i] = count(text)
        out[i] = replace(files[i], text=text, truncated=True)
    if over > 0:
        others = [i for i in range(len(files)) if i not in logs]
        total = sum(sizes[i] for i in others) or 1
        for i in others:
            share = max(0.0, 1 - over / total)
            chars = int(len(out[i].text) * share)
            text, cut = truncate(out[i].text, max(chars, 200), files[i].name)
            out[i] = replace(out[i], text=text, truncated=out[i].truncated or cut)
    return out


@dataclass(frozen=True, slots=True)
class ReplacedLine:
    """One entry of MEMORY.md's ``## Replaced`` record: the old fact, the note line it came
    from (``path``, ``start``..``end``), the day it was replaced and what replaced it."""

    old: str
    path: str
    start: int
    end: int
    day: str
    new: str


_REPLACED_ENTRY = re.compile(
    rf"^\s*[-*+]\s+(?P<old>.*?)\s*\((?P<path>{MEMORY_DIR}/[^()#]+|"
    rf"{re.escape(MEMORY_FILE)})#L(?P<start>\d+)"
    r"(?:-L?(?P<end>\d+))?\)\s*—\s*replaced on (?P<day>\d{4}-\d{2}-\d{2}) by:\s*(?P<new>.+?)\s*$")


def replaced_entry(old: str, day: date, new: str) -> str:
    """The ``## Replaced`` line for the bullet ``old`` (its text with its provenance)."""
    return f"- {old} — replaced on {day.isoformat()} by: {new}"


def _sectioned(text: str) -> list[tuple[str, bool]]:
    """Each line of MEMORY.md and whether it is in ``## Replaced`` (its heading included)."""
    out, inside = [], False
    for line in text.split("\n"):
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if level <= 2:
                inside = level == 2 and line.lstrip("#").strip() == REPLACED_SECTION
        out.append((line, inside))
    return out


def replaced_lines(memory: str) -> list[ReplacedLine]:
    """The entries of MEMORY.md's ``## Replaced`` record that name the note line they came
    from (a bullet written by hand has none)."""
    found = []
    for line, inside in _sectioned(memory):
        entry = _REPLACED_ENTRY.match(line) if inside else None
        if entry:
            start = int(entry["start"])
            found.append(ReplacedLine(entry["old"], entry["path"], start,
                                      int(entry["end"] or start), entry["day"], entry["new"]))
    return found


def placeholders_left_out(text: str) -> str:
    """MEMORY.md without its template's placeholder bullets (``- (people — who they
    are)``) and the headings left with nothing under them; empty when nothing of the
    user's own is left (in an 8k window the untouched template took 809 characters while
    today's log was cut)."""
    kept = empty_sections_out(
        [line for line in text.splitlines() if not listmark.PLACEHOLDER.match(line)],
        droppable=lambda heading: heading.startswith("##"))  # the title stays
    template = template_lines()
    own = any(line.strip() and not line.startswith("#") and line.strip() not in template
              for line in kept)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n" if own else ""


def replaced_left_out(text: str) -> str:
    """MEMORY.md as the context shows it: its ``## Replaced`` entries left out, one line
    saying how many there are and where."""
    lines = _sectioned(text)
    gone = sum(inside and line.lstrip().startswith(("-", "*", "+")) for line, inside in lines)
    if not gone:
        return text
    out: list[str] = []
    for line, inside in lines:
        if not inside:
            out.append(line)
        elif line.startswith("#"):
            out += [line, f"[{gone} older values replaced (by consolidation or a "
                          f"correction), with what replaced them: not shown here; read "
                          f"{MEMORY_FILE} to see them]", ""]
    return "\n".join(out)


def without_replaced(text: str) -> str:
    """MEMORY.md's text with the lines of its ``## Replaced`` section blanked (the line
    numbers of the rest unchanged)."""
    return "\n".join("" if inside else line for line, inside in _sectioned(text))
