"""Slash commands as data, and ``Chat``: the one entry point every front end drives.

``Chat.handle(line)`` runs a slash command or a user turn and yields events. Each command is a
``Command`` (name, usage, help, handler, subcommands) in one registry that drives dispatch,
``/help`` and the REPL's completion; its usage also says whether it takes arguments, which
dispatch checks for every command alike. A line starting with ``//`` is a message, sent with
one ``/`` less. Handlers return events (usually one ``CommandOutput``); they never print.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError, ProviderSetupError
from clawd.core.events import ClearScreen, CommandOutput, ErrorEvent, Event, Notice
from clawd.core.messages import ImagePart, Usage
from clawd.core.textcut import two_columns
from clawd.frontends.reports import (
    format_context,
    format_forget_lines,
    format_forgotten,
    format_memory_files,
    format_memory_results,
    format_memory_status,
    format_status,
    one_line,
)
from clawd.loop.lifecycle import due_reset, end_session
from clawd.loop.recall import SYNC_WAIT
from clawd.loop.runtime import Runtime
from clawd.loop.session import Session
from clawd.memory import forget
from clawd.memory.notes import append_to_daily_log
from clawd.workspace.files import MEMORY_DIR

log = logging.getLogger(__name__)


class Chat:
    """The current session of one agent, as the front ends see it: opened with ``open``,
    closed with ``close`` or a ``with`` block (``/new`` swaps the session in between)."""

    def __init__(self, runtime: Runtime, session: Session):
        self.runtime, self.session = runtime, session
        self.keys: list[tuple[str, str]] = []  # the front end's keys and what they do, for /help
        self.width: Callable[[], int] | None = None  # the terminal's width, for /help
        # the stop of the line being handled (``handle``'s token): its turn, flush or compaction
        self.token = CancelToken()

    @classmethod
    def open(cls, runtime: Runtime, key: str, model: str | None = None, *,
             background: bool = False, wait: float | None = None) -> Chat:
        """Open session ``key`` (``Session.open``; ``model`` for this run only). ``wait``:
        how long to wait for another process to let the session go (None:
        ``sessions.lock.WAIT_SECONDS``); ``background``: a one-shot run, which syncs memory
        on its first search rather than at the start."""
        chat = cls(runtime, Session.open(runtime, key, model, pin=False, wait=wait))
        if (not runtime.storage.workspace_exists()
                and runtime.settings.workspace_access != "none"):
            log.warning("the workspace %s does not exist (run clawd init to create it with "
                        "its starter files); chatting without workspace files until then",
                        runtime.workspace)
        memory = runtime.memory
        if memory is not None and memory.settings.sync.on_session_start and not background:
            memory.mark_dirty()  # one-shot runs sync on their first search
        return chat

    def close(self) -> None:
        """Let the session go (its lease: other processes may use it)."""
        self.session.close()

    def __enter__(self) -> Chat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_memory_sync(self) -> None:
        """Index in the background (session start) and keep watching the memory files."""
        memory = self.runtime.memory
        if memory is None:
            return
        if memory.settings.sync.on_session_start:
            memory.sync_in_background()
        memory.start_watcher()

    def handle(self, line: str, images: Sequence[ImagePart] = (),
               token: CancelToken | None = None) -> Generator[Event, None, None]:
        """A slash command or a user message (with ``images`` sent beside it); errors
        become an ``ErrorEvent``. ``token``: the line's stop, made by its sender (cancelled
        before or while it runs, its turn ends as Ctrl-C ends one)."""
        self.token = token or CancelToken()
        text = line.strip()
        try:
            if text.startswith("/") and not text.startswith(ESCAPE):
                yield from dispatch(self, text)
            elif text:
                message = line.rstrip("\n")
                if text.startswith(ESCAPE):  # a message that itself starts with /
                    message = message.lstrip()[1:]
                if reason := due_reset(self.session):
                    yield from self.new_session(reason)
                yield from self.session.run_turn(message, images, token=self.token)
        except ClawdError as exc:
            yield ErrorEvent(str(exc))
            if text and not text.startswith("/"):  # the turn did not start (a failed reset)
                yield self.session.turn_done("", Usage(), failed=True)

    def with_current_models(self, action: Callable[[], object]) -> str:
        """Run ``action`` (which resolves a model); when it fails because the provider or
        model is unknown, read the config file's ``models`` section again (one declared
        after clawd started) and retry once. Returns what to add to the command's answer
        when the models were read again ("" otherwise)."""
        try:
            action()
            return ""
        except ProviderSetupError:
            if not self._reread_models():
                raise
        action()
        return "; the config's models were read again: clawd.json changed since clawd started"

    def _reread_models(self) -> bool:
        """Adopt the config file's current ``models`` section; whether it changed. Other
        settings are read at start-up only. A config that no longer loads is an error."""
        from clawd.config import config_path, load_config

        config = self.runtime.config
        fresh = load_config(config.source or config_path())
        if fresh.models == config.models:
            return False
        config.models = fresh.models
        return True

    def new_session(self, reason: str, model: str | None = None) -> Generator[Event, None, None]:
        """End the current session (``lifecycle.end_session``) and start a new one."""
        old = self.session
        if model:
            self.runtime.models(model).connect()  # an unusable model fails before anything ends
        ended = yield from end_session(old, reason, self.token)
        self.session = Session.open(self.runtime, old.key,
                                    model or old.entry.get("modelOverride"), fresh=True)
        # the key's lease is the new session's now: the old one lets go of its count at once
        # (left to the collector, it kept the key held after the new one closed, and another
        # worker waited for it)
        old.close()
        if not model:
            self.session.run_model = old.run_model
        yield Notice(f"new session {self.session.entry['sessionId']} ({reason}){ended}")


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    handler: Callable[[Chat, str], Generator[Event, None, None]]
    subcommands: tuple[str, ...] = ()  # first words of the arguments, for completion

    @property
    def takes_arguments(self) -> bool:
        """Whether the usage names any (``/status`` does not: ``/status foo`` is an error)."""
        return " " in self.usage


REGISTRY: dict[str, Command] = {}
ALIASES = {"exit": "quit", "q": "quit", "?": "help"}
ESCAPE = "//"  # starts a message that begins with "/": "//etc/hosts" sends "/etc/hosts"


def command(name: str, usage: str, help_text: str, subcommands: tuple[str, ...] = ()):
    def register(handler: Callable[[Chat, str], Generator[Event, None, None]]):
        REGISTRY[name] = Command(name, usage, help_text, handler, subcommands)
        return handler
    return register


def dispatch(chat: Chat, text: str) -> Generator[Event, None, None]:
    word, *rest = text[1:].split(None, 1) or [""]
    args = rest[0].strip() if rest else ""
    name = ALIASES.get(word.lower(), word.lower())
    found = REGISTRY.get(name)
    if found is None:
        yield ErrorEvent(f"unknown command /{word} ({_suggest(name)}); to send it as a "
                         f"message, start it with {ESCAPE}")
    elif args and not found.takes_arguments:
        yield ErrorEvent(f"/{word} takes no arguments (got {args!r})")
    else:
        yield from found.handler(chat, args)


def _suggest(name: str) -> str:
    """"did you mean /status?" for a mistyped command word (``/stauts``), else "try /help"."""
    close = difflib.get_close_matches(name, [*REGISTRY, *ALIASES], n=1, cutoff=0.7)
    return f"did you mean /{close[0]}?" if close else "try /help"


def completions() -> dict[str, tuple[str, ...]]:
    """Every command word and its subcommands, for the REPL's completer."""
    return {f"/{name}": REGISTRY[name].subcommands for name in sorted(REGISTRY)}


def _out(name: str, text: str, **kw) -> Generator[Event, None, None]:
    yield CommandOutput(name, text, **kw)


@command("help", "/help", "list the commands (and the keys, in the REPL)")
def _help(chat: Chat, args: str) -> Generator[Event, None, None]:
    rows = [(c.usage, c.help) for c in REGISTRY.values()]
    rows.append((f"{ESCAPE}TEXT", f"send a message that starts with / ({ESCAPE}etc/hosts sends "
                                  f"/etc/hosts)"))
    if chat.keys:
        rows += [("", ""), ("Keys:", ""), *chat.keys]
    yield from _out("help", two_columns(rows, chat.width() if chat.width else None))


@command("clear", "/clear", "clear the screen (the conversation is untouched)")
def _clear(chat: Chat, args: str) -> Generator[Event, None, None]:
    yield ClearScreen()


@command("quit", "/quit", "leave clawd (Ctrl-D too)")
def _quit(chat: Chat, args: str) -> Generator[Event, None, None]:
    yield from _out("quit", "bye", quit=True)


@command("status", "/status", "model, context used, compactions, flushes, session age")
def _status(chat: Chat, args: str) -> Generator[Event, None, None]:
    yield from _out("status", format_status(chat.session))


@command("context", "/context [list|detail]", "tokens per layer (detail: per file and tool)",
         ("list", "detail"))
def _context(chat: Chat, args: str) -> Generator[Event, None, None]:
    if args not in ("", "list", "detail"):
        raise ClawdError("usage: /context [list|detail]")
    yield from _out("context", format_context(chat.session, detail=args == "detail"))


@command("model", "/model [PROVIDER/MODEL | default]",
         "show the model and where it comes from, pin one to this session, or follow the "
         "config again")
def _model(chat: Chat, args: str) -> Generator[Event, None, None]:
    session = chat.session
    if args == "default":
        session.set_model(None)
        yield from _out("model", f"model: {session.model_ref} (from the config; no longer "
                                 f"pinned)")
    elif args:
        reread = chat.with_current_models(lambda: session.set_model(args))
        yield from _out("model", f"model set to {args} (pinned to this session; /model "
                                 f"default follows the config again){reread}")
    else:
        yield from _out("model", f"model: {session.model_ref} (from {session.model_source})")


@command("new", "/new [PROVIDER/MODEL]", "start a new session (the old one is saved to memory/)")
def _new(chat: Chat, args: str) -> Generator[Event, None, None]:
    if args:  # an unusable model fails before anything ends
        reread = chat.with_current_models(lambda: chat.runtime.models(args).connect())
        if reread:
            yield Notice(reread.lstrip("; "))
    yield from chat.new_session("/new", args or None)
    yield from _out("new", f"new session started ({chat.session.model_ref})")


@command("reset", "/reset", "start this session afresh (same as /new with the same model)")
def _reset(chat: Chat, args: str) -> Generator[Event, None, None]:
    yield from chat.new_session("/reset")
    yield from _out("reset", "session reset")


@command("retry", "/retry", "send your last message again (the last answer leaves the "
         "conversation; the transcript keeps it)")
def _retry(chat: Chat, args: str) -> Generator[Event, None, None]:
    _ = chat.session.provider  # an unusable model fails before the turn is taken back
    request, _ = chat.session.undo_turn("retry")
    yield Notice(f"sending again: “{one_line(request.text)}”")
    yield from chat.session.run_turn(request.text, token=chat.token)


@command("undo", "/undo", "take the last turn out of the conversation (the transcript keeps "
         "it)")
def _undo(chat: Chat, args: str) -> Generator[Event, None, None]:
    request, flushed = chat.session.undo_turn()
    text = (f"undone: “{one_line(request.text)}” (kept in the transcript, out of the "
            f"conversation)")
    if flushed:
        text += f"; notes the memory flush saved from it stay in {MEMORY_DIR}/"
    yield from _out("undo", text)


@command("compact", "/compact [instructions]", "summarise older history now")
def _compact(chat: Chat, args: str) -> Generator[Event, None, None]:
    # The compaction's own events say what happened (compacted, or why not): the command
    # adds no second line (an empty ``command`` event in --json).
    yield from chat.session.compact(args or None, chat.token)
    yield from _out("compact", "")


@command("mcp", "/mcp [on|off|prompts|prompt]",
         "the MCP servers of this agent: on NAME, off NAME (in this session); prompts, "
         "prompt SERVER/NAME KEY=VALUE (sent as your message)",
         ("on", "off", "prompts", "prompt"))
def _mcp(chat: Chat, args: str) -> Generator[Event, None, None]:
    from clawd.frontends.mcp_command import mcp_command

    yield from mcp_command(chat.session, args, chat.token)


@command("memory", "/memory search QUERY | show | add TEXT | forget [--yes] TEXT | status",
         "search memory, show MEMORY.md and the memory files, add a note to today's log, "
         "forget a fact (TEXT or PATH#Lx-Ly: lists the lines; --yes removes them), or show "
         "the state of the memory index", ("search", "show", "add", "forget", "status"))
def _memory(chat: Chat, args: str) -> Generator[Event, None, None]:
    action, _, rest = args.partition(" ")
    runtime, rest, memory = chat.runtime, rest.strip(), chat.runtime.memory
    if action in ("search", "status") and memory is None:
        raise ClawdError("memory search is off for this agent (memorySearch.enabled)")
    if action == "search" and rest and memory is not None:
        memory.catch_up(SYNC_WAIT)  # a note just added (/memory add, a flush) is found
        yield from _out("memory", format_memory_results(memory.search(rest)))
    elif action == "status" and memory is not None:
        yield from _out("memory", format_memory_status(memory.status()))
    elif action == "show":
        yield from _out("memory", format_memory_files(runtime.files))
    elif action == "add" and rest:
        access = runtime.settings.workspace_access
        if access != "rw":
            raise ClawdError(f"the workspace is read-only here (workspaceAccess: \"{access}\"); "
                             f"the note was not saved: {' '.join(rest.split())}")
        rel = append_to_daily_log(runtime.files, rest, runtime.clock().date())
        if runtime.memory is not None:
            runtime.memory.mark_dirty()
        yield from _out("memory", f"added to {rel}")
    elif action == "forget" and rest:
        yield from _out("memory", _forget(chat, rest))
    else:
        raise ClawdError("usage: /memory search QUERY | show | add TEXT | forget [--yes] TEXT "
                         "| status")


def _forget(chat: Chat, args: str) -> str:
    """``/memory forget TEXT`` lists the lines; ``/memory forget --yes TEXT`` removes them
    (no question in between: the same in the REPL, a script and the gateway)."""
    runtime = chat.runtime
    if chat.session.access.group:
        raise ClawdError("forget is not available in a group or channel session: it changes "
                         "private notes (use a private session or clawd memory forget)")
    access = runtime.settings.workspace_access
    if access != "rw":
        raise ClawdError(f"the workspace is read-only here (workspaceAccess: \"{access}\"); "
                         f"nothing was forgotten")
    first, _, after = args.partition(" ")
    confirmed = first in ("--yes", "-y")
    target = after.strip() if confirmed else args
    if not target:
        raise ClawdError("usage: /memory forget [--yes] TEXT (or PATH#Lx-Ly)")
    request = forget.parse(target)
    lines = forget.find(runtime.files, request)
    listed = format_forget_lines(request.describe(), lines)
    if not lines:
        return listed
    if not confirmed:
        return f"{listed}\nnothing was removed yet; to remove these: /memory forget --yes {target}"
    done = forget.forget(runtime.files, runtime.backups, runtime.memory, lines,
                         runtime.clock())
    return f"{listed}\n{format_forgotten(done, forget.still_found(runtime.memory, request))}"
