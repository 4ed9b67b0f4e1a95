"""One user turn's state and where each model step leads: typed outcomes, decided purely.

A model step ends in a reply; ``decide`` turns it into the next step of the turn, one of a
closed set (openai-agents' ``NextStep*``): ``Answer`` (the turn's answer), ``RunTools`` (run
the calls, then call the model again; ``repeated`` calls, and those a guard ``refused``, are
answered without running),
``AskAgain`` (a guard of the model's profile asks once more: ``guards.base``) or ``Stop``
(the step limit: the reply is kept and a notice says so).

``Turn`` is the one object that holds a turn's state as it goes on: what the guards read of
it (``view``, a ``guards.base.TurnView``, since the guards sit below the loop), the notes
recall sent with its message, its model calls' usage, what the next request asks, what it
wrote, how it ended, and the ``CancelToken`` that stops it (``core.cancel``). A memory
flush is a turn of its own, holding the token of the user's turn it runs in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clawd.context.flush import is_silent
from clawd.context.layers import Layers
from clawd.core.cancel import CancelToken
from clawd.core.messages import Message, Usage
from clawd.guards.base import AskAgain, Guards, Refusal, TurnView
from clawd.loop.recall import Recall


def blank_notice(reply: str, retried: bool) -> str:
    """The one line shown when a user turn ends with nothing to show."""
    what = "replied NO_REPLY" if is_silent(reply) else "returned an empty reply"
    return f"the model {what}{' twice (asked again once)' if retried else ''}; nothing to show"


# --- what a step leads to ---------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """The turn's answer: kept, and the turn ends."""

    message: Message


@dataclass(frozen=True)
class RunTools:
    """Run the reply's tool calls (``repeated``: answer them without running; ``refused``:
    the calls a guard refused, by id, answered with the refusal), then call the model
    again."""

    message: Message
    repeated: bool = False
    refused: dict[str, Refusal] = field(default_factory=dict)

    @property
    def answer_next(self) -> bool:
        """Whether the next step must answer in words: the calls repeated the step
        before's, or a guard refused one for the last time."""
        return self.repeated or any(r.final for r in self.refused.values())


@dataclass(frozen=True)
class Stop:
    """The turn ends here, with the reply kept and a notice."""

    message: Message
    notice: str


NextStep = Answer | RunTools | AskAgain | Stop


def decide(reply: Message, turn: TurnView, guards: Guards, *, last_step: bool,
           steps: int, words_only: bool = False) -> NextStep:
    """What a model's reply leads to (a pure function of the reply, the turn and the
    guards): tool calls are run (unless it was the last step the turn may take, or the
    request asked for an answer in words, ``words_only``, and the model called tools
    anyway: a loop), and a final answer is the turn's, unless a guard asks again (never
    after the last step: then what the guard would have asked for is said in a notice)."""
    if reply.tool_calls:
        if words_only:
            return Stop(reply, "stopped: the model kept calling tools after it was asked to "
                               "answer; send a message to continue")
        if last_step:
            return Stop(reply, f"stopped after {steps} model steps (agents.defaults.maxSteps); "
                               f"send a message to continue")
        return RunTools(reply, guards.repeats(reply, turn), guards.refuse(reply, turn))
    again = guards.answer(reply, turn)
    if again is None:
        return Answer(reply)
    if last_step:  # no step left to ask in: what it lacks is said, if it says anything
        return Stop(reply, again.unmet) if again.unmet else Answer(reply)
    return again


@dataclass
class Turn:
    """The state of one user turn: the one object ``run_turn`` changes as it goes."""

    view: TurnView
    token: CancelToken = field(default_factory=CancelToken)  # set to stop the turn
    recall: Recall | None = None  # the notes sent in front of the user's message
    # what the runtime tells the model in front of the user's message, in this turn's
    # requests only (a reminder asked for: clawd cannot notify at a time)
    aside: str = ""
    # the workspace files as the turn read them at its start, for its first request when
    # nothing was written since (no flush, no compaction): not read a third time
    layers: Layers | None = None
    usage: Usage = field(default_factory=Usage)  # its model calls' (the flush's: its own)
    steps: int = 0
    reply: str = ""  # the reply as the user saw it last
    ask: Message | None = None  # sent after the history in the next request only
    tool_choice: str = "auto"
    quiet: bool = False  # the next step answers a quiet ask (``AskAgain.quiet``)
    overflows: int = 0  # compactions for the request now under way
    aborted: bool = False
    interrupted: bool = False
    failed: bool = False
    written: list[str] = field(default_factory=list)  # files its tool calls wrote
