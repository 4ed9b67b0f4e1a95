"""``clawd memory forget`` and ``/memory forget`` as a user meets them: the lines shown
first, a question on a terminal, ``--yes`` for scripts (refused in one line without either),
and no forgetting from a group session or a read-only workspace."""

from __future__ import annotations

import io
import json

import pytest

from clawd.config import MemorySearch
from clawd.core.events import CommandOutput, ErrorEvent
from clawd.frontends import cli
from clawd.frontends.commands import Chat
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.memory import open_file_index

from conftest import make_runtime
from memory_fakes import write

DAY = "# 2026-11-20\n\n- The safe code is Quillon 7731.\n- Ines arrives in Lisbon on May 14.\n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def home(isolated_home):
    workspace = isolated_home / "ws"
    write(workspace, "memory/2026-11-20.md", DAY)
    write(workspace, "MEMORY.md", "# Memory\n\n- quillon is the brand of the safe\n")
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps(
        {"agents": {"defaults": {"workspace": str(workspace)}}}))
    return workspace


@pytest.mark.slow  # the command line end to end
def test_without_a_terminal_or_yes_it_shows_the_lines_and_refuses_in_one_line(
        home, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["memory", "forget", "quillon"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["to forget (“quillon”): 2 lines in 2 notes",
                                "  MEMORY.md:3  - quillon is the brand of the safe",
                                "  memory/2026-11-20.md:3  - The safe code is Quillon 7731."]
    assert err == ("clawd: not forgotten: there is no terminal to confirm on; pass --yes to "
                   "remove these lines\n")
    assert (home / "memory/2026-11-20.md").read_text() == DAY and DiskBackups(home).versions() == []


@pytest.mark.slow  # the command line end to end
def test_on_a_terminal_it_asks_and_no_keeps_everything(home, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert cli.main(["memory", "forget", "quillon"]) == 0
    out = capsys.readouterr().out
    assert "Remove these 2 lines? [y/N] nothing was forgotten" in out
    assert (home / "memory/2026-11-20.md").read_text() == DAY and DiskBackups(home).versions() == []


@pytest.mark.slow  # the command line end to end
def test_on_a_terminal_yes_removes_and_reindexes(home, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert cli.main(["memory", "forget", "memory/2026-11-20.md#L3"]) == 0
    out = capsys.readouterr().out
    assert "Remove this line? [y/N] forgot 1 line from 1 note" in out
    assert "clawd history restore memory/2026-11-20.md@" in out
    assert "the memory index was updated" in out
    assert (home / "memory/2026-11-20.md").read_text() == DAY.replace(
        "- The safe code is Quillon 7731.\n", "")
    assert cli.main(["memory", "search", "Quillon 7731", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["results"]
    assert [h["path"] for h in found if "7731" in h["snippet"]] == []


@pytest.mark.slow  # the command line end to end
def test_yes_removes_without_asking_and_search_finds_nothing(home, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(["memory", "forget", "QUILLON", "--yes"]) == 0
    assert "forgot 2 lines from 2 notes" in capsys.readouterr().out
    assert "quillon" not in (home / "MEMORY.md").read_text().lower()
    assert cli.main(["memory", "search", "quillon", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == []
    assert cli.main(["history", "list"]) == 0
    listed = capsys.readouterr().out
    assert "MEMORY.md@" in listed and "memory/2026-11-20.md@" in listed


@pytest.mark.slow  # the command line end to end
def test_nothing_matching_says_so(home, capsys):
    assert cli.main(["memory", "forget", "no such thing", "--yes"]) == 0
    assert capsys.readouterr().out.startswith("nothing in the notes (MEMORY.md, memory/) "
                                              "matches “no such thing”")


@pytest.mark.slow  # the command line end to end
def test_a_path_outside_the_workspace_is_refused_in_one_line(home, capsys):
    assert cli.main(["memory", "forget", "../../etc/passwd.md#L1", "--yes"]) == 1
    assert capsys.readouterr().err.count("\n") == 1


# --- /memory forget ------------------------------------------------------------------------

def chat_for(tmp_path, key, **settings):
    runtime = make_runtime(tmp_path, ScriptedProvider(), settings=settings)
    write(runtime.workspace, "memory/2026-11-20.md", DAY)
    runtime.memory = open_file_index("main", runtime.workspace, MemorySearch(), tmp_path / "state",
                                     runtime.storage.sessions_dir)
    return Chat.open(runtime, key), runtime


def said(events):
    events = list(events)
    return ("\n".join(e.text for e in events if isinstance(e, CommandOutput)),
            [e.message for e in events if isinstance(e, ErrorEvent)])


def test_slash_forget_lists_first_and_removes_with_yes(tmp_path):
    chat, runtime = chat_for(tmp_path, "agent:main:main")
    try:
        out, errors = said(chat.handle("/memory forget quillon"))
        assert not errors and "memory/2026-11-20.md:3  - The safe code is Quillon 7731." in out
        assert out.endswith("nothing was removed yet; to remove these: /memory forget --yes "
                            "quillon")
        assert (runtime.workspace / "memory/2026-11-20.md").read_text() == DAY
        out, errors = said(chat.handle("/memory forget --yes quillon"))
        assert not errors and "forgot 1 line from 1 note" in out
        assert "quillon" not in (runtime.workspace / "memory/2026-11-20.md").read_text().lower()
        out, _ = said(chat.handle("/memory search quillon 7731"))
        assert "7731" not in out
    finally:
        runtime.memory.close()


@pytest.mark.parametrize("key", ["agent:main:telegram:group:42", "agent:main:slack:channel:ops"])
def test_a_group_session_may_not_forget(tmp_path, key):
    chat, runtime = chat_for(tmp_path, key)
    try:
        out, errors = said(chat.handle("/memory forget --yes quillon"))
        assert out == "" and len(errors) == 1
        assert errors[0].startswith("forget is not available in a group or channel session")
        assert (runtime.workspace / "memory/2026-11-20.md").read_text() == DAY
        assert DiskBackups(runtime.workspace).versions() == []
    finally:
        runtime.memory.close()


def test_a_read_only_workspace_forgets_nothing(tmp_path):
    chat, runtime = chat_for(tmp_path, "agent:main:main", workspaceAccess="ro")
    try:
        _, errors = said(chat.handle("/memory forget --yes quillon"))
        assert errors and "read-only" in errors[0]
        assert (runtime.workspace / "memory/2026-11-20.md").read_text() == DAY
    finally:
        runtime.memory.close()
