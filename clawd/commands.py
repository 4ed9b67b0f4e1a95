"""Slash commands as data, and ``Chat``: the one entry point every front end drives.

``Chat.handle(line)`` runs a slash command or a user turn and yields events. Each command is a
``Command`` (name, usage, help, handler, subcommands) in one registry that drives dispatch,
``/help`` and the REPL's completion; its usage also says whether it takes arguments, which
dispatch checks for every command alike. A line starting with ``//`` is a message, sent with
one ``/`` less. Handlers return events (usually one ``CommandOutput``); they never print.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from clawd.agent import Session
from clawd.runtime import Runtime
from clawd.context import report
from clawd.errors import ClawdError
from clawd.events import ClearScreen, CommandOutput, Compacted, ErrorEvent, Event, Notice
from clawd.hooks import end_session_memory, reset_reason
from clawd.messages import Usage, parse_iso
from clawd.memory.notes import append_to_daily_log
from clawd.transcript import History
from clawd.workspace import MEMORY_DIR, MEMORY_FILE, is_writable

log = logging.getLogger(__name__)


class Chat:
    """The current session of one agent, as the front ends see it."""

    def __init__(self, runtime: Runtime, key: str, model: str | None = None, *,
                 background: bool = False):
        self.runtime = runtime
        self.session = Session(runtime, key, model, pin=False)
        self.keys: list[tuple[str, str]] = []  # the front end's keys and what they do, for /help
        memory = runtime.memory
        if memory is not None and memory.settings.sync.on_session_start and not background:
            memory.mark_dirty()  # one-shot runs sync on their first search

    def start_memory_sync(self) -> None:
        """Index in the background (session start) and keep watching the memory files."""
        memory = self.runtime.memory
        if memory is None:
            return
        if memory.settings.sync.on_session_start:
            memory.sync_in_background()
        memory.start_watcher()

    def handle(self, line: str) -> Iterator[Event]:
        """A slash command or a user message; errors become an ``ErrorEvent``."""
        text = line.strip()
        try:
            if text.startswith("/") and not text.startswith(ESCAPE):
                yield from dispatch(self, text)
            elif text:
                message = line.rstrip("\n")
                if text.startswith(ESCAPE):  # a message that itself starts with /
                    message = message.lstrip()[1:]
                reason = reset_reason(self.session.entry, self.runtime.clock(),
                                      self.runtime.config.session.reset)
                if reason:
                    yield from self.new_session(reason)
                yield from self.session.run_turn(message)
        except ClawdError as exc:
            yield ErrorEvent(str(exc))
            if text and not text.startswith("/"):  # the turn did not start (a failed reset)
                yield self.session.turn_done("", failed=True, usage=Usage())

    def new_session(self, reason: str, model: str | None = None) -> Iterator[Event]:
        """End the current session (flush, session-memory file) and start a new one."""
        old = self.session
        if model:
            self.runtime.models(model).connect()  # an unusable model fails before anything ends
        yield from old.flush_before_end()
        saved, unsaved = None, None
        if not is_writable(self.runtime.workspace, self.runtime.settings.workspace_access):
            unsaved = "the workspace is not writable"
        elif not old.access.may_save_session():
            unsaved = "memory/ is shareable and this is a group session"
        else:
            try:
                provider = old.provider
            except ClawdError:
                provider = None
            try:
                saved = end_session_memory(
                    provider, self.runtime.workspace, old.history.messages,
                    cfg=self.runtime.config.hooks.session_memory, key=old.key,
                    session_id=old.entry["sessionId"], reason=reason, now=self.runtime.clock())
            except OSError as exc:
                unsaved = f"cannot write to {MEMORY_DIR}/: {exc.strerror or exc}"
        if saved is not None and self.runtime.memory is not None:
            self.runtime.memory.mark_dirty()
        self.session = Session(self.runtime, old.key, model or old.entry.get("modelOverride"),
                               fresh=True)
        if not model:
            self.session.run_model = old.run_model
        note = f"new session {self.session.entry['sessionId']} ({reason})"
        if saved is not None:
            note += f"; the last one was saved to {saved.relative_to(self.runtime.workspace)}"
        elif unsaved and any(m.role == "user" for m in old.history.messages):
            note += (f"; the last one was not saved to {MEMORY_DIR}/ ({unsaved}), its "
                     f"transcript is kept: {old.transcript.path}")
        yield Notice(note)


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    handler: Callable[[Chat, str], Iterator[Event]]
    subcommands: tuple[str, ...] = ()  # first words of the arguments, for completion

    @property
    def takes_arguments(self) -> bool:
        """Whether the usage names any (``/status`` does not: ``/status foo`` is an error)."""
        return " " in self.usage


REGISTRY: dict[str, Command] = {}
ALIASES = {"exit": "quit", "q": "quit", "?": "help"}
ESCAPE = "//"  # starts a message that begins with "/": "//etc/hosts" sends "/etc/hosts"


def command(name: str, usage: str, help_text: str, subcommands: tuple[str, ...] = ()):
    def register(handler: Callable[[Chat, str], Iterator[Event]]):
        REGISTRY[name] = Command(name, usage, help_text, handler, subcommands)
        return handler
    return register


def dispatch(chat: Chat, text: str) -> Iterator[Event]:
    word, *rest = text[1:].split(None, 1) or [""]
    args = rest[0].strip() if rest else ""
    name = ALIASES.get(word.lower(), word.lower())
    found = REGISTRY.get(name)
    if found is None:
        yield ErrorEvent(f"unknown command /{word} (try /help); to send it as a message, "
                         f"start it with {ESCAPE}")
    elif args and not found.takes_arguments:
        yield ErrorEvent(f"/{word} takes no arguments (got {args!r})")
    else:
        yield from found.handler(chat, args)


def completions() -> dict[str, tuple[str, ...]]:
    """Every command word and its subcommands, for the REPL's completer."""
    return {f"/{name}": REGISTRY[name].subcommands for name in sorted(REGISTRY)}


def _out(name: str, text: str, **kw) -> Iterator[Event]:
    yield CommandOutput(name, text, **kw)


@command("help", "/help", "list the commands (and the keys, in the REPL)")
def _help(chat: Chat, args: str) -> Iterator[Event]:
    rows = [(c.usage, c.help) for c in REGISTRY.values()]
    rows.append((f"{ESCAPE}TEXT", f"send a message that starts with / ({ESCAPE}etc/hosts sends "
                                  f"/etc/hosts)"))
    width = max(len(usage) for usage, _ in rows)
    lines = [f"{usage.ljust(width)}  {text}" for usage, text in rows]
    if chat.keys:
        lines += ["", "Keys:"] + [f"{key.ljust(width)}  {does}" for key, does in chat.keys]
    yield from _out("help", "\n".join(lines))


@command("clear", "/clear", "clear the screen (the conversation is untouched)")
def _clear(chat: Chat, args: str) -> Iterator[Event]:
    yield ClearScreen()


@command("quit", "/quit", "leave clawd (Ctrl-D too)")
def _quit(chat: Chat, args: str) -> Iterator[Event]:
    yield from _out("quit", "bye", quit=True)


@command("status", "/status", "model, context used, compactions, flushes, session age")
def _status(chat: Chat, args: str) -> Iterator[Event]:
    yield from _out("status", format_status(chat.session))


@command("context", "/context [list|detail]", "tokens per layer (detail: per file and tool)",
         ("list", "detail"))
def _context(chat: Chat, args: str) -> Iterator[Event]:
    if args not in ("", "list", "detail"):
        raise ClawdError("usage: /context [list|detail]")
    yield from _out("context", format_context(chat.session, detail=args == "detail"))


@command("model", "/model [PROVIDER/MODEL | default]",
         "show the model and where it comes from, pin one to this session, or follow the "
         "config again")
def _model(chat: Chat, args: str) -> Iterator[Event]:
    session = chat.session
    if args == "default":
        session.set_model(None)
        yield from _out("model", f"model: {session.model_ref} (from the config; no longer "
                                 f"pinned)")
    elif args:
        session.set_model(args)
        yield from _out("model", f"model set to {args} (pinned to this session; /model "
                                 f"default follows the config again)")
    else:
        yield from _out("model", f"model: {session.model_ref} (from {session.model_source})")


@command("new", "/new [PROVIDER/MODEL]", "start a new session (the old one is saved to memory/)")
def _new(chat: Chat, args: str) -> Iterator[Event]:
    yield from chat.new_session("/new", args or None)
    yield from _out("new", f"new session started ({chat.session.model_ref})")


@command("reset", "/reset", "start this session afresh (same as /new with the same model)")
def _reset(chat: Chat, args: str) -> Iterator[Event]:
    yield from chat.new_session("/reset")
    yield from _out("reset", "session reset")


@command("retry", "/retry", "send your last message again (the last answer leaves the "
         "conversation; the transcript keeps it)")
def _retry(chat: Chat, args: str) -> Iterator[Event]:
    chat.session.provider  # an unusable model fails before the turn is taken back
    request, _ = chat.session.undo_turn("retry")
    yield Notice(f"sending again: “{shorten(request.text)}”")
    yield from chat.session.run_turn(request.text)


@command("undo", "/undo", "take the last turn out of the conversation (the transcript keeps "
         "it)")
def _undo(chat: Chat, args: str) -> Iterator[Event]:
    request, flushed = chat.session.undo_turn()
    text = (f"undone: “{shorten(request.text)}” (kept in the transcript, out of the "
            f"conversation)")
    if flushed:
        text += f"; notes the memory flush saved from it stay in {MEMORY_DIR}/"
    yield from _out("undo", text)


@command("compact", "/compact [instructions]", "summarise older history now")
def _compact(chat: Chat, args: str) -> Iterator[Event]:
    events = list(chat.session.compact(args or None))
    yield from events
    done = next((e for e in events if isinstance(e, Compacted)), None)
    text = (f"compacted: {done.tokens_before:,} → {done.tokens_after:,} tokens ({done.method})"
            if done else "nothing was compacted")
    yield from _out("compact", text)


@command("memory", "/memory search QUERY | show | add TEXT | status",
         "search memory, show MEMORY.md and the memory files, add a note to today's log, "
         "or show the state of the memory index", ("search", "show", "add", "status"))
def _memory(chat: Chat, args: str) -> Iterator[Event]:
    action, _, rest = args.partition(" ")
    runtime, rest = chat.runtime, rest.strip()
    if action in ("search", "status") and runtime.memory is None:
        raise ClawdError("memory search is off for this agent (memorySearch.enabled)")
    if action == "search" and rest:
        yield from _out("memory", format_memory_results(runtime.memory.search(rest)))
    elif action == "status":
        yield from _out("memory", format_memory_status(runtime.memory.status()))
    elif action == "show":
        yield from _out("memory", format_memory_files(runtime.workspace))
    elif action == "add" and rest:
        access = runtime.settings.workspace_access
        if access != "rw":
            raise ClawdError(f"the workspace is read-only here (workspaceAccess: \"{access}\"); "
                             f"the note was not saved: {' '.join(rest.split())}")
        rel = append_to_daily_log(runtime.workspace, rest, runtime.clock().date())
        if runtime.memory is not None:
            runtime.memory.mark_dirty()
        yield from _out("memory", f"added to {rel}")
    else:
        raise ClawdError("usage: /memory search QUERY | show | add TEXT | status")


def shorten(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


def format_recap(history: History, pairs: int = 3) -> str:
    """The last ``pairs`` exchanges (your message, the answer), one short line each, shown
    when a session is reopened; "" for a session with none."""
    messages = history.messages
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if not starts:
        return "· earlier turns are summarised (compacted)" if history.summary else ""
    earlier = len(starts) > pairs or history.summary is not None
    lines = ["· where this session left off" + (" (earlier turns not shown):" if earlier
                                                 else ":")]
    shown = starts[-pairs:]
    for start, end in zip(shown, shown[1:] + [len(messages)]):
        lines.append(f"  you: {shorten(messages[start].text)}")
        turn = [m for m in messages[start + 1:end] if m.role == "assistant"]
        answer = next((m for m in reversed(turn) if m.text.strip()), None)
        tools = sorted({c.name for m in turn for c in m.tool_calls})
        if answer is not None:
            text = shorten(answer.text) + (" (interrupted)" if answer.aborted else "")
        else:
            text = f"(used {', '.join(tools)}; no answer in words)" if tools else "(no answer)"
        lines.append(f"  assistant: {text}")
    return "\n".join(lines)


def format_memory_results(found: dict) -> str:
    """Search results as text: location and score, then the snippet, indented."""
    rows = found.get("results") or []
    head = f"{len(rows)} result{'s' * (len(rows) != 1)} ({found.get('mode', 'hybrid')}"
    head += f", {found['provider']}/{found['model']}" if found.get("provider") else ""
    head += f", fallback: {found['fallback']}" if found.get("fallback") else ""
    lines = [head + ")"]
    for r in rows:
        lines.append(f"\n{r['path']}:{r['startLine']}-{r['endLine']}  score {r['score']:.2f}")
        lines += [f"  {line}" for line in r["snippet"].splitlines()]
    return "\n".join(lines)


def format_memory_status(status: dict) -> str:
    """The memory index's state (``MemoryIndex.status()``) as aligned lines."""
    vector = status["vector"]
    model = "/".join(str(x) for x in (status.get("provider"), status.get("model")) if x)
    if vector["mode"] == "vec0":
        search = " ".join(x for x in ("sqlite-vec", vector.get("extension"), "(vec0)") if x)
    else:
        search = {"in-process": "in-process cosine (sqlite-vec unavailable)",
                  "off": "in-process cosine (store.vector.enabled is false)"}[vector["mode"]]
    # A new process has not compared the index with the files yet: it does before a search.
    synced = parse_iso((status.get("lastSync") or {}).get("at"))
    when = synced.astimezone().strftime("%Y-%m-%d %H:%M") if synced else None
    recheck = (" (files are checked again before the next search)"
               if status.get("syncOnSearch", True)
               else " (run clawd memory index to check the files again)")
    if not status["dirty"]:
        state = "up to date" + (f" (synced {when})" if when else "")
    elif when is None and not status["files"]:
        state = "not indexed yet" + recheck.replace("checked again", "indexed")
    else:
        state = (f"last synced {when}" if when else "indexed earlier") + recheck
    rows = [
        ("index", f"{status['path']} (agent {status['agentId']})"),
        ("workspace", status["workspace"]),
        ("sources", ", ".join(status.get("sources") or [])),
        ("files", f"{status['files']:,}"),
        ("chunks", f"{status['chunks']:,} ({status['embeddedChunks']:,} with vectors)"),
        ("embeddings", (model or "none") + (f" (dims {vector['dims']})" if vector.get("dims")
                                            else "")),
        ("vector search", search),
        ("keyword search", "FTS5" if status["fts"]["available"] else "unavailable (no FTS5)"),
        ("cache", f"{status['cacheEntries']:,} embeddings"),
        ("state", state + (", watching files" if status["watching"] else "")),
    ]
    skipped = status.get("skippedFiles") or []
    rows += [("skipped" if i == 0 else "", f"{s['path']} ({s['reason']})")
             for i, s in enumerate(skipped[:5])]
    if len(skipped) > 5:
        rows.append(("", f"... and {len(skipped) - 5} more (see --json)"))
    if status.get("fallback"):
        rows.append(("fallback", str(status["fallback"])))
    if status.get("embeddingError"):
        rows.append(("embedding error", str(status["embeddingError"])))
    if status.get("pendingBatches"):
        rows.append(("batch jobs", f"{status['pendingBatches']} pending "
                                   f"({status['pendingEmbeddings']:,} texts)"))
    width = max(len(k) for k, _ in rows) + 2
    return "\n".join(f"{key:<{width}}{value}" for key, value in rows)


def format_memory_files(workspace: Path) -> str:
    """MEMORY.md, then the list of memory files with their sizes."""
    memory = workspace / MEMORY_FILE
    text = (memory.read_text(encoding="utf-8", errors="replace") if memory.exists()
            else "(no MEMORY.md yet)")
    files = sorted((workspace / MEMORY_DIR).glob("**/*.md"))
    listing = [f"  {p.relative_to(workspace).as_posix():<40} {p.stat().st_size:>8,} bytes"
               for p in files]
    return f"{MEMORY_FILE}:\n{text.rstrip()}\n\nmemory files:\n" + (
        "\n".join(listing) or "  (none)")


def _fmt_age(created: str | None, now: datetime) -> str:
    start = parse_iso(created)
    if start is None:
        return "?"
    minutes = int((now - start).total_seconds() // 60)
    return f"{minutes // 1440}d {minutes // 60 % 24}h" if minutes >= 1440 else (
        f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m")


def format_status(session: Session) -> str:
    e, budget = session.entry, session.budget
    used = session.context_tokens()
    flushes = e.get("memoryFlushCount", 0)
    lines = [
        f"Model:       {session.model_ref}",
        f"Context:     {used:,} / {budget.context_window:,} tokens ({budget.percent(used):.1f}%)",
        f"Thresholds:  memory flush at {budget.flush_at:,} ({budget.percent(budget.flush_at):.0f}%)"
        f" · compaction at {budget.compact_at:,} ({budget.percent(budget.compact_at):.0f}%)",
        f"Compactions: {e.get('compactionCount', 0)} · memory flushes: {flushes}"
        + (f" (last {e['memoryFlushAt']})" if e.get("memoryFlushAt") else ""),
        f"Usage:       in {e.get('cumulativeInputTokens', 0):,} · out "
        f"{e.get('cumulativeOutputTokens', 0):,} · cache read "
        f"{e.get('cumulativeCacheReadTokens', 0):,} · cache write "
        f"{e.get('cumulativeCacheWriteTokens', 0):,} (this session)",
        f"Session:     {session.key} ({e.get('sessionId')}) · age "
        f"{_fmt_age(e.get('createdAt'), session.rt.clock())}",
        f"Workspace:   {session.rt.workspace}",
    ]
    return "\n".join(lines)


def format_context(session: Session, *, detail: bool) -> str:
    layers = session.layers()
    rep = report(layers, session.history.summary, session.history.messages, session.tool_specs,
                 session.pruned_results())
    window = session.budget.context_window
    ratio = session.token_ratio

    def scaled(tokens: int) -> int:  # in the provider's own tokens
        return round(tokens * ratio)

    tools_total = sum(t for _, t in rep.tools)
    rows = [("system prompt", rep.system_tokens), ("project context", rep.project_tokens),
            ("tool schemas", tools_total), ("compaction summary", rep.summary_tokens),
            (f"history ({rep.history_count} messages)", rep.history_tokens)]
    lines = [f"{name:<28} {scaled(tokens):>9,}" for name, tokens in rows]
    total = scaled(rep.total)
    lines.append(f"{'total (estimated)':<28} {total:>9,}  of {window:,} "
                 f"({100 * total / window:.1f}%)")
    if session.entry.get("lastModelCallAt"):
        lines.append(f"{'now, from provider usage':<28} {session.context_tokens():>9,}")
    if abs(ratio - 1) >= 0.005:
        lines.append(f"(estimates scaled ×{ratio:.2f} to the provider's token count)")
    if detail:
        lines.append("\nProject context files (raw chars → injected chars, tokens):")
        for f in rep.files:
            flag = "  TRUNCATED" if f.truncated else ""
            lines.append(f"  {f.name:<26} {f.raw_chars:>8,} → {f.injected_chars:>8,} chars "
                         f"{scaled(f.tokens):>7,} tok{flag}")
        if not rep.files:
            lines.append("  (none)")
        lines.append("Tool schemas:")
        lines += [f"  {name:<26} {scaled(tokens):>7,} tok" for name, tokens in rep.tools]
        lines.append("Pruned in the last request:")
        lines += [f"  {item}" for item in rep.pruned] or ["  (nothing)"]
    return "\n".join(lines)
