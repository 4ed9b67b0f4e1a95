"""What a guard is, and the guards of one model: one interface, one cap on asking again.

A guard keeps one habit of a weak model from reaching the user or the history. It may act at
these points of a model step, each a method with a do-nothing default:

- ``looping(parts)`` while the reply streams (``new_reply`` before it starts): the text to
  keep when the stream must stop;
- ``clean(reply)`` once the reply is whole: the reply as it is kept;
- ``answer(reply, turn)`` on a final answer (no tool calls): ``AskAgain`` when the model
  is to be asked once more;
- ``repeats(reply, turn)`` before tool calls run: whether they are to be answered, not run;
- ``refuse(call, turn)`` before one tool call runs: a ``Refusal`` (its error result, given
  instead of running it) or None (it runs); a ``final`` refusal makes the next step answer
  in words;
- ``unmet(turn)`` after the turn, when it asked: the notice if it still lacks what it asked.

``Guards`` holds the guards a model's profile switches on (``guards.profile``) and asks
them in order; each guard is built from the profile's ``Thresholds`` (its ``tuning``). Every
re-ask of a turn goes through ``answer`` and shares one cap (the profile's ``max_asks``,
``MAX_ASKS`` unless it says), and each guard asks at most once a turn (aider's
``reflected_message`` and ``max_reflections``): a model that keeps failing gets a notice,
never an endless loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from clawd.core.messages import Message, ToolCall
from clawd.core.thresholds import DEFAULT, Thresholds

MAX_ASKS = 2  # re-asks of one user turn, whatever guards asked (a profile may say otherwise)


@dataclass(frozen=True)
class AskAgain:
    """Ask the model once more: ``ask`` is sent after the history in the next request only.

    ``drop``: the answer that prompted it leaves the history (kept on disk, marked
    ``retried``): a blank or echoing answer must not teach the model. ``tool_choice``:
    ``none`` when the answer must come in words. ``unmet``: the notice shown if the turn
    ends without what was asked for (None: nothing to say). ``quiet``: what is asked for is
    a tool call, so the answer is not streamed, and an answer in words only ends the turn
    unseen and leaves the history like a dropped one (a 1.5B model asked for the note it
    claimed answered "I saved the note …" again, with no call). ``why``: the reason, shown
    while the second answer is awaited (a first answer held back and dropped left the user
    looking at nothing for minutes).
    """

    guard: str
    ask: Message
    drop: bool = False
    tool_choice: str = "auto"
    unmet: str | None = None
    quiet: bool = False
    why: str = ""  # in words, for the user waiting on the second answer (none: say nothing)


@dataclass(frozen=True)
class Refusal:
    """A tool call a guard does not let run: ``text`` is the error result the model gets
    instead, and ``final`` says the next step must answer in words (no more tries)."""

    text: str
    final: bool = False


@dataclass
class TurnView:
    """What a guard may read of the turn under way."""

    text: str  # the user's message
    shown: str = ""  # a reply of this turn the user saw and that stands (a claim asked on)
    offers_writes: bool = False  # the session has the ``write`` tool
    offers_schedule: bool = False  # the session has the ``schedule`` tool (reminders)
    wrote: bool = False  # a file write or edit succeeded in this turn
    last_calls: list[tuple[str, str]] | None = None  # the step before's calls (``calls_of``)
    asked: dict[str, AskAgain] = field(default_factory=dict)  # by the guards that asked
    daily_log: str = ""  # today's daily log, workspace-relative
    refused: int = 0  # tool calls a guard refused earlier in the turn
    instructions: str = ""  # the system prompt and the instruction files (AGENTS.md, …)
    background: str = ""  # the rest the model was shown: the project context, recalled notes
    messages: list[Message] = field(default_factory=list)  # the steps' messages, as they grow
    # what the model was shown, by name: the system prompt, each context file, recalled notes
    files: dict[str, str] = field(default_factory=dict)

    def asked_by(self, guard: type[Guard]) -> bool:
        """Whether ``guard`` asked the model again in this turn (by its class: a misspelt
        name would be a silent no)."""
        return guard.name in self.asked

    def this_turn(self) -> list[Message]:
        """The messages of the turn under way: those after the user's message."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user" and not self.messages[i].flush:
                return self.messages[i + 1:]
        return self.messages

    def shown_text(self) -> str:
        """Everything the model was shown in the turn, lower-cased: what a note it writes
        may draw on."""
        said = (f"{m.text} {' '.join(str(c.arguments) for c in m.tool_calls)}"
                for m in self.messages)
        return " ".join([self.text, self.instructions, self.background, *said]).lower()


class Guard:
    """One weak-model habit, handled at the points it needs (see the module docstring)."""

    name: ClassVar[str] = ""

    def __init__(self, tuning: Thresholds = DEFAULT) -> None:
        self.tuning = tuning  # the numbers it judges by: its profile's (``core.thresholds``)

    def new_reply(self) -> None:
        """A reply starts streaming."""

    def looping(self, parts: list[str]) -> str | None:
        return None

    def will_ask_again(self, held: str) -> bool:
        """Whether a reply held back while it streams (``held``, so far) is one this guard
        will ask again whatever follows: reading on would only make the user wait (a copy
        of the recalled notes ran to 2,800 tokens, nine minutes on a 1.5B model)."""
        return False

    def clean(self, reply: Message) -> Message:
        return reply

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        return None

    def repeats(self, reply: Message, turn: TurnView) -> bool:
        return False

    def refuse(self, call: ToolCall, turn: TurnView) -> Refusal | None:
        """Before ``call`` runs: the refusal it gets instead of running, or None."""
        return None

    def unmet(self, turn: TurnView) -> str | None:
        """After the turn, when this guard asked: the notice if what it asked for is still
        missing."""
        return None


class Guards:
    """The guards a model's profile switches on, asked in order."""

    def __init__(self, guards: Iterable[Guard] = (), max_asks: int = MAX_ASKS):
        self.guards = list(guards)
        self.max_asks = max_asks

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.guards]

    def new_reply(self) -> None:
        for guard in self.guards:
            guard.new_reply()

    def looping(self, parts: list[str]) -> str | None:
        """The text to keep when the stream so far (``parts``) must stop, else None."""
        return next((cut for g in self.guards if (cut := g.looping(parts)) is not None), None)

    def will_ask_again(self, held: str) -> bool:
        """Whether a guard will ask again for the held-back reply whatever follows."""
        return any(g.will_ask_again(held) for g in self.guards)

    def clean(self, reply: Message) -> Message:
        for guard in self.guards:
            reply = guard.clean(reply)
        return reply

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        """The first guard's request to ask again, unless the turn has asked ``max_asks``
        times or that guard asked already."""
        if len(turn.asked) >= self.max_asks:
            return None
        for guard in self.guards:
            if guard.name in turn.asked:
                continue
            if (again := guard.answer(reply, turn)) is not None:
                return again
        return None

    def repeats(self, reply: Message, turn: TurnView) -> bool:
        return any(g.repeats(reply, turn) for g in self.guards)

    def refuse(self, reply: Message, turn: TurnView) -> dict[str, Refusal]:
        """The refusals of ``reply``'s tool calls, by call id: the first guard's for each."""
        refused = {}
        for call in reply.tool_calls:
            found = next((r for g in self.guards if (r := g.refuse(call, turn)) is not None),
                         None)
            if found is not None:
                refused[call.id] = found
        return refused

    def unmet(self, turn: TurnView) -> list[str]:
        """The notices of the guards that asked and did not get what they asked for."""
        return [notice for g in self.guards
                if g.name in turn.asked and (notice := g.unmet(turn)) is not None]
