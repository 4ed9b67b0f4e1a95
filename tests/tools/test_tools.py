"""File and exec tools: sandboxing, append-only daily logs, read windows, edits, read-only."""

from __future__ import annotations

import os
from datetime import date
from typing import Annotated

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import SandboxError, ToolError
from clawd.storage.files.workspace import DiskFiles
from clawd.tools.base import Param, tool
from clawd.tools.exec import run_exec
from clawd.tools.files import edit, read, write
from clawd.workspace.files import read_context_files, resolve, truncate

from conftest import disk_tool_context


@pytest.fixture
def ctx(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    return disk_tool_context(ws, AgentDefaults(workspace=str(ws)))


@pytest.mark.parametrize("path", ["../outside.txt", "memory/../../outside.txt", "/etc/passwd",
                                  "~/x", "a/../../b", "\x00"])
def test_escapes_are_refused(ctx, path):
    with pytest.raises(SandboxError):
        read({"path": path}, ctx)
    with pytest.raises(SandboxError):
        write({"path": path, "content": "x"}, ctx)


def test_symlink_out_is_refused(ctx, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, ctx.workspace / "link.txt")
    os.symlink(tmp_path, ctx.workspace / "outdir")
    for path in ("link.txt", "outdir/secret.txt", "outdir/new.txt"):
        with pytest.raises(SandboxError, match="escapes"):
            read({"path": path}, ctx) if path != "outdir/new.txt" else write(
                {"path": path, "content": "x"}, ctx)
    assert not (tmp_path / "new.txt").exists()


def test_symlink_inside_is_fine(ctx):
    (ctx.workspace / "real.md").write_text("inside")
    os.symlink(ctx.workspace / "real.md", ctx.workspace / "alias.md")
    assert read({"path": "alias.md"}, ctx) == "inside"
    assert resolve(ctx.workspace, "memory/../real.md") == (ctx.workspace / "real.md").resolve()


def test_read_windows(ctx):
    (ctx.workspace / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = read({"path": "f.txt", "offset": 3, "limit": 2}, ctx)
    assert out.startswith("line 3\nline 4\n")
    assert "lines 3-4 of 10" in out and "offset=5" in out
    assert read({"path": "f.txt"}, ctx).count("line") == 10
    # past the end: said in words (a 1.5B model answered nothing after "lines 19-18 of 18")
    assert read({"path": "f.txt", "offset": 11, "limit": 5}, ctx) == \
        "[f.txt has 10 lines; there is nothing after line 10]"
    with pytest.raises(ToolError, match="not found"):
        read({"path": "missing.txt"}, ctx)
    (ctx.workspace / "bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        read({"path": "bin"}, ctx)
    with pytest.raises(ToolError, match="missing required argument 'path'"):
        read({}, ctx)


def test_an_edit_never_changes_bytes_it_could_not_show(ctx):
    raw = b"caf\xe9 au lait\nline two\n"  # Latin-1, not UTF-8
    (ctx.workspace / "latin.txt").write_bytes(raw)
    assert "line two" in read({"path": "latin.txt"}, ctx)  # shown, the odd byte replaced
    with pytest.raises(ToolError, match="not valid UTF-8"):
        edit({"path": "latin.txt", "oldText": "line two", "newText": "line 2"}, ctx)
    assert (ctx.workspace / "latin.txt").read_bytes() == raw


def test_daily_logs_are_append_only(ctx):
    log = ctx.workspace / "memory" / "2026-11-22.md"
    write({"path": "memory/2026-11-22.md", "content": "# day\n- a\n"}, ctx)
    write({"path": "memory/2026-11-22.md", "content": "# day\n- a\n- b\n"}, ctx)
    # the refusal is the call's rule, said so: a model told the user they had erred
    with pytest.raises(ToolError, match=r"append-only \(a rule for this call, nothing the "
                                        r"user did\)"):
        write({"path": "memory/2026-11-22.md", "content": "# day\n- b\n"}, ctx)
    with pytest.raises(ToolError, match="append-only"):
        edit({"path": "memory/2026-11-22.md", "oldText": "- a\n", "newText": ""}, ctx)
    edit({"path": "memory/2026-11-22.md", "oldText": "- b\n", "newText": "- b\n- c\n"}, ctx)
    assert log.read_text() == "# day\n- a\n- b\n- c\n"
    # other memory files may be rewritten freely
    write({"path": "memory/notes.md", "content": "x"}, ctx)
    write({"path": "memory/notes.md", "content": "y"}, ctx)


def test_a_one_line_note_with_escaped_breaks_is_written_on_lines(ctx):
    """A 1.5B model sent its note as ``- a\\n`` (the escape itself, not a line break)."""
    log = ctx.workspace / "memory" / "2026-11-22.md"
    write({"path": "memory/2026-11-22.md", "content": "- Ines lands 14:05\\n- gate B\\n",
           "append": True}, ctx)
    write({"path": "memory/2026-11-22.md", "content": "- budget 2400\\n", "append": True}, ctx)
    assert log.read_text() == "- Ines lands 14:05\n- gate B\n- budget 2400\n"
    write({"path": "MEMORY.md", "content": "# Facts\\n\\n1. one\\n2. two"}, ctx)
    assert (ctx.workspace / "MEMORY.md").read_text() == "# Facts\n\n1. one\n2. two"
    # kept as written: an escape inside a sentence, a note with real breaks, other files
    for path, content in (("memory/a.md", "- end lines with printf 'a\\n' in scripts"),
                          ("memory/b.md", "- a\n- b\\n"),
                          ("notes.txt", "- a\\n- b\\n")):
        write({"path": path, "content": content}, ctx)
        assert (ctx.workspace / path).read_text() == content


@pytest.mark.parametrize("path", ["<path>", "memory/<date>.md", "{path}", "memory/{{today}}.md",
                                  "memory/YYYY-MM-DD.md", "path/to/notes.md"])
def test_a_placeholder_path_is_refused(ctx, path):
    """A 1.5B model copied ``<path>`` from an example and created a file of that name."""
    ctx.today = lambda: date(2026, 11, 22)
    with pytest.raises(ToolError, match="is a placeholder, not a file name: give the file's "
                                        "real path \\(today's notes go to memory/2026-11-22.md"):
        write({"path": path, "content": "- note", "append": True}, ctx)
    with pytest.raises(ToolError, match="placeholder"):
        edit({"path": path, "oldText": "a", "newText": "b"}, ctx)
    assert sorted(p.name for p in ctx.workspace.rglob("*")) == ["memory"]


def test_a_path_holding_the_other_arguments_is_refused_with_the_path_alone(ctx):
    """llama.cpp handed a 1.5B model's call over with the rest of its arguments inside the
    path string; told "placeholder … today's notes go to memory/…", the model then wrote
    IDENTITY.md's lines into the daily log."""
    (ctx.workspace / "IDENTITY.md").write_text("# IDENTITY.md\n")
    path = 'identity.md", "content": "Name: Priya\\nVibe: calm", "append": true}'
    with pytest.raises(ToolError) as raised:
        write({"path": path, "content": "Name: Priya", "append": True}, ctx)
    assert "holds more than a file name" in str(raised.value)
    assert str(raised.value).endswith('give the path alone, "IDENTITY.md"')
    assert "memory/" not in str(raised.value)
    with pytest.raises(ToolError, match='give the path alone, "notes.md"'):
        edit({"path": 'notes.md", "oldText": "a', "oldText": "a", "newText": "b"}, ctx)
    with pytest.raises(ToolError, match="give the path alone$"):
        write({"path": '", "content": "x"', "content": "x"}, ctx)
    assert sorted(p.name for p in ctx.workspace.rglob("*")) == ["IDENTITY.md", "memory"]


@pytest.mark.parametrize("path, twin", [("identity.md", "IDENTITY.md"),
                                        ("Memory/2026-11-22.md", "memory/2026-11-22.md"),
                                        ("MEMORY/Notes.MD", "memory/notes.md"),
                                        ("Memory/new.md", "memory/new.md")])
def test_a_path_that_differs_only_in_case_names_the_existing_file(ctx, path, twin):
    """A 1.5B model wrote its name to "identity.md", a file nothing reads, beside
    IDENTITY.md."""
    (ctx.workspace / "IDENTITY.md").write_text("# IDENTITY.md\n")
    (ctx.workspace / "memory" / "2026-11-22.md").write_text("# 2026-11-22\n")
    (ctx.workspace / "memory" / "notes.md").write_text("- a\n")
    before = sorted(p.name for p in ctx.workspace.rglob("*"))
    with pytest.raises(ToolError, match=f'but there is {twin} .*give the path "{twin}"'):
        write({"path": path, "content": "- Name: Priya", "append": True}, ctx)
    with pytest.raises(ToolError, match=f"but there is {twin}"):
        edit({"path": path, "oldText": "a", "newText": "b"}, ctx)
    assert sorted(p.name for p in ctx.workspace.rglob("*")) == before
    # a new file, and a new file in a new folder, are written as named
    assert write({"path": "memory/identity-notes.md", "content": "x"}, ctx).startswith("wrote")
    assert write({"path": "Projects/plan.md", "content": "x"}, ctx).startswith("wrote")


def test_an_append_to_memory_leaves_out_the_lines_already_there(ctx):
    """A 1.5B model appended the same two notes three times in one turn, in different
    steps and mixes, while answering a question."""
    log = ctx.workspace / "memory" / "2026-11-22.md"
    note = "- deploy with `make ship`\n- Priya Raman handles iOS\n"
    assert write({"path": "memory/2026-11-22.md", "content": note, "append": True},
                 ctx) == "appended 52 characters to memory/2026-11-22.md"
    assert write({"path": "memory/2026-11-22.md", "content": "- Priya Raman handles iOS",
                  "append": True}, ctx) == \
        "nothing appended: every line of it is already in memory/2026-11-22.md"
    assert write({"path": "memory/2026-11-22.md", "content": "## Deploy\n  - deploy with "
                  "`make ship`\n- Python 3.13\n- Python 3.13\n", "append": True}, ctx) == (
        "appended 24 characters to memory/2026-11-22.md (2 lines already in the file left "
        "out)")
    assert write({"path": "memory/2026-11-22.md", "content": "## Deploy\n",
                  "append": True}, ctx).startswith("nothing appended")  # a heading alone
    assert log.read_text() == note + "## Deploy\n- Python 3.13\n"
    # other files are appended to as they are: a log may repeat its lines
    for _ in range(2):
        write({"path": "events.log", "content": "tick", "append": True}, ctx)
    assert (ctx.workspace / "events.log").read_text() == "tick\ntick\n"


def test_edit_needs_a_unique_match(ctx):
    (ctx.workspace / "f.md").write_text("a b a")
    with pytest.raises(ToolError, match="2 times"):
        edit({"path": "f.md", "oldText": "a", "newText": "c"}, ctx)
    with pytest.raises(ToolError, match="not found"):
        edit({"path": "f.md", "oldText": "zzz", "newText": "c"}, ctx)
    edit({"path": "f.md", "oldText": "b", "newText": "B"}, ctx)
    assert (ctx.workspace / "f.md").read_text() == "a B a"


def test_read_only_workspace_refuses_writes(ctx):
    ro = disk_tool_context(ctx.workspace, AgentDefaults(workspace=str(ctx.workspace),
                                                  workspace_access="ro"))
    with pytest.raises(ToolError, match="read-only"):
        write({"path": "a.md", "content": "x"}, ro)
    with pytest.raises(ToolError, match="read-only"):
        edit({"path": "a.md", "oldText": "x", "newText": "y"}, ro)


@pytest.mark.slow  # runs shell commands, one until its timeout
def test_exec_approval_and_timeout(ctx):
    asked = []
    ctx.approve = lambda command: asked.append(command) or False
    with pytest.raises(ToolError, match="declined"):
        run_exec({"command": "echo hi"}, ctx)
    assert asked == ["echo hi"]
    ctx.approve = None
    ctx.allow_exec = True
    assert "[exit code 3]" in run_exec({"command": "echo out; exit 3"}, ctx)
    with pytest.raises(ToolError, match="timed out"):
        run_exec({"command": "sleep 5", "timeout": 1}, ctx)


def test_truncation_marker_keeps_head_and_tail():
    text = "H" * 1000 + "M" * 1000 + "T" * 1000
    out, cut = truncate(text, 1000, "AGENTS.md")
    assert cut and out.startswith("H" * 700) and out.endswith("T" * 200)
    assert "AGENTS.md truncated" in out
    assert truncate("short", 1000, "x") == ("short", False)


def test_context_files_cap_and_window(tmp_path):
    ws = tmp_path
    (ws / "memory").mkdir()
    (ws / "AGENTS.md").write_text("A" * 5000)
    (ws / "MEMORY.md").write_text("private")
    (ws / "memory" / "2026-11-21.md").write_text("yesterday")
    (ws / "memory" / "2026-11-22.md").write_text("today")
    files = read_context_files(DiskFiles(ws), include_memory=False, today=date(2026, 11, 22),
                               max_chars=1000)
    names = [f.name for f in files]
    assert names == ["AGENTS.md"]  # a group session: no MEMORY.md, no daily logs
    assert files[0].truncated and files[0].raw_chars == 5000 and len(files[0].text) < 1200
    private = read_context_files(DiskFiles(ws), include_memory=True, today=date(2026, 11, 22),
                                 max_chars=1000)
    assert [f.name for f in private] == ["AGENTS.md", "MEMORY.md", "memory/2026-11-21.md",
                                         "memory/2026-11-22.md"]


def test_an_untouched_memory_template_is_no_context(tmp_path):
    """In an 8k window the template's 809 characters of placeholders were sent in full
    while today's log was cut."""
    from clawd.workspace.template import template_files

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    template = next(src.read_text() for name, src in template_files() if name == "MEMORY.md")
    (ws / "MEMORY.md").write_text(template)

    def memory_md() -> str | None:
        found = read_context_files(DiskFiles(ws), include_memory=True,
                                   today=date(2026, 11, 22), max_chars=20_000)
        return next((f.text for f in found if f.name == "MEMORY.md"), None)

    assert memory_md() is None
    (ws / "MEMORY.md").write_text(template.replace(
        "- (name — who they are, how they relate to the user)", "- Ines: sister, in Porto"))
    shown = memory_md()
    assert shown is not None and "- Ines: sister, in Porto" in shown
    assert "## People" in shown and "(preferences" not in shown and "## Lessons" not in shown


def test_a_tool_is_declared_once_by_its_signature(ctx):
    @tool("probe", "Echo typed arguments.")
    def probe(ctx, *, name: str, count: Annotated[int, Param("how many", minimum=1)] = 2,
              ratio: float | None = None,
              loud: Annotated[bool, Param(name="LOUD")] = False) -> str:
        return f"{name}*{count} {ratio} {loud}"

    assert probe.spec.name == "probe" and probe.spec.description == "Echo typed arguments."
    assert probe.spec.parameters == {
        "type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {"name": {"type": "string"},
                       "count": {"type": "integer", "minimum": 1, "description": "how many"},
                       "ratio": {"type": "number"}, "LOUD": {"type": "boolean"}}}
    # parsed from the same declaration, leniently where small models slip (quoted values)
    assert probe({"name": "a", "count": "3", "ratio": 1, "LOUD": "true"}, ctx) == "a*3 1.0 True"
    assert probe({"name": "a", "count": None}, ctx) == "a*2 None False"
    with pytest.raises(ToolError, match="missing required argument 'name'"):
        probe({}, ctx)
    with pytest.raises(ToolError, match="argument 'count' must be int"):
        probe({"name": "a", "count": True}, ctx)
    with pytest.raises(ToolError, match="argument 'LOUD' must be bool"):
        probe({"name": "a", "LOUD": "maybe"}, ctx)
    with pytest.raises(TypeError, match="unsupported type"):
        tool("bad", "x")(lambda ctx, *, items: "")  # no annotation to declare it from


def test_one_helper_cuts_text_for_everyone():
    from clawd.core.textcut import keep_ends, shorten

    marker = lambda omitted: f"[{omitted} cut]"  # noqa: E731
    assert keep_ends("abcdefghij", 3, 2, marker) == "abc[5 cut]ij"
    assert keep_ends("abcdefghij", 4, 0, marker) == "abcd[6 cut]"  # no tail: nothing after
    assert keep_ends("abcdef", 3, 3, marker) == "abcdef"  # nothing to cut
    assert shorten("abcdefghij", 5) == "abcd…" and shorten("abc", 5) == "abc"
    assert shorten("abcdefghij", 6, "...") == "abc..."


def test_a_tool_enforces_its_params_bounds(tmp_path):
    @tool("pick", "pick some")
    def pick(ctx, *, count: Annotated[int, Param(minimum=1, maximum=5)] = 1,
             share: Annotated[float | None, Param(minimum=0, maximum=1)] = None,
             top: Annotated[int, Param(minimum=1, maximum=10, clamp=True)] = 3) -> str:
        return f"{count} {share} {top}"

    ctx = disk_tool_context(tmp_path, AgentDefaults(workspace=str(tmp_path)))
    assert pick({"count": 5, "share": 0.5, "top": 400}, ctx) == "5 0.5 10"  # clamped
    for bad, says in (({"count": 0}, "'count' must be between 1 and 5"),
                      ({"count": 6}, "'count' must be between 1 and 5"),
                      ({"share": 1.5}, "'share' must be between 0 and 1"),
                      ({"top": 0}, "'top' must be between 1 and 10")):
        with pytest.raises(ToolError, match=says):
            pick(bad, ctx)


def test_plain_lines_appended_to_a_daily_log_become_list_items(ctx):
    """A 1.5B model appended "I moved to Lisbon last month." as a plain line; as a list item
    memory search reads it on its own, so "where do I live" finds it."""
    write({"path": "memory/2026-11-28.md", "append": True,
           "content": "I moved to Lisbon last month.\n## Flat\nThe flat is in Alfama.\n"
                      "- already a note\n1. numbered\n| a | b |\n> quoted\n\n```\ncode line\n```"},
          ctx)
    assert (ctx.workspace / "memory" / "2026-11-28.md").read_text() == (
        "- I moved to Lisbon last month.\n## Flat\n- The flat is in Alfama.\n"
        "- already a note\n1. numbered\n| a | b |\n> quoted\n\n```\ncode line\n```\n")
    write({"path": "notes/todo.md", "append": True, "content": "plain line"}, ctx)
    assert (ctx.workspace / "notes" / "todo.md").read_text() == "plain line\n"  # not a log


def test_a_note_appended_after_a_section_the_runtime_wrote_gets_its_own_heading(ctx):
    """A model's note under "## Flush notes (…, the user's own words …)" would read as the
    user's words kept by the runtime."""
    log = ctx.workspace / "memory" / "2026-11-22.md"
    log.write_text("# 2026-11-22\n\n## Flush notes (20:01, the user's own words: the model "
                   "saved no notes)\n\n- My vet is Dr. Almeida.\n")
    write({"path": "memory/2026-11-22.md", "content": "- Vet is now Dr. Costa.",
           "append": True}, ctx)
    assert log.read_text().endswith("- My vet is Dr. Almeida.\n\n## Notes\n\n"
                                    "- Vet is now Dr. Costa.\n")
    write({"path": "memory/2026-11-22.md", "content": "- Rent is 850.", "append": True}, ctx)
    assert log.read_text().endswith("## Notes\n\n- Vet is now Dr. Costa.\n- Rent is 850.\n")
