"""``write`` with ``append: true``: the way to add to a daily log, and refusals that say so."""

from __future__ import annotations

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import ToolError
from clawd.tools.files import edit, file_tools, write

from conftest import disk_tool_context

DAILY = "memory/2026-11-22.md"


@pytest.fixture
def ctx(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    return disk_tool_context(ws, AgentDefaults(workspace=str(ws)))


def test_append_creates_then_adds_lines_at_the_end(ctx):
    assert write({"path": DAILY, "content": "- first", "append": True}, ctx) == \
        f"appended 7 characters to {DAILY}"
    write({"path": DAILY, "content": "- second\n- third\n", "append": True}, ctx)
    assert (ctx.workspace / DAILY).read_text() == "- first\n- second\n- third\n"


def test_append_never_glues_to_a_last_line_without_newline(ctx):
    (ctx.workspace / DAILY).write_text("# 2026-11-22\n\n- old note")
    write({"path": DAILY, "content": "- new note", "append": "true"}, ctx)  # quoted bool
    assert (ctx.workspace / DAILY).read_text() == "# 2026-11-22\n\n- old note\n- new note\n"


def test_append_works_on_a_long_log_without_reading_it(ctx):
    big = "".join(f"- line {i} {'x' * 40}\n" for i in range(1200))  # ~60 KB
    (ctx.workspace / DAILY).write_text(big)
    write({"path": DAILY, "content": "- the budget is 2400 euros", "append": True}, ctx)
    assert (ctx.workspace / DAILY).read_text() == big + "- the budget is 2400 euros\n"


def test_refused_overwrite_of_a_daily_log_says_how_to_append(ctx):
    (ctx.workspace / DAILY).write_text("- old note\n")
    expected = (f'call write with path "{DAILY}", append: true and only the new lines as '
                f'content')
    with pytest.raises(ToolError, match=expected):
        write({"path": DAILY, "content": "- new note\n"}, ctx)
    with pytest.raises(ToolError, match=expected):
        edit({"path": DAILY, "oldText": "- old note", "newText": "- new note"}, ctx)
    assert (ctx.workspace / DAILY).read_text() == "- old note\n"


def test_the_schema_documents_append():
    spec = next(t.spec for t in file_tools() if t.spec.name == "write")
    assert spec.parameters["properties"]["append"]["type"] == "boolean"
    assert "append: true" in spec.description and "append" not in spec.parameters["required"]


def test_a_failed_edit_of_a_daily_log_says_how_to_append(ctx):
    """What a 1.5B model did: edit a log that did not exist yet, oldText == newText."""
    args = {"path": DAILY, "oldText": "budget 2400", "newText": "budget 2400"}
    with pytest.raises(ToolError, match=f'file not found: {DAILY}; to add notes to it, call '
                                        f'write with path "{DAILY}", append: true'):
        edit(args, ctx)
    (ctx.workspace / DAILY).write_text("- other\n")
    with pytest.raises(ToolError, match="oldText was not found.*append: true"):
        edit(args, ctx)
    with pytest.raises(ToolError, match=r"^file not found: notes\.md$"):
        edit({"path": "notes.md", "oldText": "a", "newText": "b"}, ctx)
