"""Appending a note to today's daily log (``/memory add TEXT``).

Daily logs (``memory/YYYY-MM-DD.md``) are append-only: a note becomes one ``- `` bullet at
the end of the file, which is created with a date heading when it does not exist yet. The
index picks the change up through the watcher or the next search.
"""

from __future__ import annotations

from datetime import date

from clawd.core.errors import ToolError
from clawd.workspace.files import append_to_day, daily_log_path
from clawd.workspace.interface import WorkspaceFiles


def append_to_daily_log(files: WorkspaceFiles, text: str, day: date) -> str:
    """Append ``text`` as a bullet to the day's log; the log's workspace-relative path."""
    note = " ".join(text.split())
    if not note:
        raise ToolError("nothing to add: the note is empty")
    try:
        return append_to_day(files, day, f"- {note}\n")
    except OSError as exc:
        raise ToolError(f"cannot write {daily_log_path(day)}: {exc.strerror or exc}; the note "
                        f"was not saved: {note}") from None
