"""``clawd sessions list | show | export | delete | rebuild`` and ``clawd chat --resume ID``.

Sessions to come back to: each is listed with a title (the first message sent), its message
count, model and last activity, read from the transcripts (the record) and the store (which
key points at which session). ``ID|KEY`` is a session id, a unique prefix of one, or a
session key. Like ``clawd.frontends.cli`` this is a front end: it prints; the formatting functions
return text. Finding, listing and deleting a session is ``storage.session_admin``'s, which
the gateway's session routes share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from clawd.core.errors import ClawdError
from clawd.core.messages import Message, shown_time
from clawd.core.textcut import shorten
from clawd.frontends.compose import agent_storage
from clawd.sessions.files import TranscriptSummary
from clawd.sessions.transcript import UNDONE, taken_back, unanswered_ids
from clawd.storage.session_admin import Row, delete, resolve, rows

LAST_MESSAGES = 6
SHOW_CHARS = 400


def format_list(found: list[Row], agent_id: str) -> str:
    head = f"{'ID':<18} {'KEY':<14} {'MSGS':>4}  {'LAST ACTIVITY':<16}  {'MODEL':<24} TITLE"
    lines = [head]
    for row in found:
        s = row.summary
        key = _short_key(row.key, agent_id) if row.key else "(ended)"
        lines.append(f"{s.session_id:<18} {key:<14} {s.messages:>4}  "
                     f"{shown_time(s.last_activity):<16}  {(s.model or '?'):<24} "
                     f"{s.title or '(no messages)'}")
    return "\n".join(lines)


def format_show(row: Row, count: int) -> str:
    s, entry = row.summary, row.summary.counters
    lines = [
        f"Session:    {s.session_id} ({row.key or (s.key or '?') + ', ended'})",
        f"Title:      {s.title or '(no messages)'}",
        f"Model:      {s.model or '?'}",
        f"Started:    {shown_time(s.created)} · last activity {shown_time(s.last_activity)}",
        (f"Messages:   {s.messages} · compactions {entry['compactionCount']} · memory "
         f"flushes {entry['memoryFlushCount']}"),
        (f"Usage:      in {entry['cumulativeInputTokens']:,} · out "
         f"{entry['cumulativeOutputTokens']:,} · cache read "
         f"{entry['cumulativeCacheReadTokens']:,} · cache write "
         f"{entry['cumulativeCacheWriteTokens']:,}"),
        f"Transcript: {s.location}",
    ]
    conversation = _conversation(s)
    last = conversation[-count:] if count else []
    marks = _marks(s.loaded.entries if s.loaded else [], conversation)
    if last:
        lines.append(f"\nLast {len(last)} messages:")
        for message in last:
            text = shorten(" ".join(_plain(message).split()), SHOW_CHARS)
            mark = f" ({marks[message.id]})" if message.id in marks else ""
            lines.append(f"  {_who(message)}{mark}: {text}")
    return "\n".join(lines)


def export_markdown(row: Row) -> str:
    """The whole conversation as Markdown (the memory flush's turns left out)."""
    s = row.summary
    out = [f"# {s.title or 'Session ' + s.session_id}", "",
           f"- session: `{s.session_id}` ({row.key or s.key or '?'})",
           f"- model: {s.model or '?'}",
           f"- started: {shown_time(s.created)} · last activity: {shown_time(s.last_activity)}", ""]
    entries = s.loaded.entries if s.loaded else []
    marks = _marks(entries, _conversation(s))
    for entry in entries:
        if entry.get("type") == "compaction" and isinstance(entry.get("summary"), str):
            out += ["> **Earlier messages were summarised (compaction):**", ">",
                    *[f"> {line}" for line in entry["summary"].splitlines()], ""]
            continue
        message = _message(entry)
        if message is None or message.flush:
            continue
        if message.role == "toolResult":
            label = f"{message.tool_name or 'tool'} result" + (" (error)" if message.is_error
                                                               else "")
            out += [f"<details><summary>{label}</summary>", "", _fence(message.text), "",
                    "</details>", ""]
            continue
        mark = f" ({marks[message.id]})" if message.id in marks else ""
        out += [f"## {_who(message).capitalize()} · {shown_time(message.timestamp)}{mark}", ""]
        if message.text:
            out += [message.text, ""]
        for call in message.tool_calls:
            out += [f"*{call.name}*", "", _fence(json.dumps(call.arguments, indent=2,
                                                              ensure_ascii=False), "json"), ""]
        if message.aborted:
            out += ["*(interrupted)*", ""]
    return "\n".join(out).rstrip() + "\n"


def write_export(target: Path, text: str) -> None:
    """Write an export to ``target``; a folder, a missing folder or a file that cannot be
    written is said in one line (``ClawdError``), and nothing else is touched."""
    if target.is_dir():
        raise ClawdError(f"cannot write the export to {target}: it is a folder; name a file "
                         f"in it, e.g. {target / 'session.md'}")
    if not target.parent.is_dir():
        raise ClawdError(f"cannot write the export to {target}: the folder {target.parent} "
                         f"does not exist")
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ClawdError(f"cannot write the export to {target}: "
                         f"{exc.strerror or exc}") from None


def cmd_sessions(args: argparse.Namespace) -> int:
    from clawd.config import load_config, resolve_agent

    config = load_config()
    agent_id, _ = resolve_agent(config, args.agent)
    storage = agent_storage(config, agent_id)
    action = args.sessions_command
    if action == "list":
        found = rows(storage, ended=getattr(args, "all", False))
        if args.json:
            print(json.dumps([r.to_json() for r in found], indent=2, ensure_ascii=False))
        elif not found:
            print(f"no sessions yet for agent {agent_id}")
        else:
            print(format_list(found, agent_id))
    elif action == "rebuild":
        recounted, added = storage.sessions.rebuild()
        print(f"{storage.sessions.location}: {recounted} "
              f"{'entry' if recounted == 1 else 'entries'} recounted from their transcripts, "
              f"{added} added")
    else:
        row = resolve(storage, agent_id, args.session)
        if action == "show":
            print(format_show(row, args.last))
        elif action == "export":
            text = export_markdown(row)
            if args.output:
                write_export(Path(args.output).expanduser(), text)
                print(f"wrote {args.output}", file=sys.stderr)
            else:
                sys.stdout.write(text)
        else:
            print(delete(storage, row, purge=args.purge))
    return 0


def add_parsers(command: Any, ssub: Any) -> None:
    """The ``sessions`` actions (``command`` adds one with the global options)."""
    slist = command(ssub, "list", "the sessions of an agent: title, messages, model, "
                    "last activity")
    slist.add_argument("--all", action="store_true",
                       help="also the ended sessions (left by /new, /reset, a reset)")
    slist.add_argument("--json", action="store_true")
    show = command(ssub, "show", "a session's summary and its last messages")
    show.add_argument("session", metavar="ID|KEY")
    show.add_argument("-n", "--last", type=int, default=LAST_MESSAGES, metavar="N",
                      help=f"how many of the last messages (default {LAST_MESSAGES})")
    export = command(ssub, "export", "a session as Markdown")
    export.add_argument("session", metavar="ID|KEY")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    delete_ = command(ssub, "delete", "remove a session (its transcript moves to deleted/)")
    delete_.add_argument("session", metavar="ID|KEY")
    delete_.add_argument("--purge", action="store_true", help="remove the transcript too")
    command(ssub, "rebuild", "rebuild sessions.json from the transcripts")


def _message(entry: dict[str, Any]) -> Message | None:
    if entry.get("type") != "message":
        return None
    try:
        return Message.from_entry(entry)
    except (ValueError, KeyError, TypeError):
        return None


UNANSWERED = "no reply: the request failed or was stopped"


def _marks(entries: list[dict[str, Any]], conversation: list[Message]) -> dict[str, str]:
    """What to say beside a message: taken back by an undo, or (a user message) no reply."""
    marks = dict.fromkeys(unanswered_ids(conversation, last=True), UNANSWERED)
    marks.update({k: UNDONE[v] for k, v in taken_back(entries).items()})
    return marks


def _conversation(s: TranscriptSummary) -> list[Message]:
    found = [_message(e) for e in (s.loaded.entries if s.loaded else [])]
    return [m for m in found if m is not None and not m.flush
            and m.role in ("user", "assistant")]


def _plain(message: Message) -> str:
    calls = "".join(f" [{c.name}]" for c in message.tool_calls)
    return (message.text + calls).strip() or "(no text)"


def _who(message: Message) -> str:
    return {"user": "you", "assistant": "assistant"}.get(message.role, message.role)


def _short_key(key: str, agent_id: str) -> str:
    prefix = f"agent:{agent_id}:"
    return key.removeprefix(prefix)


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"
