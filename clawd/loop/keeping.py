"""Keeping what you asked to be remembered, whatever the model did (every profile).

"Also remember: I'm allergic to peanuts." A weak model answers "I remember that Priya is
allergic to peanuts" and writes nothing; asked again, it says it saved the note, and still
writes nothing. A request to remember is the runtime's to keep: when the turn ends and no
note written in it holds what was asked (``context.requests.held``), the message's words go
to today's log under a heading that says they are the user's, and a notice says so. A
strong model that wrote the note pays nothing for this: no request, no second copy. Only
private sessions keep requests this way: in a group, anyone's "remember …" would land in the
owner's notes.

A request that names a file to read ("Read notes/router.txt and keep the admin port in your
notes") is kept with the lines of the file it is about, when the model read it in the turn
(``requests.lines_used``), and counts as held when the notes written hold those lines.
"""

from __future__ import annotations

from collections.abc import Generator

from clawd.context.access import Access
from clawd.context.flush import FROM_REQUEST, append_flush_notes, notes_written
from clawd.context.requests import held, lines_used, names_file, to_keep
from clawd.core.errors import ClawdError
from clawd.core.events import Event, Notice
from clawd.core.messages import Message
from clawd.loop.runtime import Runtime
from clawd.workspace.files import daily_log_path


def keep_request(message: Message, history: list[Message], access: Access,
                 runtime: Runtime) -> Generator[Event, None, None]:
    """After the turn of ``message`` (its messages at the end of ``history``): keep what it
    asked to be remembered, unless a note written in the turn holds it."""
    wanted = to_keep(message.text)
    if not wanted:
        return
    at = next((i for i, m in enumerate(history) if m.id == message.id), None)
    turn = history[at:] if at is not None else []
    used = read_for(wanted, turn)
    # a file's ``admin_port = 8443`` is held by a note that says "admin port: 8443"
    notes = notes_written(turn)
    if used:
        lines = " ".join(line for _, line in used).replace("_", " ")
        done = held(lines, [note.replace("_", " ") for note in notes])
    else:
        done = held(wanted, notes)
    if at is not None and done:
        return
    wanted = "\n".join([wanted, *(f"  - from {path}: {line}" for path, line in used)])
    now = runtime.clock()
    try:
        access.check_flush_write(daily_log_path(now.date()))
        rel = append_flush_notes(runtime.files, f"- {wanted}", now, FROM_REQUEST,
                                 title="The user's words")
    except (ClawdError, OSError) as exc:
        yield Notice(f"you asked to remember this, and it could not be saved: {exc}")
        return
    if runtime.memory is not None:
        runtime.memory.mark_dirty()
    yield Notice(f"your words were kept in {rel}, as you asked: no note written in this turn "
                 f"holds them")


def read_for(request: str, turn: list[Message]) -> list[tuple[str, str]]:
    """The lines that ``request`` is about of the files it names that the model read in
    ``turn`` (successful ``read`` calls), each with its file's path."""
    results = {m.tool_call_id: m.text for m in turn
               if m.role == "toolResult" and not m.is_error}
    reply = next((m.text for m in reversed(turn) if m.role == "assistant" and m.text), "")
    used: list[tuple[str, str]] = []
    for m in turn:
        for call in m.tool_calls if m.role == "assistant" else []:
            path = str(call.arguments.get("path") or "")
            if call.name == "read" and call.id in results and names_file(request, path):
                used += [(path, line)
                         for line in lines_used(request, reply, path, results[call.id])]
    return list(dict.fromkeys(used))
