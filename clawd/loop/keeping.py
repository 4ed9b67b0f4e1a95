"""Keeping what you asked to be remembered, whatever the model did (every profile).

"Also remember: I'm allergic to peanuts." A weak model answers "I remember that Priya is
allergic to peanuts" and writes nothing; asked again, it says it saved the note, and still
writes nothing. A request to remember is the runtime's to keep: when the turn ends and no
note written in it holds what was asked (``context.requests.held``), the message's words go
to today's log under a heading that says they are the user's, and a notice says so. A
strong model that wrote the note pays nothing for this: no request, no second copy. Only
private sessions keep requests this way: in a group, anyone's "remember …" would land in the
owner's notes.
"""

from __future__ import annotations

from collections.abc import Generator

from clawd.context.access import Access
from clawd.context.flush import FROM_REQUEST, append_flush_notes, notes_written
from clawd.context.requests import held, to_keep
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
    if at is not None and held(wanted, notes_written(history[at:])):
        return
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
