"""The interactive front end: a prompt-toolkit REPL that renders the loop's events as they come.

``run_repl`` wires a ``Chat`` for the terminal; ``repl_loop`` is the prompt loop itself and
takes the chat, the prompt-toolkit input/output and the text stream replies go to, so tests
drive it through a pipe. Events are rendered by ``clawd.render.Renderer``; ``banner`` and
``toolbar_text`` (the status line, fitted to the terminal's width) are the REPL's own text; a
reopened session starts with its last few exchanges (``format_recap``), and ``/clear`` clears
the screen. Enter sends, Esc+Enter (Alt+Enter) starts a new line, a bracketed paste stays one
message; Ctrl-C while a reply streams is thrown into the turn (which keeps the partial reply),
Ctrl-C at the prompt clears the line, Ctrl-D leaves; ``KEYS`` says so to ``/help``. Tab
completes command words and their subcommands, both from the command registry.
While a turn waits (for the model's first token, a flush, a compaction) a dim line says on
what, for how long, with the model and the context share (``clawd.waiting``).
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
from prompt_toolkit.application.current import create_app_session, get_app
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.filters import is_searching
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.shortcuts import clear
from prompt_toolkit.utils import get_cwidth

from clawd.commands import Chat, completions
from clawd.config import ModelCost
from clawd.events import ClearScreen
from clawd.providers.registry import model_info
from clawd.render import DIM, YELLOW, Renderer, drive
from clawd.reports import format_recap
from clawd.waiting import WaitingLine

log = logging.getLogger(__name__)

PROMPT = "› "


# --- rendering ------------------------------------------------------------------------------

def banner(agent_id: str, key: str, model: str) -> str:
    return f"clawd · agent {agent_id} · session {key} · model {model} · /help for commands"


def _tokens(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 999_500 else f"{n / 1000:.1f}k" if n >= 1000 \
        else str(n)


def _dollars(cost: float) -> str:
    return "$0" if cost == 0 else f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


# What goes first when the status line is too wide: each step shortens or drops one part.
_ORDER = ("model", "context", "turn", "cost", "keys", "help")
_NARROWING = ("keys", "context", "turn", "help", "context", "model", "turn", "cost", "context")


def toolbar_text(model: str, used: int | None, window: int, *, width: int = 80,
                 turn: tuple[int, int] | None = None, cost: float | None = None) -> str:
    """The status line: the model, how full the context window is, the last turn's tokens
    (read, written) and cost, and key hints; fitted to ``width`` by shortening or dropping
    the less useful parts first, then the provider's name, the model's last."""
    pct = 100.0 * used / window if window and used is not None else 0.0
    forms = {
        "model": [model, model.partition("/")[2] or model],
        "context": ["context …", ""] if used is None else
                   [f"context {pct:.0f}% ({used:,} / {window:,})", f"context {pct:.0f}%",
                    f"{pct:.0f}%", ""],
        "turn": [""] if turn is None else
                [f"last turn {turn[0]:,} in, {turn[1]:,} out",
                 f"{_tokens(turn[0])} in {_tokens(turn[1])} out", ""],
        "cost": [""] if cost is None else [_dollars(cost), ""],
        "keys": ["Esc+Enter: new line", ""],
        "help": ["/help", ""],
    }
    level = dict.fromkeys(forms, 0)

    def text() -> str:
        return " " + " · ".join(f for name in _ORDER if (f := forms[name][level[name]])) + " "

    for part in _NARROWING:
        if get_cwidth(text()) <= width:
            break
        level[part] = min(level[part] + 1, len(forms[part]) - 1)
    line = text()
    while get_cwidth(line) > width and len(line) > 2:  # the model's name alone is too long
        line = line[:-3] + "… "
    return line


# --- input ----------------------------------------------------------------------------------

class SlashCompleter(Completer):
    """Completes a command word at the start of a line beginning with ``/``, then its
    subcommand (``commands``: each command word and its subcommands)."""

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
        for word in words:
            if word.startswith(typed.lower()):
                yield Completion(word, start_position=-len(typed))


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


def key_bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter", filter=~is_searching)  # while searching (Ctrl-R), Enter takes the match
    def _submit(event) -> None:
        event.current_buffer.validate_and_handle()

    @keys.add("escape", "enter")  # what terminals send for Alt+Enter too
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    return keys


class ExecApproval:
    """The runtime's ``approve`` callback: asks before the model runs a shell command.

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

_USAGE = ("cumulativeInputTokens", "cumulativeOutputTokens", "cumulativeCacheReadTokens",
          "cumulativeCacheWriteTokens")


class _Status:
    """What the status line shows, measured before and after each turn, never per keypress:
    the context size, and the last turn's tokens and cost (from the session's usage counters,
    so a memory flush in the turn counts too)."""

    def __init__(self, chat: Chat):
        self.chat = chat
        self.used: int | None = chat.session.entry.get("contextUsedTokens") or None
        self.turn: tuple[int, int] | None = None
        self.cost: float | None = None
        self._before = self._usage()

    def _usage(self) -> tuple[str | None, list[int]]:
        entry = self.chat.session.entry
        return entry.get("sessionId"), [int(entry.get(name) or 0) for name in _USAGE]

    def start_turn(self) -> None:
        self._before = self._usage()

    def end_turn(self) -> None:
        """The tokens the line just handled used, if it called the model."""
        session, after = self._usage()
        # after /new or /reset, the counters are the new session's, from zero
        before = self._before[1] if session == self._before[0] else [0] * len(_USAGE)
        fresh, output, read, written = (a - b for a, b in zip(after, before))
        if fresh or output or read or written:
            self.turn = (fresh + read + written, output)
            price = self._price()
            self.cost = price.dollars(fresh, output, read, written) if price else None
        self.refresh()

    def _price(self) -> ModelCost | None:
        try:
            info = model_info(self.chat.runtime.config, self.chat.session.model_ref)
        except Exception:  # noqa: BLE001 - no price is shown then
            return None
        return info.cost if info else None

    def refresh(self) -> None:
        try:
            self.used = self.chat.session.context_tokens()
        except Exception:  # noqa: BLE001 - a status line must not end the REPL
            log.debug("context size unavailable", exc_info=True)

    def brief(self) -> str:
        """The model and how full the context is, for the waiting line."""
        session = self.chat.session
        window = session.budget.context_window
        if self.used is None or not window:
            return session.model_ref
        return f"{session.model_ref} · context {100.0 * self.used / window:.0f}%"

    def text(self) -> str:
        session = self.chat.session
        try:
            window = session.budget.context_window
        except Exception:  # noqa: BLE001 - e.g. a model the registry no longer knows
            window = 0
        return toolbar_text(session.model_ref, self.used, window,
                            width=get_app().output.get_size().columns, turn=self.turn,
                            cost=self.cost)


class _Warmup:
    """Builds the provider (importing its SDK) and measures the context off the main thread,
    started once the first prompt is drawn; joined before anything uses the session."""

    def __init__(self, status: _Status, on_done: Callable[[], None]):
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
    status = _Status(chat)
    chat.keys = KEYS
    chat.width = lambda: shutil.get_terminal_size().columns
    session: PromptSession = PromptSession(
        history=history or InMemoryHistory(), completer=SlashCompleter(completions()),
        complete_while_typing=True, key_bindings=key_bindings(), multiline=True,
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

    while True:
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


def _waiting_line(renderer: Renderer, status: _Status) -> WaitingLine | None:
    """The line that says what a turn is waiting for (a terminal only, not ``--json``)."""
    stream = renderer.stream
    if renderer.as_json or not stream.isatty():
        return None
    return WaitingLine(stream, status=status.brief, at_line_start=lambda: not renderer.midline,
                       width=lambda: shutil.get_terminal_size().columns,
                       color=renderer.color)


def run_repl(config: Any, args: Any) -> int:
    """``clawd chat`` on a terminal."""
    from clawd.cli_sessions import chat_key
    from clawd.compose import agent_paths, build_runtime, chat_agent, check_provider

    runtime = build_runtime(config, chat_agent(config, args.agent, args.session),
                            allow_exec=args.allow_exec, approve=ExecApproval())
    key = chat_key(runtime, args)
    # A missing key or unknown model is one line before any prompt (and before the session
    # is touched); the SDK itself is imported in the warm-up, after the prompt is on screen.
    check_provider(runtime, key, args.model)
    chat = Chat(runtime, key, args.model, background=True)
    _, state = agent_paths(runtime.agent_id)
    try:
        return repl_loop(chat, history=history_path(state, runtime.agent_id),
                         as_json=bool(getattr(args, "json", False)),
                         deltas=bool(getattr(args, "stream", False)))
    finally:
        if runtime.memory is not None:
            runtime.memory.close()
