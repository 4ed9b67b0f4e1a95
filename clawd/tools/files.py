"""The file tools: ``read``, ``write`` and ``edit``, confined to the workspace.

They work through the workspace's interfaces (``ToolContext.files``, ``ToolContext.backups``),
never on a folder themselves. Every path is made canonical first (no ``..``, absolute paths
or symlinks out).
Writes are refused when the workspace is read-only. ``write`` with ``append: true`` adds to
the end of a file (the path a weak model finds without reading the file first). Daily logs
(``memory/YYYY-MM-DD.md``) are append-only: a ``write`` or ``edit`` that would drop any of
their existing content is refused with a message telling the model exactly how to append.
Before a bootstrap file or MEMORY.md loses content, its previous version is kept
(``ToolContext.backups``) and the result says where; ``.clawd/`` itself cannot be written. A
Markdown note a model sent as one line with escaped breaks (``- a\\n- b\\n``) is written
on lines of its own (``unescaped_breaks``), and an append to a memory file leaves out the
lines the file already holds (``new_lines``). ``read`` takes a citation as its path
(``memory/2026-11-20.md#L12-L14``: those lines) and shows a note's lines that consolidation
replaced as ``memory_get`` does. A ``write`` or ``edit`` of a path that does not exist but
for letter case does (``identity.md`` beside ``IDENTITY.md``) is refused with the existing
path: the new file would be one nothing reads.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from clawd.core import listmark
from clawd.core.errors import ToolError
from clawd.memory.chunker import FENCE_RE
from clawd.tools.base import Param, Tool, ToolContext, tool
from clawd.tools.memory import citation_path, marked
from clawd.workspace.backups import STATE_DIR, is_clawd_state, is_protected, loses_content
from clawd.workspace.files import (
    MODEL_SECTION,
    daily_log_path,
    ends_in_runtime_section,
    is_daily_log,
    is_private_memory,
)
from clawd.workspace.interface import WorkspaceFiles

DEFAULT_READ_LINES = 2000


def _writable(ctx: ToolContext) -> None:
    if ctx.settings.workspace_access != "rw":
        raise ToolError("the workspace is read-only in this session")


@tool("read", "Read a text file (or list a directory) in the workspace. Use offset/limit "
      "(1-based lines) for long files.")
def read(ctx: ToolContext, *, path: str, offset: Annotated[int, Param(minimum=1)] = 1,
         limit: Annotated[int, Param(minimum=1)] = DEFAULT_READ_LINES) -> str:
    path, offset, limit = citation_path(path, offset, limit, DEFAULT_READ_LINES)
    rel = ctx.files.canonical(path)
    ctx.access.check_read(rel)
    stat = ctx.files.stat(rel)
    if stat is not None and stat.kind == "folder":
        return "\n".join(ctx.files.entries(rel)) or "(empty directory)"
    text = text_of(ctx.files, rel, path)
    if text is None:
        raise ToolError(f"file not found: {path}")
    lines = text.splitlines(keepends=True)
    if offset > len(lines) > 0:  # "[showing lines 19-18 of 18]" left a small model blank
        return f"[{path} has {len(lines)} lines; there is nothing after line " \
               f"{len(lines)}]"
    chunk = lines[offset - 1:offset - 1 + limit]
    text = marked(ctx, rel, offset, "".join(chunk))
    end = offset - 1 + len(chunk)
    if offset > 1 or end < len(lines):
        text += (f"\n[showing lines {offset}-{end} of {len(lines)}"
                 + (f"; continue with offset={end + 1}]" if end < len(lines) else "]"))
    return text or "(empty file)"


def text_of(files: WorkspaceFiles, rel: str, name: str) -> str | None:
    """A text file's content (undecodable bytes replaced), or None when there is no such
    file; a ``ToolError`` naming ``name`` for a binary file or one that cannot be read."""
    try:
        text = files.read(rel)
    except OSError as exc:
        raise ToolError(f"cannot read {name}: {exc.strerror}") from None
    if text is not None and "\x00" in text[:8192]:
        raise ToolError(f"{name} is a binary file ({len(text.encode())} bytes)")
    return text


def _how_to_add(rel: str) -> str:
    """The hint after a failed edit of a daily log: appending needs no oldText at all."""
    return (f"; to add notes to it, call write with path \"{rel}\", append: true and only the "
            f"new lines as content (the file is created if missing)") if is_daily_log(rel) else ""


def _append_only(rel: str) -> ToolError:
    # said as the call's own rule: a 1.5B model told the user "You need to append the new
    # information", as if the person had made the refused call
    return ToolError(f"{rel} is a daily log and is append-only (a rule for this call, "
                     f"nothing the user did): to add to it, call write with path \"{rel}\", "
                     f"append: true and only the new lines as content")


# a path copied from an example rather than named: "<path>", "{file}", "memory/YYYY-MM-DD.md",
# "path/to/notes.md"
_PLACEHOLDER = re.compile(r"[<>{}]|YYYY|\bMM-DD\b|(?:^|/)path/to/", re.IGNORECASE)


def _target(given: str, ctx: ToolContext) -> str:
    """The file a ``write`` or ``edit`` may change, as a workspace-relative path."""
    _writable(ctx)
    if '"' in given:  # the call's other arguments, inside the path: 'identity.md", "content": …'
        head = given.split('"', 1)[0].strip()
        named = case_twin(ctx.files, ctx.files.canonical(head)) or head if head else None
        raise ToolError(f"the path holds more than a file name ({given[:60]!r}): give the "
                        f"path alone" + (f", \"{named}\"" if named else ""))
    if _PLACEHOLDER.search(given):  # a small model wrote a file named "<path>"
        raise ToolError(f"\"{given}\" is a placeholder, not a file name: give the file's "
                        f"real path (today's notes go to {daily_log_path(ctx.today())})")
    rel = ctx.files.canonical(given)
    if is_clawd_state(rel):
        raise ToolError(f"{rel} is in {STATE_DIR}/, clawd's own record of earlier versions of "
                        f"your files; it cannot be written")
    if ctx.flush:
        ctx.access.check_flush_write(rel)
    twin = case_twin(ctx.files, rel)
    if twin is not None:  # a small model wrote "identity.md", a file nothing ever reads
        raise ToolError(f"there is no {rel}, but there is {twin} (file names are "
                        f"case-sensitive): give the path \"{twin}\"")
    return rel


def case_twin(files: WorkspaceFiles, rel: str) -> str | None:
    """The path ``rel`` names with the letter case of what exists (``IDENTITY.md`` for
    ``identity.md``, ``memory/new.md`` for ``Memory/new.md``), when that differs from
    ``rel`` and ``rel`` itself does not exist; else None."""
    if rel == "." or files.stat(rel) is not None:
        return None
    parts = rel.split("/")
    for i, part in enumerate(parts):
        names = [n.rstrip("/") for n in files.entries("/".join(parts[:i]) or ".")]
        if part in names:
            continue
        twins = [n for n in names if n.lower() == part.lower()]
        if not twins:
            break  # a new name from here on
        parts[i] = twins[0]
    twin = "/".join(parts)
    return twin if twin != rel else None


@tool("write", "Create or overwrite a file in the workspace; with append: true, add content "
      "to the end of the file instead. Daily logs (memory/YYYY-MM-DD.md) are append-only: "
      "always use append: true.")
def write(ctx: ToolContext, *, path: str, content: str,
          append: Annotated[bool, Param("true: add content at the end of the file (created "
                                        "if missing), keeping what is there")] = False) -> str:
    rel = _target(path, ctx)
    stat = ctx.files.stat(rel)
    if stat is not None and stat.kind == "folder":
        raise ToolError(f"{rel} is a directory")
    if rel.endswith(".md"):
        content = unescaped_breaks(content)
    old = _current(ctx, rel) if stat is not None else ""
    if append:
        dropped = 0
        if is_daily_log(rel):
            content = as_list_items(content)
        if is_private_memory(rel):  # a note already there is not added again
            content, dropped = new_lines(old, content)
            if not content:
                return f"nothing appended: every line of it is already in {rel}"
        if is_daily_log(rel) and ends_in_runtime_section(old):
            # not under a heading that says the runtime wrote it, nor from whose words
            content = f"\n{MODEL_SECTION}\n\n{content.lstrip(chr(10))}"
        _append(ctx.files, rel, old, content)
        return f"appended {len(content)} characters to {rel}" + (
            f" ({dropped} line{'s' if dropped > 1 else ''} already in the file left out)"
            if dropped else "")
    ctx.access.check_replace(rel)
    if is_daily_log(rel) and not content.startswith(old):
        raise _append_only(rel)
    kept = _save(ctx, rel, old, content)
    return f"wrote {len(content)} characters to {rel}{kept}"


def _current(ctx: ToolContext, rel: str, *, exact: bool = False) -> str:
    """The text of ``rel`` ("" when there is none yet); a ``ToolError`` when it cannot be
    read."""
    try:
        return ctx.files.read(rel, exact=exact) or ""
    except OSError as exc:
        raise ToolError(f"cannot read {rel}: {exc.strerror or exc}") from None


# an escaped line break that ends a note or starts a Markdown line (a list item, heading,
# numbered item, quote or another break)
_ESCAPED_BREAK = re.compile(r"\\n(?=$|\s*(?:[-*+>#]\s|\d+[.)]\s|\\n))")


def unescaped_breaks(content: str) -> str:
    """``content`` with escaped line breaks as real ones, when a model wrote a one-line note
    as ``- a\\n- b\\n``: only in content without a real line break, and only when every
    ``\\n`` ends it or starts a Markdown line (a one-line note about ``printf 'a\\n'`` is
    kept as written)."""
    if "\n" in content or "\\n" not in content:
        return content
    if content.count("\\n") != len(_ESCAPED_BREAK.findall(content)):
        return content
    return _ESCAPED_BREAK.sub("\n", content)


def as_list_items(content: str) -> str:
    """A daily log's new lines with each plain line made a list item ("I moved to Lisbon
    last month." becomes "- I moved to Lisbon last month."), as a daily log keeps its
    notes. Memory search reads each list item on its own as well as within its section, so
    a one-line note is found by what it says: as a plain line it was only part of the whole
    file's vector, and "where do I live" found nothing. Headings, list items, quotes,
    tables and code blocks stay as they are."""
    lines, fenced = [], False
    for line in content.split("\n"):
        bare = line.strip()
        if FENCE_RE.match(line):
            fenced = not fenced
        elif bare and not fenced and not bare.startswith(("#", ">", "|", "<!--")) \
                and not listmark.ITEM.match(line):
            line = f"- {bare}"
        lines.append(line)
    return "\n".join(lines)


def new_lines(existing: str, content: str) -> tuple[str, int]:
    """``content`` without the lines (other than headings, code fences and blank ones)
    that the file's text ``existing`` or an earlier line of ``content`` already holds, and
    how many were left out; ``""`` when no line but headings and blank ones is left. A
    small model appends the same note again in later steps and turns."""
    have = {line.strip() for line in existing.splitlines()}
    kept, dropped = [], 0
    for line in content.splitlines():
        key = line.strip()
        if key and not key.startswith("#") and not FENCE_RE.match(key):  # fences stay
            if key in have:
                dropped += 1
                continue
            have.add(key)
        kept.append(line)
    if not any(line.strip() and not line.strip().startswith("#") for line in kept):
        return "", dropped
    return "\n".join(kept) + ("\n" if content.endswith("\n") else ""), dropped


def _append(files: WorkspaceFiles, rel: str, old: str, content: str) -> None:
    """Add ``content`` after ``old`` (the file's text), on lines of its own (the file is
    created if missing)."""
    glued = bool(old) and not old.endswith("\n")  # a note must not join the last line
    data = ("\n" if glued else "") + content
    try:
        files.append(rel, data if data.endswith("\n") else data + "\n")
    except OSError as exc:
        raise ToolError(f"cannot write {rel}: {exc.strerror or exc}") from None


@tool("edit", "Replace one exact, unique occurrence of oldText with newText in a workspace "
      "file.")
def edit(ctx: ToolContext, *, path: str, old_text: Annotated[str, Param(name="oldText")],
         new_text: Annotated[str, Param(name="newText")]) -> str:
    rel = _target(path, ctx)
    ctx.access.check_read(rel)  # an edit of private memory would reveal it piece by piece
    if not old_text:
        raise ToolError("oldText must not be empty")
    try:
        content = ctx.files.read(rel, exact=True)
    except UnicodeDecodeError:
        raise ToolError(f"{rel} is not valid UTF-8 text; edit would change bytes it cannot "
                        f"show") from None
    except OSError as exc:
        raise ToolError(f"cannot read {rel}: {exc.strerror or exc}") from None
    if content is None:
        raise ToolError(f"file not found: {rel}" + _how_to_add(rel))
    count = content.count(old_text)
    if count == 0:
        raise ToolError(f"oldText was not found in {rel}; read the file and copy the exact text"
                        + _how_to_add(rel))
    if count > 1:
        raise ToolError(f"oldText occurs {count} times in {rel}; include more surrounding text "
                        f"so it is unique")
    if is_daily_log(rel) and old_text not in new_text:
        raise _append_only(rel)
    kept = _save(ctx, rel, content, content.replace(old_text, new_text, 1))
    return f"edited {rel}{kept}"


def _save(ctx: ToolContext, rel: str, old: str, new: str) -> str:
    """Write ``new`` over ``old``; a bootstrap file or MEMORY.md that would lose content is
    kept in the backups first. Returns what the result tells the model about that copy."""
    note = ""
    try:
        if is_protected(rel) and loses_content(old, new):
            version = ctx.backups.keep(rel, datetime.now())
            note = (f" (the previous version is kept as {ctx.backups.where(version)};"
                    f" `clawd history restore {version.ref}` puts it back)")
        ctx.files.write(rel, new)
    except OSError as exc:
        raise ToolError(f"cannot write {rel}: {exc.strerror or exc}") from None
    return note


def file_tools() -> list[Tool]:
    return [read, write, edit]
