"""The events the loop yields; front ends (REPL, one-shot, script, JSON) render them.

A turn yields ``TextDelta`` as the reply streams, ``ToolStarted``/``ToolFinished`` around each
tool call, ``Flushed`` after a silent memory-flush turn, ``Recalled`` when
automatic recall found notes for the user's message, ``Compacted`` after compaction,
``Notice`` for things the user should know (a reset, a skipped flush), ``ErrorEvent`` for a
failure (one the turn survived, or the one that ended it), and finally ``TurnDone`` with the
turn's usage and session. ``Waiting`` comes before anything slow (a memory search, a flush, a
compaction, a model request), so a front end can show what it is waiting for. Slash
commands yield ``CommandOutput``; ``/clear`` yields
``ClearScreen``, which only the REPL acts on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clawd.core.messages import TextDelta, Usage

__all__ = ["TextDelta", "ToolStarted", "ToolFinished", "Flushed", "Recalled", "Compacted", "Notice",
           "ErrorEvent", "TurnDone", "Waiting", "CommandOutput", "ClearScreen", "Event"]


@dataclass(slots=True)
class ToolStarted:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class ToolFinished:
    call_id: str
    name: str
    is_error: bool
    text: str  # the result as the model gets it (capped at ``tools.maxOutputChars``)

    @property
    def preview(self) -> str:
        return self.text[:200]


@dataclass(slots=True)
class Flushed:
    """A silent memory-flush turn ran (or was skipped, with ``skipped`` saying why)."""

    files: list[str] = field(default_factory=list)
    skipped: str | None = None


@dataclass(slots=True)
class Recalled:
    """Automatic recall found notes for the user's message: ``(path, startLine, endLine,
    score)`` of each, sent to the model with the message."""

    places: list[tuple[str, int, int, float]]


@dataclass(slots=True)
class Compacted:
    tokens_before: int
    tokens_after: int
    method: str
    dropped: str | None = None


@dataclass(slots=True)
class Notice:
    text: str


@dataclass(slots=True)
class ErrorEvent:
    message: str


@dataclass(slots=True)
class TurnDone:
    """The end of a user turn: the reply, how the turn ended, and what it used.

    ``failed``: an error ended the turn (the ``ErrorEvent`` before says which); ``text`` is
    then the part of the reply that streamed before it, if any. ``usage`` adds up the
    turn's own model calls (not a memory flush's or a summary's)."""

    text: str
    aborted: bool = False
    steps: int = 0
    interrupted: bool = False  # ended by Ctrl-C (``aborted`` alone: cut off by an error)
    failed: bool = False
    usage: Usage = field(default_factory=Usage)
    session_key: str = ""
    session_id: str = ""
    model: str = ""


@dataclass(slots=True)
class Waiting:
    """clawd is about to wait on something slow: ``stage`` is ``recall`` (the memory search
    for the user's message), ``flush`` (the silent memory-flush turn), ``compaction`` (the
    summary of older messages), ``consolidation`` (notes merged into MEMORY.md as a session
ends) or ``model`` (a model request, until its first token). Front
    ends show that they are waiting, and on what, until the next event."""

    stage: str


@dataclass(slots=True)
class CommandOutput:
    name: str
    text: str
    quit: bool = False


@dataclass(slots=True)
class ClearScreen:
    """Clear the terminal (the conversation is untouched)."""


Event = (TextDelta | ToolStarted | ToolFinished | Flushed | Recalled | Compacted | Notice
         | ErrorEvent | TurnDone | Waiting | CommandOutput | ClearScreen)
