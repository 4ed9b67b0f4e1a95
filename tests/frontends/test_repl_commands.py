"""The REPL's side of the session commands, through prompt-toolkit's pipe input: /clear,
the recap when a session is reopened, and exec approval for the rest of the session."""

from __future__ import annotations

import argparse
import io
import json

from prompt_toolkit.application.current import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clawd.config import parse_config
from clawd.core import events as ev
from clawd.frontends.cli.repl import ExecApproval, repl_loop, run_repl
from clawd.frontends.commands import Chat
from clawd.frontends.render import Renderer
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime

KEY = "agent:main:main"
ENTER, CTRL_D = "\r", "\x04"


class Screen(DummyOutput):
    """An output that counts how often the screen was erased."""

    def __init__(self) -> None:
        super().__init__()
        self.erased = 0

    def erase_screen(self) -> None:
        self.erased += 1


def run(chat: Chat, keys: str, tmp_path, output=None, **kw) -> str:
    out = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()
        repl_loop(chat, input=pipe, output=output or DummyOutput(),
                  history=tmp_path / "history.txt", stream=out, color=False, warm=False, **kw)
    return out.getvalue()


def test_clear_clears_the_screen_and_nothing_else(tmp_path):
    provider = ScriptedProvider(["one"])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    screen = Screen()
    out = run(chat, f"first{ENTER}/clear{ENTER}{CTRL_D}", tmp_path, output=screen)
    assert screen.erased == 1
    assert out.splitlines()[1:] == ["one"]  # the banner, the reply, and no line for /clear
    assert [m.text for m in chat.session.history.messages] == ["first", "one"]
    # -m and --script runs have no screen: nothing is written, in text or JSON
    for as_json in (False, True):
        stream = io.StringIO()
        Renderer(stream, as_json=as_json).event(ev.ClearScreen())
        assert stream.getvalue() == ""


def test_a_reopened_session_starts_with_its_last_exchanges(tmp_path):
    provider = ScriptedProvider(["one", "two", Reply("", [tool("read", path="a.md")]),
                                 "the answer " * 20, "five"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    assert run(chat, CTRL_D, tmp_path).splitlines()[1:] == []  # a new session: no recap
    for text in ("first", "second", "read a.md", "fourth"):
        list(chat.handle(text))
    chat.session.close()
    reopened = Chat.open(runtime, KEY)
    out = run(reopened, CTRL_D, tmp_path).splitlines()
    assert out[1:] == [
        "· where this session left off (earlier turns not shown):",
        "  you: second",
        "  assistant: two",
        "  you: read a.md",
        "  assistant: " + ("the answer " * 20)[:79].rstrip() + "…",
        "  you: fourth",
        "  assistant: five"]
    assert "left off" not in run(reopened, CTRL_D, tmp_path, as_json=True)


def test_resume_shows_where_the_resumed_session_left_off(tmp_path, isolated_home, capsys):
    config = parse_config(json.dumps({
        "agents": {"defaults": {"workspace": str(tmp_path / "ws"), "model": "local/m"}},
        "models": {"providers": {"local": {"api": "openai-completions",
                                           "baseUrl": "http://127.0.0.1:9/v1"}}}}))
    runtime = make_runtime(tmp_path, ScriptedProvider(["one", "two"]))
    runtime.storage.sessions_dir = isolated_home / ".clawd" / "agents" / "main" / "sessions"
    chat = Chat.open(runtime, KEY)
    list(chat.handle("the first session"))
    first = chat.session.entry["sessionId"]
    list(chat.handle("/new"))
    list(chat.handle("the second session"))
    chat.session.close()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text(f"/quit{ENTER}")
        pipe.close()
        args = argparse.Namespace(agent=None, session=None, model=None, allow_exec=False,
                                  json=False, resume=first)
        assert run_repl(config, args) == 0
    out = capsys.readouterr().out
    assert "  you: the first session\n  assistant: one\n" in out
    assert "the second session" not in out


def test_exec_approved_always_is_not_asked_again_in_this_session(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("exec", command="echo one")]),
                                 Reply("", [tool("exec", command="echo two")]), "done",
                                 Reply("", [tool("exec", command="echo three")]), "ok"])
    runtime = make_runtime(tmp_path, provider)
    runtime.approve = approval = ExecApproval()
    chat = Chat.open(runtime, KEY)
    # one answer, "a", for all three commands: "next" is sent as a message, not an answer
    run(chat, f"go{ENTER}a{ENTER}next{ENTER}{CTRL_D}", tmp_path)
    results = [m for m in chat.session.history.messages if m.role == "toolResult"]
    assert [(m.text.split()[0], m.is_error) for m in results] == [
        ("one", False), ("two", False), ("three", False)]
    assert [m.text for m in chat.session.history.messages if m.role == "user"] == [
        "go", "next"]
    assert approval.always and not ExecApproval().always  # the next process asks again
    provider.assert_done()
