"""Adding to a daily log: one way for ``/memory add``, ``memory_add`` and the flush."""

from __future__ import annotations

from datetime import date, datetime

from clawd.context.flush import append_flush_notes
from clawd.memory.notes import append_to_daily_log
from clawd.storage.files.workspace import DiskFiles
from clawd.workspace.files import append_to_day

DAY = date(2026, 11, 28)


def test_a_new_log_gets_its_date_heading_and_bullets_follow_each_other(tmp_path):
    files = DiskFiles(tmp_path)
    assert append_to_daily_log(files, "Ines arrives on May 14", DAY) == "memory/2026-11-28.md"
    append_to_daily_log(files, "  the  locker is 42 ", DAY)
    assert files.read("memory/2026-11-28.md") == ("# 2026-11-28\n\n- Ines arrives on May 14\n"
                                                  "- the locker is 42\n")


def test_a_section_is_set_apart_and_a_missing_line_end_is_added(tmp_path):
    files = DiskFiles(tmp_path)
    files.write("memory/2026-11-28.md", "# 2026-11-28\n\n- written by hand")
    append_flush_notes(files, "- budget 2400 euros\n- budget 2400 euros", datetime(2026, 11, 28,
                                                                                  9, 30))
    append_to_day(files, DAY, "- one more\n")
    assert files.read("memory/2026-11-28.md") == (
        "# 2026-11-28\n\n- written by hand\n\n## Flush notes (09:30, written from the model's "
        "reply)\n\n- budget 2400 euros\n- one more\n")


def test_flush_notes_open_a_new_log_under_its_heading(tmp_path):
    files = DiskFiles(tmp_path)
    append_flush_notes(files, "- a note", datetime(2026, 11, 28, 9, 30))
    assert files.read("memory/2026-11-28.md").startswith("# 2026-11-28\n\n## Flush notes")
