"""The interactive front end: a prompt-toolkit REPL that renders the loop's events as they come.

``run_repl`` wires a ``Chat`` for the terminal; ``repl_loop`` is the prompt loop itself and
takes the chat, the prompt-toolkit input/output and the text stream replies go to, so tests
drive it through a pipe. Events are rendered by ``clawd.frontends.render.Renderer``; ``banner`` and
the status line (``clawd.frontends.statusline``) are the REPL's own text; a reopened session starts
with its last few exchanges (``format_recap``), and ``/clear`` clears the screen. Enter
sends, Esc+Enter (Alt+Enter) starts a new line, a bracketed paste stays one message; Ctrl-C
while a reply streams is thrown into the turn (which keeps the partial reply), Ctrl-C at the
prompt clears the line, Ctrl-D leaves; ``KEYS`` says so to ``/help``. Tab completes command
words and their subcommands, both from the command registry, from the text as it is (also
when it arrived in the same burst as the Tab).
While a turn waits (for the model's first token, a flush, a compaction) a dim line says on
what, for how long, with the model and the context share (``clawd.frontends.waiting``).
``ExecApproval`` asks before each shell command the model wants to run (``a``: not again in
this process). The provider SDK and the tokenizer load in a background thread once the first
prompt is on screen, so the prompt appears without waiting for either.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import create_app_session
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.filters import is_searching
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.shortcuts import clear

from clawd.core.events import ClearScreen
from clawd.frontends.commands import Chat, completions
from clawd.frontends.render import DIM, YELLOW, Renderer, drive
from clawd.frontends.reports import format_recap
from clawd.frontends.statusline import Status
from clawd.frontends.waiting import WaitingLine

log = logging.getLogger(__name__)

PROMPT = "› "


# --- rendering ------------------------------------------------------------------------------

def banner(agent_id: str, key: str, model: str) -> str:
    return f"clawd · agent {agent_id} · session {key} · model {model} · /help for commands"


# --- input ----------------------------------------------------------------------------------

class SlashCompleter(Completer):
    """Completes a command word at the start of a line beginning with ``/``, then its
    subcommand (``commands``: each command word and its subcommands), each with a space
    after it (``/mem`` Tab ``s`` is ``/memory s``)."""

    def __init__(self, commands: Mapping[str, Sequence[str]]):
        self.commands = commands

    def get_completions(self, document, complete_event):
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        name, space, rest = text.partition(" ")
        if not space:
            words, typed = sorted(self.commands), text
        elif " " not in rest:
            words, typed = sorted(self.commands.get(name.lower(), ())), rest
        else:
            return
        for word in words:  # with the space after it: the next word can be typed at once
            if word.startswith(typed.lower()):
                yield Completion(word + " ", start_position=-len(typed), display=word)


# The keys and what they do, for /help: Enter and Esc+Enter are bound below, the others are
# prompt-toolkit's own (Emacs mode) or the loop's.
KEYS = [
    ("Enter", "send the message"),
    ("Esc Enter, Alt+Enter", "a new line in the message (a paste stays one message)"),
    ("Tab", "complete a /command, then its subcommand"),
    ("Up, Down", "earlier messages (in a message of several lines: the line above, below)"),
    ("Ctrl-R", "search earlier messages (Enter takes the match)"),
    ("Ctrl-C", "stop the reply (what came is kept); at the prompt: clear the line"),
    ("Ctrl-D", "leave (on an empty line)"),
    ("Ctrl-L", "clear the screen"),
]


def key_bindings(completer: Completer | None = None) -> KeyBindings:
    keys = KeyBindings()

    if completer is not None:
        @keys.add("tab", filter=~is_searching)
        def _complete(event) -> None:
            """Tab completes from the text as it is now, even when it arrived in the same
            burst (before completion while typing had run): one match is taken, and Tab
            again keeps it; several open the menu, and Tab moves through it."""
            buffer = event.current_buffer
            state = buffer.complete_state
            if state is not None and state.complete_index is not None:
                buffer.complete_next()  # moving through a menu already open
                return
            found = list(completer.get_completions(
                buffer.document, CompleteEvent(completion_requested=True)))
            if len(found) == 1:
                buffer.apply_completion(found[0])
            elif found:
                buffer.start_completion(select_first=True)

    @keys.add("enter", filter=~is_searching)  # while searching (Ctrl-R), Enter takes the match
    def _submit(event) -> None:
        event.current_buffer.validate_and_handle()

    @keys.add("escape", "enter")  # what terminals send for Alt+Enter too
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    return keys


class ExecApproval:
    """The runtime's ``approve`` callback: asks before the model runs a shell command, or
    calls an MCP server's tool that asks first (``clawd.mcp.approval``: its name and
    arguments are what is shown).

    y/yes runs it; a/always runs it and every later command until clawd exits, without
    asking (remembered by this object only, never written down); anything else declines.
    Ctrl-C here propagates: it cancels the reply, and the loop records the call as
    interrupted.
    """

    def __init__(self) -> None:
        self.always = False

    def __call__(self, command: str) -> bool:
        if self.always:
            return True
        try:
            answer: str = PromptSession().prompt(
                f"run `{command}`? [y/N, a = always, until clawd exits] ").strip().lower()
        except EOFError:
            return False
        self.always = answer in ("a", "always")
        return self.always or answer in ("y", "yes")


def history_path(state: Path, agent_id: str) -> Path:
    return state / "history" / f"{agent_id}.txt"


# --- the loop -------------------------------------------------------------------------------

class _Warmup:
    """Builds the provider (importing its SDK) and measures the context off the main thread,
    started once the first prompt is drawn; joined before anything uses the session."""

    def __init__(self, status: Status, on_done: Callable[[], None]):
        self.status, self.on_done = status, on_done
        self.thread: threading.Thread | None = None

    def start(self, *_: Any) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="clawd-warmup", daemon=True)
            self.thread.start()
            # indexing can take a while: it runs on its own and is never waited for
            self.status.chat.start_memory_sync()

    def _run(self) -> None:
        try:
            _ = self.status.chat.session.provider
        except Exception:  # noqa: BLE001 - the turn reports it, as an error event
            log.debug("provider not ready", exc_info=True)
        self.status.refresh()
        self.on_done()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


def repl_loop(chat: Chat, *, input: Any = None, output: Any = None,
              history: Path | History | None = None, stream: TextIO | None = None,
              color: bool | None = None, as_json: bool = False, deltas: bool = False,
              warm: bool = True, width: int | None = None) -> int:
    """Prompt, run, render, until ``/quit`` or Ctrl-D; returns the exit code.

    ``input``/``output`` are prompt-toolkit's (a pipe and ``DummyOutput`` in tests); replies
    go to ``stream`` (stdout), as Markdown wrapped to ``width`` (the terminal's if not given)
    when ``color`` is on (a terminal's default). ``history`` is a file path or a
    prompt-toolkit ``History``.
    """
    with create_app_session(input=input, output=output):
        renderer = Renderer(stream, color=color, as_json=as_json, deltas=deltas,
                            markdown=True, width=width)
        return _loop(chat, history, renderer, warm)


def _loop(chat: Chat, history: Path | History | None, renderer: Renderer, warm: bool) -> int:
    if isinstance(history, Path):
        history.parent.mkdir(parents=True, exist_ok=True)
        history = FileHistory(str(history))
    status = Status(chat)
    chat.keys = KEYS
    chat.width = lambda: shutil.get_terminal_size().columns
    completer = SlashCompleter(completions())
    session: PromptSession = PromptSession(
        history=history or InMemoryHistory(), completer=completer,
        complete_while_typing=True, key_bindings=key_bindings(completer), multiline=True,
        prompt_continuation=lambda width, line, wrap: " " * width,
        bottom_toolbar=status.text, enable_history_search=False)
    warmup = _Warmup(status, session.app.invalidate)
    if warm:
        session.app.after_render += warmup.start
    else:
        status.refresh()
    renderer.line(banner(chat.runtime.agent_id, chat.session.key, chat.session.model_ref),
                  DIM)
    if not renderer.as_json and (recap := format_recap(chat.session.history)):
        renderer.line(recap, DIM)  # a reopened session: where it left off

    waiting = _waiting_line(renderer, status)

    def render(event: Any) -> bool:
        if waiting is not None:
            waiting.before(event)
        if isinstance(event, ClearScreen):
            clear()  # through prompt-toolkit's output: the real terminal, or a test's
            return False
        return renderer.event(event)

    inbox = _inbox(chat)
    while True:
        for text in inbox():  # what scheduled jobs delivered here (``--deliver cli``)
            renderer.line(text, YELLOW)
        try:
            line = session.prompt(PROMPT)
        except KeyboardInterrupt:
            continue  # the line is cleared; Ctrl-D leaves
        except EOFError:
            return 0
        if not line.strip():
            continue
        try:
            warmup.join()
            status.start_turn()
            try:
                if drive(chat.handle(line), render):
                    return 0
            finally:
                if waiting is not None:
                    waiting.stop()
            status.end_turn()
        except KeyboardInterrupt:  # outside a turn's own handling: never the end of the REPL
            renderer.line("· interrupted", YELLOW)


def _inbox(chat: Chat) -> Callable[[], list[str]]:
    """The runs delivered to the REPL (``cli``) since the last prompt; a store that cannot
    be read is left for the next prompt (logged), never an end of the chat."""
    from datetime import datetime, timezone

    from clawd.scheduler.delivery import take_cli
    from clawd.storage import open_jobs

    def take() -> list[str]:
        try:
            return take_cli(open_jobs(chat.runtime.config), chat.runtime.agent_id,
                            datetime.now(timezone.utc))
        except Exception as exc:  # noqa: BLE001 - the chat goes on without the reminders
            log.warning("scheduled runs for this prompt cannot be read: %s", exc)
            return []

    return take


def _waiting_line(renderer: Renderer, status: Status) -> WaitingLine | None:
    """The line that says what a turn is waiting for (a terminal only, not ``--json``)."""
    stream = renderer.stream
    if renderer.as_json or not stream.isatty():
        return None
    return WaitingLine(stream, status=status.brief, at_line_start=lambda: not renderer.midline,
                       width=lambda: shutil.get_terminal_size().columns,
                       color=renderer.color)


def run_repl(config: Any, args: Any) -> int:
    """``clawd chat`` on a terminal."""
    from clawd.core.paths import state_dir
    from clawd.frontends.cli.chat import open_chat

    # the SDK is imported in the warm-up, after the prompt is on screen
    with open_chat(config, args, approve=ExecApproval(), background=True) as chat:
        if chat.runtime.mcp is not None:  # a server's question during a call is put to you
            from clawd.frontends.questions import TerminalQuestions

            questions = TerminalQuestions()
            chat.runtime.mcp.elicit, chat.runtime.mcp.elicit_url = questions, questions.link
        return repl_loop(chat, history=history_path(state_dir(), chat.runtime.agent_id),
                         as_json=bool(getattr(args, "json", False)),
                         deltas=bool(getattr(args, "stream", False)))
