"""The command line: parses the flags, runs a command, turns errors into exit codes.

``clawd init | chat | memory | sessions | models | doctor | history | storage | users |
mcp | pairing | channels | jobs | serve``; the runtime is
built by the composition root (``frontends.compose``), a chat wired by ``cli.chat`` (the
gateway by ``frontends.gateway``). Only the
front ends print, and only here do errors become exit codes: a ``ClawdError`` is one line
on stderr (with ``chat --json``, an ``error`` event on stdout too) and exit code 1 (2 for
usage and config errors).
Heavy modules are imported inside the commands so that ``clawd --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterable
from datetime import date
from typing import Any

from clawd import __version__
from clawd.frontends.cli.io import (
    STDOUT_CLOSED,
    ChatOutput,
    decode_input,
    script_lines,
    stdout_gone,
)


def _global_options(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``--agent`` and ``-v`` on the top level and on every command, so either position works.

    On the commands their default is ``SUPPRESS``: a value given before the command is not
    overwritten by the command's own default."""
    unset = argparse.SUPPRESS
    parser.add_argument("--agent", metavar="ID", default=None if top else unset,
                        help="the agent (default: the config's default agent)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        default=False if top else unset, help="log what clawd does")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but help written to a reader that went away raises
    ``BrokenPipeError`` (``main`` exits 141) instead of being dropped silently; the top
    level knows its commands' parsers (``commands``), so a usage error found after parsing
    shows the command's own usage line."""

    commands: dict[str, argparse.ArgumentParser]

    def print_help(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_help())


def build_parser() -> _Parser:
    parser = _Parser(
        prog="clawd", description="An agent runtime and chat assistant whose memory is plain "
        "Markdown on disk.")
    _global_options(parser, top=True)
    parser.add_argument("--version", action="version", version=f"clawd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    parser.commands = {}

    def command(parent: Any, name: str, help_text: str, **kw: Any) -> argparse.ArgumentParser:
        made = parent.add_parser(name, help=help_text, description=help_text, **kw)
        _global_options(made)
        parser.commands.setdefault(name, made)
        return made

    init = command(sub, "init", "create the state dir, a starter config and the workspace "
                   "(with --agent: that agent's entry in the config too)")
    init.add_argument("--workspace", metavar="DIR", help="where the workspace goes")
    init.add_argument("--dry-run", action="store_true", help="show what would be created")

    chat = command(sub, "chat", "talk to the assistant (REPL, -m TEXT or --script)")
    chat.add_argument("--session", metavar="KEY",
                      help="session key (agent:ID:NAME) or short name (default: main)")
    chat.add_argument("--resume", metavar="ID",
                      help="continue the session with this id (or a unique prefix of it; "
                      "see clawd sessions list --all)")
    chat.add_argument("--model", metavar="PROVIDER/MODEL",
                      help="the model for this run only (the session is left as it was; "
                      "/model in the chat pins one to it)")
    mode = chat.add_mutually_exclusive_group()
    mode.add_argument("-m", "--message", metavar="TEXT", help="run one turn and exit")
    mode.add_argument("--script", metavar="FILE|-",
                      help="run each non-empty line in order (lines starting with # are "
                      "skipped; start a line with \\# to send a literal #)")
    chat.add_argument("--json", action="store_true",
                      help="print events as JSON lines (see docs/json-events.md)")
    chat.add_argument("--stream", action="store_true",
                      help="with --json: also print the reply's text deltas as they arrive")
    chat.add_argument("--allow-exec", action="store_true",
                      help="let the model run shell commands in -m and --script runs")

    memory = command(sub, "memory", "the memory index: status (default), index, search; "
                     "consolidate the notes into MEMORY.md; forget a fact")
    msub = memory.add_subparsers(dest="memory_command", metavar="ACTION")
    memory.set_defaults(memory_command="status", json=False)
    mstatus = command(msub, "status", "files, chunks, provider, availability")
    mstatus.add_argument("--json", action="store_true")
    index = command(msub, "index", "bring the index up to date")
    index.add_argument("--force", action="store_true", help="rebuild from scratch")
    search = command(msub, "search", "hybrid search over the memory files")
    search.add_argument("query", type=_query)
    search.add_argument("--max-results", type=_positive_int, metavar="N")
    search.add_argument("--min-score", type=_unit_float, metavar="X", help="0..1")
    search.add_argument("--json", action="store_true")
    merge = command(msub, "consolidate", "merge what lasts from the daily logs and session "
                    "files since the last run into MEMORY.md, each line with its source")
    merge.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    merge.add_argument("--since", type=_day, metavar="YYYY-MM-DD",
                       help="read the notes from this day on (default: the last run's day)")
    merge.add_argument("--model", metavar="PROVIDER/MODEL", help="the model to ask")
    forget = command(msub, "forget", "remove every line of MEMORY.md and memory/**/*.md "
                     "holding TEXT (any case), or the lines PATH#Lx-Ly names, and purge them "
                     "from the index (keyword rows, vectors, embedding cache); shows the lines "
                     "and asks first; each changed note is kept in clawd history",
                     epilog="examples: clawd memory forget \"safe code\"; clawd memory forget "
                     "memory/2026-11-20.md#L3-L4 --yes (see docs/memory.md, Forget)")
    forget.add_argument("target", type=_query, metavar="TEXT|PATH#Lx-Ly",
                        help="text to forget (3 characters or more), or lines as search "
                        "results cite them, e.g. memory/2026-11-20.md#L3-L4")
    forget.add_argument("-y", "--yes", action="store_true",
                        help="remove without asking (needed without a terminal)")

    sessions = command(sub, "sessions", "the sessions of an agent: list (default), show, "
                       "export, delete, rebuild")
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    sessions.set_defaults(sessions_command="list", json=False)
    from clawd.frontends.cli.sessions import add_parsers
    add_parsers(command, ssub)

    hist = command(sub, "history", "earlier versions of the bootstrap files and MEMORY.md "
                   "kept before a tool changed them, and of the notes memory forget changed: "
                   "list, show, restore")
    hsub = hist.add_subparsers(dest="history_command", metavar="ACTION")
    hist.set_defaults(history_command="list", file=None)
    hlist = command(hsub, "list", "the kept versions, newest first")
    hlist.add_argument("file", nargs="?", metavar="FILE",
                       help="e.g. SOUL.md or memory/2026-11-20.md (default: all)")
    for name, what in (("show", "print a version"),
                       ("restore", "put a version back (the current content is kept first)")):
        command(hsub, name, what).add_argument(
            "version", metavar="FILE[@STAMP]", help="as listed, e.g. SOUL.md@20261123-024512 "
            "(FILE alone: its newest version)")

    storage = command(sub, "storage", "where clawd keeps things: status (default), migrate "
                      "a files home into PostgreSQL, export it back (docs/hosting.md)")
    stsub = storage.add_subparsers(dest="storage_command", metavar="ACTION")
    storage.set_defaults(storage_command="status")
    from clawd.frontends.cli.storage import add_parsers as storage_parsers
    storage_parsers(command, stsub)

    users = command(sub, "users", "the people who may use clawd serve: list (default), add, "
                    "remove, purge, rotate, link, unlink; lockouts, unlock ADDRESS "
                    "(docs/hosting.md)")
    usub = users.add_subparsers(dest="users_command", metavar="ACTION")
    users.set_defaults(users_command="list")
    from clawd.frontends.cli.users import add_parsers as users_parsers
    users_parsers(command, usub)

    jobs = command(sub, "jobs", "scheduled work and reminders: list (default), add, show, "
                   "runs, pause, resume, remove, run, tick (docs/automation.md)")
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="ACTION")
    jobs.set_defaults(jobs_command="list", json=False)
    from clawd.frontends.cli.jobs import add_parsers as jobs_parsers
    jobs_parsers(command, jsub)

    from clawd.frontends.cli.mcp import add_parser as mcp_parser
    mcp_parser(command, sub)

    pairing = command(sub, "pairing", "strangers asking to talk on a channel: list (default), "
                      "approve CODE, deny CODE (docs/channels.md)")
    psub = pairing.add_subparsers(dest="pairing_command", metavar="ACTION")
    pairing.set_defaults(pairing_command="list")
    channels = command(sub, "channels", "the channels (Telegram): status (default)")
    csub = channels.add_subparsers(dest="channels_command", metavar="ACTION")
    channels.set_defaults(channels_command="status")
    from clawd.frontends.cli.channels import add_parsers as channel_parsers
    channel_parsers(command, psub, csub)

    serve = command(sub, "serve", "run the HTTP gateway: the native API, server-sent events, "
                    "and the OpenAI-compatible endpoint when enabled (docs/gateway.md)")
    serve.add_argument("--host", metavar="H", help="address to listen on (default: "
                       "gateway.bind, \"loopback\": 127.0.0.1)")
    serve.add_argument("--port", type=_port, metavar="N",
                       help="port (default: gateway.port, 18789)")
    serve.add_argument("--workers", type=_positive_int, metavar="N",
                       help="N worker processes on the one port (needs storage.url)")
    serve.add_argument("--new-token", action="store_true",
                       help="print a fresh token (for gateway.auth.token or "
                       "CLAWD_GATEWAY_TOKEN) and exit")

    models = command(sub, "models", "configured providers and models: window, key, price")
    models.add_argument("--json", action="store_true")
    command(sub, "doctor", "check the config, keys, model servers, embedder, index and "
            "workspace, one line each")
    return parser


def _port(value: str) -> int:
    number = int(value) if value.strip().isdigit() else -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, not "
                                         f"{value!r}")
    return number


def _query(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the query must not be empty")
    return value


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {value!r}")
    return number


def _unit_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, not {value!r}")
    return number


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. stdout is flushed here, on every path (``--help``
    and usage errors included), so a reader that went away (``| head``, ``| true``) is
    noticed while clawd can still say nothing and exit 141, never at interpreter exit."""
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return stdout_gone()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # ``clawd mcp add NAME [--env K=V] -- COMMAND ARGS...``: what follows ``--`` is the
    # server's command line, whatever options come before it
    tail: list[str] | None = None
    if "--" in argv and argv[:argv.index("--")].count("mcp") and "add" in argv[
            :argv.index("--")]:
        argv, tail = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args = parser.parse_args(argv)
    if tail is not None:
        args.argv = tail
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="clawd: %(message)s", stream=sys.stderr)
    from clawd.core.errors import ClawdError, ConfigError

    if args.command == "chat":
        chat = parser.commands["chat"]
        if args.message is not None and not args.message.strip():
            chat.error("-m: the message is empty")
        if args.stream and not args.json:
            chat.error("--stream: text deltas are JSON events; add --json (without it, the "
                       "reply already streams as it arrives)")
        if args.resume is not None and not args.resume.strip():
            chat.error("--resume: the session id is empty (see clawd sessions list)")
    from clawd.frontends.cli import admin, backups, channels, jobs, mcp, sessions, storage, users

    handler = {"init": admin.cmd_init, "chat": cmd_chat, "memory": admin.cmd_memory,
               "sessions": sessions.cmd_sessions, "models": admin.cmd_models,
               "doctor": admin.cmd_doctor, "history": backups.cmd_history,
               "storage": storage.cmd_storage, "users": users.cmd_users, "mcp": mcp.cmd_mcp,
               "pairing": channels.cmd_pairing, "channels": channels.cmd_channels,
               "jobs": jobs.cmd_jobs, "serve": _cmd_serve}[args.command]
    try:
        return handler(args)
    except ConfigError as exc:
        return _failed(args, exc, 2)
    except ClawdError as exc:
        return _failed(args, exc, 1)
    except KeyboardInterrupt:
        print("clawd: interrupted", file=sys.stderr)
        return 130


def _failed(args: argparse.Namespace, exc: Exception, code: int) -> int:
    """An error as one line on stderr; ``chat --json`` also has it as an ``error`` event
    on stdout, so a reader of the events sees why there are no more."""
    print(f"clawd: {exc}", file=sys.stderr)
    if args.command == "chat" and args.json:
        from clawd.core.events import ErrorEvent
        from clawd.frontends.render import Renderer

        try:
            Renderer(sys.stdout, as_json=True).event(ErrorEvent(str(exc)))
        except BrokenPipeError:
            return stdout_gone()
    return code


# --- commands -------------------------------------------------------------------------------

def _cmd_serve(args: argparse.Namespace) -> int:
    from clawd.frontends.gateway.server import cmd_serve

    return cmd_serve(args)


def cmd_chat(args: argparse.Namespace) -> int:
    from clawd.config import load_config

    config = load_config()
    # checked before any session is touched: the message as it will be stored
    message = decode_input(args.message, "the message", set()) if args.message else None
    if args.session:
        args.session = decode_input(args.session, "--session", set())
    interactive = not args.message and not args.script and sys.stdin.isatty()
    if interactive:
        from clawd.frontends.cli.repl import run_repl
        return run_repl(config, args)
    from clawd.frontends.cli.chat import open_chat
    from clawd.frontends.render import Renderer

    with open_chat(config, args) as chat:
        out = ChatOutput(sys.stdout)
        render = Renderer(out, side=sys.stderr, as_json=args.json,  # type: ignore[arg-type]
                          deltas=args.stream).event
        lines: Iterable[Any] = [message] if args.message else script_lines(args.script or "-")
        return _run_lines(chat, lines, render, out)


def _run_lines(chat: Any, lines: Any, render: Any, out: ChatOutput) -> int:
    """Each non-empty line as a message or command, in order. Exit code 1 if any turn
    failed; 130 on Ctrl-C (the turn keeps its partial reply; no further line runs);
    ``STDOUT_CLOSED`` once stdout is closed (the line under way is finished first)."""
    from clawd.core.events import ErrorEvent, TurnDone
    from clawd.frontends.render import drive

    failed = interrupted = False

    def observe(event: Any) -> bool:
        nonlocal failed, interrupted
        failed |= isinstance(event, ErrorEvent)
        interrupted |= isinstance(event, TurnDone) and event.interrupted
        return render(event)

    for line in lines:
        if not line.strip():
            continue
        quit_ = drive(chat.handle(line), observe, reraise=True)
        if interrupted:  # the turn said so ("reply interrupted ...")
            return 130
        if out.gone:
            return STDOUT_CLOSED
        if quit_:
            break
    return 1 if failed else 0
