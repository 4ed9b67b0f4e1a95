"""The REPL's side of the session commands, through prompt-toolkit's pipe input: /clear,
the recap when a session is reopened, and exec approval for the rest of the session."""

from __future__ import annotations

import io
import json

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clawd import events as ev
from clawd.commands import Chat
from clawd.providers.scripted import ScriptedProvider
from clawd.render import Renderer
from clawd.repl import repl_loop

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
    chat = Chat(make_runtime(tmp_path, provider), KEY)
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
