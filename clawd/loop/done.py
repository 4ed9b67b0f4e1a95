"""What a turn's tools did, said when the turn ends with no words to show (a pure function).

A 0.5B model ran ``read`` for "Read docs/lease.txt and tell me who my landlord is", and
``write`` for a correction, then answered nothing, twice: the person saw only "the model
returned an empty reply". What the tools did is the answer they were owed, so the turn's
last notice says it: the files written, the reminder set (``schedule``'s own answer), and
for a file the message asks about, the lines of it the message asks about
(``guards.reading.asked_lines``).
"""

from __future__ import annotations

from clawd.context.access import WRITE_TOOLS
from clawd.context.requests import names_file
from clawd.core.messages import Message
from clawd.guards.reading import READ_TOOLS, asked_files, asked_lines

SCHEDULED = ". Tell the user"  # where ``schedule``'s answer to the model begins


def tools_did(turn: list[Message], asked: str) -> str | None:
    """One line of what the successful tool calls of ``turn`` (the messages after the
    user's message ``asked``) did, or None when they did nothing worth saying."""
    results = {m.tool_call_id: m for m in turn if m.role == "toolResult" and not m.is_error}
    wanted = asked_files(asked)
    said: list[str] = []
    for call in (c for m in turn if m.role == "assistant" for c in m.tool_calls):
        result = results.get(call.id)
        path = str(call.arguments.get("path") or "").split("#", 1)[0]
        if result is None:
            continue
        if call.name in WRITE_TOOLS:
            line = f"wrote {path}"
        elif call.name == "schedule" and str(call.arguments.get("action")).lower() == "add":
            line = result.text.split(SCHEDULED, 1)[0]
        elif call.name in READ_TOOLS and any(names_file(p, path) for p in wanted):
            quoted = next(p for p in wanted if names_file(p, path))
            line = f"{quoted} reads: {asked_lines(result.text, asked.replace(quoted, ' '))}"
        else:
            continue
        if line not in said:
            said.append(line)
    return f"what this turn did: {'; '.join(said)}" if said else None
