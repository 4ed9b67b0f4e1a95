"""The one loop of model steps, for a user's turn and for the memory flush alike.

``run_steps`` calls the model, decides each reply into its next step (``turn.decide``) and
acts on it, keeping its state in the ``Turn`` it is given, until an answer, a stop or a
failure. What differs between a user's turn and the silent memory flush is data, given in a
``StepPlan``: the messages the steps add to (the history, or the flush's own list), the guards
(the model profile's step guards, or the flush's), whether text and tool lines are shown,
the flush's extra system text, how a request that does not fit is recovered (compaction, or
not at all) and what runs between steps (the flush point and compaction, or nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial

from typing_extensions import assert_never  # noqa: UP035 - in typing from Python 3.11 only

from clawd.context.access import WRITE_TOOLS
from clawd.context.flush import is_blank
from clawd.core.cancel import CancelToken
from clawd.core.events import Event, Notice, ToolFinished
from clawd.core.messages import Message
from clawd.guards.answers import BlankAnswer
from clawd.guards.base import AskAgain, Guards
from clawd.guards.step_guards import calls_of
from clawd.loop.done import read_unread, tools_did
from clawd.loop.model_call import Failed, ModelCall, Overflowed, Replied
from clawd.loop.toolrunner import ToolRunner
from clawd.loop.turn import Answer, RunTools, Stop, Turn, blank_notice, decide

log = logging.getLogger(__name__)

# given the turn's stop: a recovery's flush and a flush between steps stop with the turn
Recover = Callable[[Overflowed, int, list[Message], CancelToken], Generator[Event, None, bool]]


@dataclass
class StepPlan:
    """How one run of steps goes (see the module docstring)."""

    messages: list[Message]  # what each request is built on; replies and results join it
    guards: Guards
    max_steps: int
    window: int  # the model's context window (tool results are capped to fit it)
    flush: bool = False  # the memory flush: silent, its own system text, its write rules
    extra_system: str | None = None
    recover: Recover | None = None  # None: a request that does not fit ends the run
    # after each tool step (given the turn's stop)
    between: Callable[[CancelToken], Generator[Event, None, object]] | None = None


def _what_it_did(turn: Turn, reply: Message) -> Generator[Event, None, None]:
    """A turn ending with no words to show: what its tools did (``done.tools_did``)."""
    if is_blank(reply.text) and (did := tools_did(turn.view.this_turn(), turn.view.text)):
        yield Notice(did)


def run_steps(call: ModelCall, tools: ToolRunner, turn: Turn, plan: StepPlan
              ) -> Generator[Event, None, None]:
    """The model steps of a turn (``plan`` says whose), until an answer, a stop or a
    failure; ``turn`` holds what happened (``reply``, ``written``, ``failed``, …)."""
    messages, show = plan.messages, not plan.flush
    turn.view.messages = messages  # what a guard may check a note against
    keep = partial(call.conversation.append, target=messages)
    while True:
        if not turn.overflows:
            turn.steps += 1
        outcome = yield from call.run(messages, turn, show=show and not turn.quiet,
                                      flush=plan.flush, extra_system=plan.extra_system)
        match outcome:
            case Overflowed():  # needs compaction, then the same call again
                turn.overflows += 1
                if plan.recover is not None and (
                        yield from plan.recover(outcome, turn.overflows, messages, turn.token)):
                    continue
                turn.failed = True
                return
            case Failed(partial=cut_off):  # said in an ErrorEvent
                turn.failed = True
                if cut_off:  # cut off mid-stream: the reply so far, kept
                    turn.reply, turn.aborted = cut_off, True
                return
            case Replied():
                pass
            case _:
                assert_never(outcome)
        turn.overflows = 0
        words_only, turn.ask, turn.tool_choice = turn.tool_choice == "none", None, "auto"
        quiet, turn.quiet = turn.quiet, False
        reply = outcome.message
        if quiet and not reply.tool_calls:  # no call where one was asked for: unseen, and
            call.keep(outcome, messages, turn, drop=True)  # the guard's notice says so
            return
        step = decide(reply, turn.view, plan.guards, last_step=turn.steps >= plan.max_steps,
                      steps=turn.steps, words_only=words_only)
        dropped = isinstance(step, AskAgain) and step.drop
        if not dropped:  # what was held back of the reply while it streamed
            yield from outcome.pending
        call.keep(outcome, messages, turn, drop=dropped)
        match step:
            case AskAgain():
                log.info("guard %s: the model is asked again (%r)", step.guard,
                         reply.text[:40])
                turn.view.asked[step.guard] = step
                if not step.drop:  # the user saw it, and it stands
                    turn.reply = turn.view.shown = reply.text
                turn.ask, turn.tool_choice, turn.quiet = step.ask, step.tool_choice, step.quiet
                if show and step.why and step.drop:  # nothing was shown: say why it waits
                    yield Notice(f"asking the model again: {step.why}")
            case Stop():
                turn.reply = reply.text
                if show:
                    yield Notice(step.notice)
                    yield from _what_it_did(turn, reply)
                return
            case Answer():
                if is_blank(reply.text) and turn.view.shown:
                    return  # nothing more after what was shown: that reply stands
                turn.reply = reply.text
                if show and is_blank(reply.text):
                    yield Notice(blank_notice(reply.text, turn.view.asked_by(BlankAnswer)))
                    yield from _what_it_did(turn, reply)
                if show:
                    for said in read_unread(turn.view, tools, turn.token, plan.window):
                        yield Notice(said)
                return
            case RunTools():
                yield from _run_tools(tools, turn, plan, step, keep, show)
                if plan.between is not None:
                    yield from plan.between(turn.token)
            case _:
                assert_never(step)


def _run_tools(tools: ToolRunner, turn: Turn, plan: StepPlan, step: RunTools,
               keep: Callable[[Message], None], show: bool) -> Generator[Event, None, None]:
    """Run a step's tool calls, noting the files they wrote in the turn."""
    reply = step.message
    turn.reply = reply.text
    paths = {c.id: str(c.arguments.get("path")) for c in reply.tool_calls}
    for event in tools.run(reply, keep, turn.token, flush=plan.flush, repeated=step.repeated,
                           refused={i: r.text for i, r in step.refused.items()},
                           window=plan.window):
        if (isinstance(event, ToolFinished) and not event.is_error
                and event.name in WRITE_TOOLS):
            turn.written.append(paths[event.call_id])
            turn.view.wrote = True
        if show:
            yield event
    # the same file changes as the step before (a small model in a loop), or a call a
    # guard refused for the last time: the next step answers in words
    turn.view.last_calls = None if step.repeated else calls_of(reply)
    turn.view.refused += len(step.refused)
    turn.tool_choice = "none" if step.answer_next else "auto"
