"""Earlier versions of the bootstrap files and MEMORY.md: kept before a tool changes them,
listed, shown and restored by ``clawd history``."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import ClawdError, ToolError
from clawd.frontends import cli
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.files import edit, write
from clawd.workspace import backups as history

from conftest import disk_tool_context, make_runtime


@pytest.fixture
def ctx(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "SOUL.md").write_text("I am kind and curious.\n")
    (ws / "MEMORY.md").write_text("- likes tea\n- lives in Lyon\n")
    return disk_tool_context(ws, AgentDefaults(workspace=str(ws)))


def test_overwriting_a_bootstrap_file_keeps_the_previous_version(ctx):
    result = write({"path": "SOUL.md", "content": ""}, ctx)
    (version,) = ctx.backups.versions("SOUL.md")
    assert f".clawd/history/SOUL.md/{version.stamp}.md" in result
    assert f"clawd history restore {version.ref}" in result
    assert ctx.backups.text(version) == "I am kind and curious.\n"
    assert (ctx.workspace / "SOUL.md").read_text() == ""
    assert (ctx.workspace / ".clawd" / ".gitignore").read_text().endswith("*\n")


def test_edit_of_memory_keeps_a_version_but_appends_and_other_files_do_not(ctx):
    result = edit({"path": "MEMORY.md", "oldText": "- lives in Lyon\n", "newText": ""}, ctx)
    assert "previous version is kept" in result
    assert ctx.backups.text(ctx.backups.versions("memory.md")[0]).endswith("Lyon\n")
    result = write({"path": "MEMORY.md", "content": "- likes tea\n- owns a cat\n"}, ctx)
    assert "previous version" not in result  # an append: nothing is lost
    result = write({"path": "notes.md", "content": "a"}, ctx)
    write({"path": "notes.md", "content": ""}, ctx)
    assert "previous version" not in result
    assert [v.name for v in ctx.backups.versions()] == ["MEMORY.md"]


def test_the_model_cannot_write_into_the_history(ctx):
    write({"path": "SOUL.md", "content": "x"}, ctx)
    version = ctx.backups.versions("SOUL.md")[0]
    rel = f".clawd/history/SOUL.md/{version.stamp}.md"
    for call in (lambda: write({"path": rel, "content": "forged"}, ctx),
                 lambda: edit({"path": rel, "oldText": "kind", "newText": "cruel"}, ctx),
                 lambda: write({"path": ".clawd/x.md", "content": "x"}, ctx)):
        with pytest.raises(ToolError, match="clawd's own record"):
            call()
    assert "kind" in ctx.backups.text(version)


def test_only_the_newest_versions_are_kept(ctx, monkeypatch):
    monkeypatch.setattr(history, "KEEP", 3)
    for n in range(6):
        write({"path": "SOUL.md", "content": f"version {n}"}, ctx)
    kept = ctx.backups.versions("SOUL.md")
    assert [ctx.backups.text(v) for v in kept] == ["version 2", "version 3", "version 4"]


def test_versions_within_one_second_are_numbered_after_any_kept_before(ctx, monkeypatch):
    monkeypatch.setattr(history, "KEEP", 2)
    now = datetime(2026, 11, 23, 2, 45, 12)
    stamps = []
    for n in range(4):
        (ctx.workspace / "SOUL.md").write_text(f"v{n}")
        stamps.append(ctx.backups.keep("SOUL.md", now).stamp)
    assert stamps == ["20261123-024512", "20261123-024512-2", "20261123-024512-3",
                      "20261123-024512-4"]
    assert [ctx.backups.text(v) for v in ctx.backups.versions("SOUL.md")] == [
        "v2", "v3"]


def test_find_and_restore(ctx):
    write({"path": "SOUL.md", "content": "grumpy"}, ctx)
    write({"path": "SOUL.md", "content": "silent"}, ctx)
    first, second = ctx.backups.versions("SOUL.md")
    assert ctx.backups.find("soul.md") == second
    assert ctx.backups.find(first.ref) == first
    saved = ctx.backups.restore(first, datetime.now())
    assert (ctx.workspace / "SOUL.md").read_text() == "I am kind and curious.\n"
    assert ctx.backups.text(saved) == "silent"
    with pytest.raises(ClawdError, match="not a file clawd keeps"):
        ctx.backups.find("notes.md")
    with pytest.raises(ClawdError, match="no version"):
        ctx.backups.find("SOUL.md@20000101-000000")
    with pytest.raises(ClawdError, match="no earlier versions"):
        ctx.backups.find("USER.md")


def test_a_wiping_write_in_a_run_is_kept_and_the_cli_restores_it(tmp_path, isolated_home,
                                                                   capsys):
    provider = ScriptedProvider([
        Reply(tool_calls=[tool("write", path="SOUL.md", content="")]), "done"])
    rt = make_runtime(tmp_path, provider)
    (rt.workspace / "SOUL.md").write_text("warm and witty\n")
    session = Session.open(rt, "agent:main:main")
    list(session.run_turn("wipe your soul"))
    result = next(m for m in session.history.messages if m.role == "toolResult").text
    assert "clawd history restore SOUL.md@" in result
    (isolated_home / ".clawd").mkdir(exist_ok=True)
    (isolated_home / ".clawd" / "clawd.json").write_text(json.dumps(
        {"agents": {"defaults": {"workspace": str(rt.workspace)}}}))
    assert cli.main(["history"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("SOUL.md@") and "bytes" in listed
    assert cli.main(["history", "show", "SOUL.md"]) == 0
    assert capsys.readouterr().out == "warm and witty\n"
    assert cli.main(["history", "restore", listed.split()[0]]) == 0
    assert "restored SOUL.md" in capsys.readouterr().out
    assert (rt.workspace / "SOUL.md").read_text() == "warm and witty\n"
    assert cli.main(["history", "restore", "NOTES.md"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
