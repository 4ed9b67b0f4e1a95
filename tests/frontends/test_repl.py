"""The REPL through prompt-toolkit's pipe input: turns, commands, keys, approval, rendering."""

from __future__ import annotations

import argparse
import io
import json
import re
import threading
from pathlib import Path

import pytest
from prompt_toolkit.application.current import create_app_session
from prompt_toolkit.data_structures import Size
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.vt100 import Vt100_Output

from clawd.config import parse_config
from clawd.core import events as ev
from clawd.core.errors import ProviderSetupError
from clawd.core.messages import TextDelta, Usage
from clawd.frontends import statusline
from clawd.frontends.cli import repl
from clawd.frontends.cli.repl import ExecApproval, SlashCompleter, drive, repl_loop, run_repl
from clawd.frontends.commands import Chat, completions
from clawd.frontends.render import Renderer, brief_arguments
from clawd.frontends.statusline import toolbar_text
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime

KEY = "agent:main:main"
ENTER, ESC_ENTER, CTRL_C, CTRL_D, CTRL_R = "\r", "\x1b\r", "\x03", "\x04", "\x12"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


def run(chat: Chat, keys: str, history: Path, **kw) -> tuple[int, str]:
    out = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        pipe.close()  # the end of the keys is an end of input, not a hang, if one is not read
        code = repl_loop(chat, input=pipe, output=DummyOutput(), history=history, stream=out,
                         **{"color": False, **kw})
    return code, out.getvalue()


def transcript(chat: Chat) -> list[dict]:
    lines = chat.session.transcript.path.read_text().splitlines()
    return [json.loads(line) for line in lines][1:]


@pytest.fixture
def history(tmp_path):
    return tmp_path / "state" / "history" / "main.txt"


def test_message_status_and_quit(tmp_path, history):
    provider = ScriptedProvider(["The answer is forty-two, as scripted."])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    code, out = run(chat, f"what is it?{ENTER}/status{ENTER}/quit{ENTER}", history)
    assert code == 0
    assert "The answer is forty-two, as scripted.\n" in out
    assert "Model:       " in out and "Context:" in out  # /status rendered
    assert out.rstrip().endswith("bye")
    assert out.splitlines()[0].startswith("clawd · agent main · session agent:main:main")
    turn = transcript(chat)
    assert [(e["role"], e["content"][0]["text"]) for e in turn] == [
        ("user", "what is it?"), ("assistant", "The answer is forty-two, as scripted.")]
    saved = history.read_text()
    assert "+what is it?" in saved and "+/status" in saved and "+/quit" in saved
    provider.assert_done()


def chat_args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"agent": None, "session": None, "model": None,
                                 "allow_exec": False, "json": False, **kw})


def test_run_repl_fails_in_one_line_before_any_prompt_without_a_key(tmp_path):
    config = parse_config(json.dumps({"agents": {"defaults": {
        "workspace": str(tmp_path / "ws"), "model": "anthropic/claude-sonnet-4-5"}}}))
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.close()
        with pytest.raises(ProviderSetupError, match="ANTHROPIC_API_KEY"):
            run_repl(config, chat_args())


def test_run_repl_wires_the_agent_session_and_history(tmp_path, isolated_home, capsys):
    config = parse_config(json.dumps({
        "agents": {"defaults": {"workspace": str(tmp_path / "ws"), "model": "local/m"}},
        "models": {"providers": {"local": {"api": "openai-completions",
                                           "baseUrl": "http://127.0.0.1:9/v1"}}}}))
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text(f"/model{ENTER}/quit{ENTER}")
        pipe.close()
        assert run_repl(config, chat_args(session="work")) == 0
    out = capsys.readouterr().out
    assert ("session agent:main:work · model local/m" in out
            and "\nmodel: local/m (from the config)\n" in out)
    history = isolated_home / ".clawd" / "history" / "main.txt"
    assert "+/model" in history.read_text()


def test_ctrl_d_leaves_and_ctrl_c_clears_the_line(tmp_path, history):
    provider = ScriptedProvider(["fine"])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    code, out = run(chat, f"never sent{CTRL_C}sent{ENTER}{CTRL_D}", history, warm=False)
    assert code == 0
    assert [e["content"][0]["text"] for e in transcript(chat)] == ["sent", "fine"]
    assert "never sent" not in history.read_text()


def test_esc_enter_and_paste_make_one_multiline_message(tmp_path, history):
    provider = ScriptedProvider(["one", "two"])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    keys = (f"first{ESC_ENTER}second{ENTER}"
            f"{PASTE_START}pasted a\r\npasted b\npasted c{PASTE_END}{ENTER}{CTRL_D}")
    run(chat, keys, history)
    users = [e["content"][0]["text"] for e in transcript(chat) if e["role"] == "user"]
    assert users == ["first\nsecond", "pasted a\npasted b\npasted c"]


def test_tool_calls_errors_and_approval(tmp_path, history):
    provider = ScriptedProvider([Reply("", [tool("exec", command="echo hi")]),
                                 Reply("", [tool("read", path="missing.md")]), "done"])
    runtime = make_runtime(tmp_path, provider)
    asked = []
    runtime.approve = lambda command: asked.append(command) or False
    chat = Chat.open(runtime, KEY)
    _, out = run(chat, f"go{ENTER}/nosuch{ENTER}{CTRL_D}", history)
    assert asked == ["echo hi"]
    assert "· exec echo hi\n" in out
    assert "· exec failed: error: the user declined to run this command" in out
    assert "· read path='missing.md'\n" in out
    assert "error: unknown command /nosuch (try /help)" in out


def test_exec_approval_reads_the_answer_from_the_terminal():
    for keys, expected in ((f"y{ENTER}", True), (f"YES{ENTER}", True), (f"{ENTER}", False),
                           (f"n{ENTER}", False), (CTRL_D, False)):
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text(keys)
            assert ExecApproval()("rm -rf build") is expected, keys


def test_exec_approval_question_says_how_long_always_lasts():
    # "a" holds for the process (a /new does not end it), so the question says so
    out = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(
            input=pipe, output=Vt100_Output(out, lambda: Size(rows=24, columns=120))):
        pipe.send_text(f"n{ENTER}")
        assert ExecApproval()("ls") is False
    question = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "a = always, until clawd exits" in question
    assert "in this session" not in question


def test_ctrl_c_while_rendering_is_thrown_into_the_turn(tmp_path):
    provider = ScriptedProvider(["a long reply that streams in several pieces"], chunk_size=4)
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    seen: list = []

    def render(event) -> bool:
        seen.append(event)
        if isinstance(event, TextDelta) and sum(isinstance(e, TextDelta) for e in seen) == 2:
            raise KeyboardInterrupt
        return False

    assert drive(chat.handle("talk"), render) is False
    assert isinstance(seen[-1], ev.TurnDone) and seen[-1].aborted
    assert any(isinstance(e, ev.Notice) for e in seen)
    last = transcript(chat)[-1]
    assert last["role"] == "assistant" and last.get("aborted")
    assert last["content"][0]["text"] == "a long reply that streams in several pieces"[:8]


def test_drive_stops_on_quit_and_survives_an_unhandled_interrupt():
    def quitting():
        yield ev.CommandOutput("quit", "bye", quit=True)

    def interrupted():
        yield ev.Notice("working")
        raise KeyboardInterrupt

    out = io.StringIO()
    assert drive(quitting(), Renderer(out, color=False).event) is True
    assert drive(interrupted(), Renderer(out, color=False).event) is False
    assert out.getvalue() == "bye\n· working\n· interrupted\n"


@pytest.mark.parametrize("events, expected", [
    ([TextDelta("Hel"), TextDelta("lo"), ev.TurnDone("Hello")], "Hello\n"),
    ([TextDelta("Let me look."), ev.ToolStarted("1", "read", {"path": "a.md"}),
      ev.ToolFinished("1", "read", False, "x"), TextDelta("Done"), ev.TurnDone("Done")],
     "Let me look.\n· read path='a.md'\nDone\n"),
    ([ev.Flushed(files=["memory/2026-11-22.md"]), ev.Flushed(skipped="read-only")],
     "· memory flush: memory/2026-11-22.md\n· memory flush: read-only\n"),
    ([ev.Compacted(150_000, 30_000, "single")],
     "· compacted: 150,000 → 30,000 tokens (summarised in one request)\n"),
    ([TextDelta("partial"), ev.Notice("reply interrupted"), ev.TurnDone("", aborted=True)],
     "partial\n· reply interrupted\n"),
    ([ev.ErrorEvent("boom")], "error: boom\n"),
    ([ev.ToolFinished("1", "exec", True, "error: timed out\nmore")],
     "· exec failed: error: timed out\n"),
])
def test_renderer_plain(events, expected):
    out = io.StringIO()
    renderer = Renderer(out, color=False)
    for event in events:
        renderer.event(event)
    assert out.getvalue() == expected


def test_renderer_colors_and_json():
    out = io.StringIO()
    Renderer(out, color=True).event(ev.ErrorEvent("boom"))
    assert out.getvalue() == "\x1b[31merror: boom\x1b[0m\n"
    out = io.StringIO()
    renderer = Renderer(out, as_json=True)
    renderer.event(TextDelta("hi"))
    renderer.event(ev.TurnDone("hi"))
    reply = json.loads(out.getvalue().splitlines()[0])
    assert reply == {"type": "reply", "text": "hi", "aborted": False}


def test_renderer_markdown_on_a_colour_terminal():
    out = io.StringIO()
    renderer = Renderer(out, color=True, markdown=True, width=20)
    for event in [TextDelta("# Plan\nLet me **look** at"), TextDelta(" it."),
                  ev.ToolStarted("1", "read", {"path": "a.md"}), TextDelta("- one two three"),
                  TextDelta(" four five"), ev.TurnDone("")]:
        renderer.event(event)
    assert out.getvalue() == ("\x1b[0;1mPlan\x1b[0m\nLet me \x1b[0;1mlook\x1b[0m at it.\n"
                              "\x1b[2m· read path='a.md'\x1b[0m\n"
                              "• one two three four\n  five\n")


@pytest.mark.parametrize("options", [{"color": False, "markdown": True},
                                     {"color": True, "markdown": False}])
def test_renderer_writes_raw_text_without_colour_or_markdown(options):
    out = io.StringIO()
    renderer = Renderer(out, width=20, **options)
    renderer.event(TextDelta("**a** - b\n| c |"))
    renderer.event(ev.TurnDone(""))
    assert out.getvalue() == "**a** - b\n| c |\n"


def test_repl_renders_replies_as_markdown_with_colour(tmp_path, history):
    provider = ScriptedProvider(["Use `ls` and **then** this:\n```sh\nls -la\n```"])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    _, out = run(chat, f"how?{ENTER}{CTRL_D}", history, color=True, width=40)
    assert "Use \x1b[0;36mls\x1b[0m and \x1b[0;1mthen\x1b[0m this:\n" in out
    assert "\x1b[0;2m```sh\x1b[0m\n" in out and "\x1b[0;2m```\x1b[0m\n" in out


COMMANDS = {"/compact": (), "/context": ("list", "detail"), "/help": (),
            "/memory": ("search", "show", "add", "forget", "status"), "/quit": ()}


@pytest.mark.parametrize("text, expected", [
    ("/", ["/compact", "/context", "/help", "/memory", "/quit"]),
    ("/co", ["/compact", "/context"]),
    ("/HE", ["/help"]),
    ("/memory ", ["add", "forget", "search", "show", "status"]),
    ("/memory s", ["search", "show", "status"]),
    ("/MEMORY SE", ["search"]),
    ("/context ", ["detail", "list"]),
    ("/quit ", []),
    ("/memory search wor", []),
    ("/nosuch ", []),
    ("hello /he", []),
    ("/memory\ns", []),
    ("", []),
])
def test_slash_completion(text, expected):
    completer = SlashCompleter(COMMANDS)
    found = [c.text for c in completer.get_completions(Document(text), None)]
    assert found == [word + " " for word in expected]


def test_completion_comes_from_the_command_registry():
    found = completions()
    assert found["/memory"] == ("search", "show", "add", "forget", "status")
    assert found["/context"] == ("list", "detail")
    assert found["/status"] == () and list(found) == sorted(found)


def test_tab_completes_a_command_then_its_subcommand(tmp_path, history, monkeypatch):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider([])), KEY)
    with create_pipe_input() as pipe:
        # the next keys go in once the completions for what is typed are known
        # Tab puts the space after the command: "sta" typed next is its subcommand
        then = {"/mem": "\tsta", "/memory sta": f"\t{ENTER}{CTRL_D}"}

        class Completer(SlashCompleter):
            def get_completions(self, document, complete_event):
                yield from super().get_completions(document, complete_event)
                if document.text_before_cursor in then:
                    pipe.send_text(then.pop(document.text_before_cursor))

        monkeypatch.setattr(repl, "SlashCompleter", Completer)
        give_up = threading.Timer(20, pipe.send_text, [f"{CTRL_C}{CTRL_D}"])
        give_up.start()
        pipe.send_text("/mem")
        try:
            repl_loop(chat, input=pipe, output=DummyOutput(), history=history,
                      stream=io.StringIO(), color=False, warm=False)
        finally:
            give_up.cancel()
    assert history.read_text().splitlines()[-1].rstrip() == "+/memory status"


def test_ctrl_r_finds_an_earlier_message_and_enter_takes_it(tmp_path, history):
    history.parent.mkdir(parents=True)
    history.write_text("\n# earlier\n+the first message\n\n# earlier\n+another one\n")
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider(["again"])), KEY)
    run(chat, f"{CTRL_R}first{ENTER}{ENTER}{CTRL_D}", history)
    assert [e["content"][0]["text"] for e in transcript(chat)] == ["the first message", "again"]


def test_help_lists_the_keys_in_the_repl_only(tmp_path, history):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider([])), KEY)
    _, out = run(chat, f"/help{ENTER}{CTRL_D}", history)
    assert "/memory search QUERY | show | add TEXT | forget [--yes] TEXT | status" in out
    assert "\nKeys:\n" in out
    flat = " ".join(out.split()) + " "  # descriptions are wrapped to the terminal's width
    for key, does in repl.KEYS:
        assert f" {key} {does} " in flat, key
    for name in ("Enter", "Esc Enter", "Tab", "Ctrl-C", "Ctrl-D", "Ctrl-R"):
        assert f"\n{name}" in out
    one_shot = Chat.open(make_runtime(tmp_path / "other", ScriptedProvider([])), KEY)
    (text,) = [e.text for e in one_shot.handle("/help")]
    assert "/quit" in text and "Keys:" not in text


@pytest.mark.parametrize("name, arguments, expected", [
    ("exec", {"command": "ls  -la\n| head"}, "ls -la | head"),
    ("write", {"path": "a.md", "content": "secret text"}, "path='a.md'"),
    ("edit", {"path": "a.md", "oldText": "x", "newText": "y"}, "path='a.md'"),
    ("read", {"path": "p" * 200}, "path='" + "p" * 91 + "..."),
])
def test_brief_arguments(name, arguments, expected):
    assert brief_arguments(name, arguments) == expected


@pytest.mark.parametrize("used, window, expected", [
    (None, 200_000, "context …"),
    (50_000, 200_000, "context 25% (50,000 / 200,000)"),
    (0, 0, "context 0% (0 / 0)"),
])
def test_toolbar_text(used, window, expected):
    text = toolbar_text("openai/gpt-4o", used, window)
    assert text.startswith(" openai/gpt-4o · ") and expected in text


@pytest.mark.parametrize("width, expected", [
    (140, " anthropic/claude-sonnet-4-5 · context 25% (50,000 / 200,000) · last turn 48,210 "
          "in, 1,234 out · $0.1634 · Esc+Enter: new line · /help "),
    (120, " anthropic/claude-sonnet-4-5 · context 25% (50,000 / 200,000) · last turn 48,210 "
          "in, 1,234 out · $0.1634 · /help "),
    (80, " anthropic/claude-sonnet-4-5 · context 25% · 48.2k in 1.2k out · $0.1634 "),
    (70, " anthropic/claude-sonnet-4-5 · 25% · 48.2k in 1.2k out · $0.1634 "),
    (60, " claude-sonnet-4-5 · 25% · 48.2k in 1.2k out · $0.1634 "),
    (40, " claude-sonnet-4-5 · 25% · $0.1634 "),
    (30, " claude-sonnet-4-5 · 25% "),
    (20, " claude-sonnet-4-5 "),
    (12, " claude-so… "),
])
def test_toolbar_fits_narrow_terminals(width, expected):
    text = toolbar_text("anthropic/claude-sonnet-4-5", 50_000, 200_000, width=width,
                        turn=(48_210, 1_234), cost=0.1634)
    assert text == expected and len(text) <= width


@pytest.mark.parametrize("turn, cost, expected", [
    (None, None, " m · context 1% (2,000 / 200,000) · Esc+Enter: new line · /help "),
    ((999, 1_000_000), 0.0, " m · context 1% (2,000 / 200,000) · last turn 999 in, "
                            "1,000,000 out · $0 · /help "),
    ((120, 3), 1234.5, " m · context 1% (2,000 / 200,000) · last turn 120 in, 3 out · "
                       "$1234.50 · /help "),
])
def test_toolbar_turn_and_cost(turn, cost, expected):
    assert toolbar_text("m", 2_000, 200_000, width=90, turn=turn, cost=cost) == expected


class ScreenOutput(Vt100_Output):
    """A terminal that is a string: prompt-toolkit draws the toolbar when it knows how many
    rows are below the cursor."""

    def __init__(self):
        super().__init__(io.StringIO(), lambda: Size(rows=24, columns=100), term="xterm")

    def get_rows_below_cursor_position(self) -> int:
        return 20


PRICED = {"models": {"providers": {"local": {
    "api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
    "models": [{"id": "m", "cost": {"input": 3, "output": 15, "cacheRead": 0.3,
                                    "cacheWrite": 3.75}}]}}}}


@pytest.mark.parametrize("config, cost", [(PRICED, " · $0.0169 · "), ({}, " · /help ")])
def test_status_line_shows_the_last_turn_tokens_and_cost(tmp_path, history, monkeypatch,
                                                         config, cost):
    provider = ScriptedProvider([Reply("ok", usage=Usage(1000, 200, 30_000, 500))])
    runtime = make_runtime(tmp_path, provider, settings={"model": "local/m"})
    runtime.config = parse_config(json.dumps(config))
    chat = Chat.open(runtime, KEY)
    shown: list[str] = []
    with create_pipe_input() as pipe:
        def spy(*args, **kw) -> str:
            shown.append(toolbar_text(*args, **kw))
            if kw.get("turn"):
                pipe.send_text(CTRL_D)  # seen after the turn: leave
            return shown[-1]

        monkeypatch.setattr(statusline, "toolbar_text", spy)
        give_up = threading.Timer(20, pipe.send_text, [CTRL_D])
        give_up.start()
        pipe.send_text(f"hi{ENTER}/status{ENTER}")
        try:
            repl_loop(chat, input=pipe, output=ScreenOutput(), history=history,
                      stream=io.StringIO(), color=False)
        finally:
            give_up.cancel()
    assert shown[0].startswith(" local/m · context ") and "last turn" not in shown[0]
    # 31,500 read: 1,000 fresh + 30,000 from the cache + 500 written to it; a command after
    # the turn (/status) leaves the turn's figures in place
    assert f"last turn 31,500 in, 200 out{cost}" in shown[-1]


@pytest.mark.parametrize("no_color", ["1", ""])
def test_a_terminal_with_no_color_set_gets_plain_text(monkeypatch, no_color):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("NO_COLOR", no_color)
    out = Terminal()
    renderer = Renderer(out, markdown=True, width=20)
    renderer.event(ev.ErrorEvent("boom"))
    renderer.event(TextDelta("**a** b"))
    renderer.event(ev.TurnDone(""))
    if no_color:  # no-color.org: any non-empty value
        assert out.getvalue() == "error: boom\n**a** b\n"
    else:
        assert out.getvalue().startswith("\x1b[31merror: boom\x1b[0m\n")


class _Screen:
    """Two streams that are one terminal, as stdout and stderr of ``clawd chat -m``."""

    def __init__(self, tty: bool = True):
        self.text, self.tty = "", tty

    def stream(self):
        screen = self

        class Stream(io.StringIO):
            def write(self, text):
                screen.text += text
                return len(text)

            def isatty(self):
                return screen.tty

        return Stream()


@pytest.mark.parametrize("tty", [True, False])
def test_a_notice_after_the_reply_is_on_a_line_of_its_own(tty):
    """``-m``: the reply on stdout, a notice on stderr; on one terminal they shared a line."""
    screen = _Screen(tty)
    out, err = screen.stream(), screen.stream()
    renderer = Renderer(out, side=err, color=False)
    for event in (TextDelta("Here is the answer"), ev.Notice("the reply hit the output limit"),
                  ev.TurnDone("Here is the answer", session_key="k")):
        renderer.event(event)
    if tty:
        assert screen.text == "Here is the answer\n· the reply hit the output limit\n"
    else:  # piped: stdout holds the reply as written, its newline at the end
        assert screen.text == "Here is the answer· the reply hit the output limit\n\n"


def test_the_status_line_forgets_the_old_session_s_turn_after_new(tmp_path):
    provider = ScriptedProvider([Reply("ok", usage=Usage(1000, 200, 0, 0))])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    status = statusline.Status(chat)
    for line, expected in (("hi", (1000, 200)), ("/status", (1000, 200)), ("/new", None)):
        status.start_turn()
        list(chat.handle(line))
        status.end_turn()
        assert status.turn == expected, line
