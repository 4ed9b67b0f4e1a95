"""What a turn's tools did, said when it ends with no words to show; a file it never read.

A 0.5B model ran ``read`` for "Read docs/lease.txt and tell me who my landlord is", and
``write`` for a correction, then answered nothing, twice: the person saw only "the model
returned an empty reply". What the tools did is the answer they were owed, so the turn's
last notice says it (``tools_did``, a pure function): the files written, the reminder set
(``schedule``'s own answer), and for a file the message asks about, the lines of it the
message asks about (``guards.reading.asked_lines``). And when the ``file_answer`` guard
asked the model to read a file the message asks about and the turn still ended without any
read of it ("I will read docs/gig.txt and provide you with the venue", twice), clawd reads
it itself with the session's ``read`` tool and quotes those lines (``read_unread``): a
1.5B model's promise is not where the person's answer should end.
"""

from __future__ import annotations

from clawd.context.access import WRITE_TOOLS
from clawd.context.requests import names_file
from clawd.core.cancel import CancelToken
from clawd.core.messages import Message, ToolCall, answered_calls, new_id
from clawd.guards.base import TurnView
from clawd.guards.reading import (
    READ_TOOLS,
    FileAnswer,
    asked_files,
    asked_lines,
    call_path,
    reads_of,
)
from clawd.loop.toolrunner import ToolRunner
from clawd.tools.schedule import adds, for_the_user


def tools_did(turn: list[Message], asked: str) -> str | None:
    """One line of what the successful tool calls of ``turn`` (the messages after the
    user's message ``asked``) did, or None when they did nothing worth saying."""
    wanted = asked_files(asked)
    said: list[str] = []
    for call, result in answered_calls(turn):
        if result.is_error:
            continue
        path = call_path(call)
        quoted = next((p for p in wanted if names_file(p, path)), None)
        if call.name in WRITE_TOOLS:
            line = f"wrote {path}"
        elif adds(call):
            line = for_the_user(result.text)
        elif call.name in READ_TOOLS and quoted is not None:
            line = f"{quoted} reads: {asked_lines(result.text, asked.replace(quoted, ' '))}"
        else:
            continue
        if line not in said:
            said.append(line)
    return f"what this turn did: {'; '.join(said)}" if said else None


def read_unread(view: TurnView, tools: ToolRunner, token: CancelToken, window: int
                ) -> list[str]:
    """After ``file_answer`` asked for a read the turn never made: each such file the
    message asks about, read with the session's tool and quoted (or why it could not be)."""
    if not view.asked_by(FileAnswer):
        return []
    said = []
    for path in asked_files(view.text):
        if reads_of(view, path) or any(names_file(path, shown) for shown in view.files):
            continue
        call = ToolCall(new_id(), "read", {"path": path})
        text, failed, _ = tools.call(call, token, window=window)
        said.append(f"the model did not read {path}: {text.removeprefix('error: ')}" if failed
                    else f"the model did not read {path}, so clawd did; it reads: "
                         f"{asked_lines(text, view.text.replace(path, ' '))}")
    return said
