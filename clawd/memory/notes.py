"""Appending a note to today's daily log (``/memory add TEXT``).

Daily logs (``memory/YYYY-MM-DD.md``) are append-only: a note becomes one ``- `` bullet at
the end of the file, which is created with a date heading when it does not exist yet. The
index picks the change up through the watcher or the next search.
"""

from __future__ import annotations

from datetime import date

from clawd.core.errors import ToolError
from clawd.workspace.files import daily_log_path
from clawd.workspace.interface import WorkspaceFiles


def append_to_daily_log(files: WorkspaceFiles, text: str, day: date) -> str:
    """Append ``text`` as a bullet to the day's log; the log's workspace-relative path."""
    note = " ".join(text.split())
    if not note:
        raise ToolError("nothing to add: the note is empty")
    rel = daily_log_path(day)
    try:
        existing = files.read(rel) or ""
        files.append(rel, (f"# {day.isoformat()}\n\n" if not existing else
                           "" if existing.endswith("\n") else "\n") + f"- {note}\n")
    except OSError as exc:
        raise ToolError(f"cannot write {rel}: {exc.strerror or exc}; the note was not saved: "
                        f"{note}") from None
    return rel
