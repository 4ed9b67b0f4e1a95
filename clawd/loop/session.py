"""The turn loop: prune → flush? → compact? → request → tools → persist, as a stream of events.

A ``Session`` is one conversation (a session key of one agent) and conducts the parts that
do the work: its entry in ``sessions.json`` (``patch``), its transcript and history, a
``TokenMeter`` (how full the context is), a ``PruningLedger`` (old tool results trimmed the
same way on every request), a ``ToolRunner`` and an ``Upkeep`` (the memory flush and
compaction). ``run_turn`` appends the user's message and runs as many model/tool steps as
the reply needs (up to ``maxSteps``), persisting every message as it happens; each ``step``
is one model call, with overflow recovery, that returns a ``StepResult``. Ctrl-C keeps the
partial reply, marked ``aborted``. Nothing here prints; front ends render the events.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator
from functools import cached_property
from typing import Any

from clawd.context.access import WRITE_TOOLS, Access, offered
from clawd.context.flush import is_blank, is_silent
from clawd.context.layers import Layers
from clawd.context.ledger import PruningLedger, prune_mode
from clawd.context.meter import TokenMeter
from clawd.core.errors import ClawdError, ProviderError, ProviderSetupError
from clawd.core.events import ErrorEvent, Event, Notice, Recalled, ToolFinished, TurnDone, Waiting
from clawd.core.messages import Message, Usage
from clawd.core.templates import render
from clawd.core.textcut import shorten
from clawd.core.tokens import Budget, estimate_messages, estimate_text, estimate_tools
from clawd.guards.claims import asks_to_note, note_claim
from clawd.loop.model_call import Stepper, StepResult
from clawd.loop.opening import open_entry
from clawd.loop.recall import Recall, recall
from clawd.loop.runtime import ModelHandle, Runtime, session_model
from clawd.loop.toolrunner import Calls, ToolRunner, calls_of, repeats_writes
from clawd.loop.upkeep import Upkeep
from clawd.providers.base import Provider
from clawd.sessions import lock
from clawd.sessions.store import normalize_key
from clawd.sessions.transcript import History, undo_last
from clawd.workspace.files import daily_log_path

log = logging.getLogger(__name__)

__all__ = ["Runtime", "Session", "StepResult", "session_model"]


def blank_notice(reply: str, retried: bool) -> str:
    """The one line shown when a user turn ends with nothing to show."""
    what = "replied NO_REPLY" if is_silent(reply) else "returned an empty reply"
    return f"the model {what}{' twice (asked again once)' if retried else ''}; nothing to show"


def unkept_notice(claim: str) -> str:
    """The one line shown when the reply said a note was saved and no file was written."""
    return f'the model said "{shorten(claim, 80)}" but wrote no note'


class Session:
    """A conversation under one session key (see the module docstring)."""

    def __init__(self, runtime: Runtime, key: str, model: str | None = None, *,
                 fresh: bool = False, pin: bool = True):
        """``model`` is pinned to the session (``modelOverride``) unless ``pin`` is false:
        then it is used by this process only (``--model``, one-shot as in ``llm -m``)."""
        self.rt = runtime
        self.key = normalize_key(key)
        self.access = Access.of(self.key, runtime.settings, runtime.workspace)
        self.store = runtime.store
        # one writer per session: held until this Session is closed or collected
        held = lock.acquire(runtime.sessions_dir, self.key)
        self._release = weakref.finalize(self, lock.release, held)
        self.run_model = None if pin else model
        opened = open_entry(runtime, self.key, self.access, model if pin else None,
                            run_model=self.run_model, fresh=fresh)
        self.entry, self.transcript = opened.entry, opened.transcript
        self.warnings = opened.warnings
        self.history: History = opened.history
        self.meter = TokenMeter(self.history, float(self.entry.get("tokenRatio") or 1.0))
        self.ledger = PruningLedger(runtime.settings.context_pruning)
        self.tools = ToolRunner(runtime, offered(runtime.tools, self.access), self.access)
        self.upkeep = Upkeep(self)
        self.stepper = Stepper(self)
        self._provider: Provider | None = None
        self.turn_usage = Usage()  # the current (or last) user turn's model calls
        self.recall: Recall | None = None  # notes sent with the current turn's message

    def close(self) -> None:
        """Let other processes use this session (also done when the Session is collected)."""
        self._release()

    def patch(self, add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
              touch: bool = True, **fields: Any) -> None:
        """Set fields, add to counters and copy fields in the store, against what is on disk
        (re-creating a vanished entry from this copy); ``self.entry`` becomes what is there.
        ``touch=False``: housekeeping, not activity (``updatedAt`` is left alone)."""
        self.entry = self.store.patch(self.key, base=self.entry, add=add, copy=copy,
                                      touch=touch, **fields) or self.entry

    # --- the model --------------------------------------------------------------------------

    @property
    def model_ref(self) -> str:
        return self.run_model or session_model(self.entry, self.rt.settings)

    @property
    def model(self) -> ModelHandle:
        return self.rt.models(self.model_ref)

    @property
    def model_source(self) -> str:
        """Where ``model_ref`` comes from, for ``/model``."""
        if self.run_model:
            return "--model, for this run only"
        if self.entry.get("modelOverride"):
            return "a pin on this session; /model default follows the config again"
        return "the config"

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            try:
                self._provider = self.model.connect()
            except ProviderSetupError as exc:
                if self.run_model or not self.entry.get("modelOverride"):
                    raise
                raise ProviderSetupError(
                    f"this session is pinned to {self.model_ref}, which cannot be used: "
                    f"{exc}; switch with /model PROVIDER/MODEL, or /model default to follow "
                    f"the config") from None
        return self._provider

    def set_model(self, ref: str | None) -> None:
        """Pin ``ref`` to the session; ``None`` removes the pin (the config's model again)."""
        target = self.rt.models(ref or self.rt.settings.model)
        target.connect()  # fails here, with a clear message, if unusable
        self.rt.check_window(self.access, target)
        self._provider = None
        self.run_model = None
        self.patch(model=target.ref, modelOverride=ref)

    # --- the window -------------------------------------------------------------------------

    @property
    def budget(self) -> Budget:
        return self.rt.budget(self.model)

    def layers(self) -> Layers:
        return self.rt.layers(self.access, self.budget)

    @property
    def tool_specs(self) -> list:
        return [t.spec for t in self.tools.tools]

    @cached_property
    def offers_writes(self) -> bool:
        return "write" in {spec.name for spec in self.tool_specs}

    @cached_property
    def searches_memory(self) -> bool:
        """Whether this session is offered ``memory_search`` (and so automatic recall)."""
        return "memory_search" in {spec.name for spec in self.tool_specs}

    @cached_property
    def _tool_tokens(self) -> int:
        """The tool schemas' tokens (they never change for a runtime)."""
        return estimate_tools(self.tool_specs)

    def fixed_tokens(self, layers: Layers) -> int:
        return estimate_text(layers.system) + estimate_text(layers.project) + self._tool_tokens

    def context_tokens(self, extra: list[Message] | None = None,
                       layers: Layers | None = None) -> int:
        """The context size now: last reported prompt plus estimates of everything since."""
        return self.meter.context(self.fixed_tokens(layers or self.layers()), extra)

    @property
    def token_ratio(self) -> float:
        return self.meter.ratio

    @property
    def last_pruned(self) -> list[str] | None:
        return self.ledger.last

    def pruned_results(self) -> list[str]:
        """What pruning took out of the last request (``/context detail``)."""
        return self.ledger.describe(self.history.messages, self.entry.get("prunedResults") or {},
                                    self.pruning_mode())

    def pruning_mode(self) -> str:
        """``contextPruning.mode``, its default decided by the current model."""
        return prune_mode(self.rt.settings.context_pruning, self.model.uses_cache)

    # --- a turn -----------------------------------------------------------------------------

    def run_turn(self, text: str) -> Generator[Event, None, None]:
        """Run one user turn to the end, yielding events.

        The turn always ends with something the user sees: a blank answer (empty or
        ``NO_REPLY``) is asked again once, with a message after the history that repeats
        the user's (sent, never kept), and a second blank one is reported in a notice. A
        reply that says a note was saved when no file was written this turn
        (``claims.note_claim``) is followed by one request to make that write; if it is
        still not made, a notice says so.
        """
        message = Message.user(text)
        steps, reply, aborted, appended = 0, "", False, False
        ask: Message | None = None  # sent after the history in the next request only
        apart = False  # the next step's text starts a new paragraph
        asked_blank = False  # a blank (or echoing) answer was asked again ...
        in_words = False  # ... in words, no tools (after a blank one)
        claim: str | None = None  # the reply said a note was saved ...
        asked_note = wrote = False  # ... the model was asked to write it; a file was written
        last_calls: Calls | None = None  # the step before's tool calls
        answer_now = False  # the step before repeated its file changes: answer in words
        interrupted = failed = False
        self.turn_usage = Usage()
        layers = self.layers()  # the workspace files as this turn starts
        if (refusal := self._too_large(message, layers)) is not None:
            message.refused = True
            self.transcript.append_message(message)  # kept on disk, never sent
            yield ErrorEvent(refusal)
            yield self.turn_done("", failed=True)
            return
        step = StepResult(None)
        try:
            if self.searches_memory:
                yield Waiting("recall")
            self.recall = self._recall(message, layers.project)
            if self.recall:
                yield Recalled([(h.path, h.start, h.end, h.score) for h in self.recall.hits])
            yield from self.upkeep.maintain(self.recall.apply([message]) if self.recall
                                            else [message])
            self.append(message)
            appended = True
            while True:
                steps += 1
                # asked again after a blank answer: in words this time, no tool calls
                step = yield from self.step(self.history.messages, show=True,
                                            ask=ask, apart=apart, echo_of=text,
                                            retry_blank=not (asked_blank or asked_note),
                                            tool_choice="none" if in_words or answer_now
                                            else "auto")
                ask, apart, result = None, False, step.message
                if result is None:  # an error, said in an ErrorEvent
                    failed = True
                    if step.partial:  # cut off mid-stream: the reply so far, kept
                        reply, aborted = step.partial, True
                    break
                if asked_note and not result.tool_calls and is_blank(result.text):
                    break  # nothing more after the claim: the reply stays the one shown
                reply = result.text
                if result.retried:  # blank, or the user's message repeated: asked again
                    echo = not is_blank(reply)
                    log.info("the model gave a %s answer (%r); asking again",
                             "repeating" if echo else "blank", reply[:40])
                    ask = Message.user(render("blank_retry.md.j2", silent=is_silent(reply),
                                              echo=echo, request=shorten(text, 1000)).strip())
                    asked_blank, in_words = True, not echo
                    apart = echo  # the echo was shown
                    continue
                last_step = steps >= self.rt.settings.max_steps
                if not result.tool_calls or last_step:
                    if result.tool_calls:
                        yield Notice(f"stopped after {steps} model steps (agents.defaults."
                                     f"maxSteps); send a message to continue")
                    elif is_blank(reply):
                        yield Notice(blank_notice(reply, in_words))
                    elif not (wrote or claim) and self.offers_writes:
                        claim = note_claim(reply, asked=asks_to_note(text))
                        if claim and not last_step:  # said it saved a note and did not
                            log.info("the model said %r and wrote nothing; asking", claim)
                            ask = Message.user(render(
                                "unkept_note.md.j2", claim=claim,
                                daily_log=daily_log_path(self.rt.clock().date())).strip())
                            asked_note = apart = True  # the claim was shown
                            continue
                    break
                # the same file changes as the step before (a small model in a loop): not
                # made again, and the next step answers in words
                calls = calls_of(result)
                repeated = repeats_writes(calls, last_calls)
                for event in self.tools.run(result, self.append, flush=False,
                                            repeated=repeated, window=self.budget.context_window):
                    wrote |= (isinstance(event, ToolFinished) and event.name in WRITE_TOOLS
                              and not event.is_error)
                    yield event
                last_calls, answer_now = (None if repeated else calls), repeated
                yield from self.upkeep.maintain([])
        except KeyboardInterrupt as exc:
            aborted = interrupted = True
            reply = getattr(exc, "partial", "") or reply
            if not appended:  # interrupted during a flush or compaction: keep what was typed
                self.append(message)
            yield Notice("reply interrupted" + ("" if is_blank(reply)
                                                else "; the partial reply was kept"))
        except ClawdError as exc:  # a pinned model that cannot be used, an outage during a
            failed = True          # flush or compaction: said, then ended; the history as it was
            if not appended:  # the message is kept, unanswered (``unanswered_ids``)
                self.append(message)
            yield ErrorEvent(str(exc))
        finally:
            self.recall = None
        if claim and not wrote and not interrupted:
            yield Notice(unkept_notice(claim))
        yield self.turn_done("" if is_silent(reply) else reply, aborted, steps, interrupted,
                             failed)

    def turn_done(self, text: str, aborted: bool = False, steps: int = 0,
                  interrupted: bool = False, failed: bool = False,
                  usage: Usage | None = None) -> TurnDone:
        """The event that ends a user turn, with where it happened and its usage (by default
        that of the model calls of the turn that ``run_turn`` ran last)."""
        return TurnDone(text, aborted, steps, interrupted, failed,
                        self.turn_usage if usage is None else usage,
                        self.key, self.entry["sessionId"], self.model_ref)

    def undo_turn(self, verb: str = "undo") -> tuple[Message, bool]:
        """Take the last turn out of the history the model sees (``transcript.undo_last``);
        returns its user message and whether a memory flush ran after it."""
        request, flushed = undo_last(self.history, self.transcript, verb)
        self.meter.reset()
        self.patch(contextUsedTokens=self.context_tokens(), totalTokensFresh=False)
        return request, flushed

    def _recall(self, message: Message, shown: str) -> Recall | None:
        """Automatic recall for ``message``, when this session is offered memory search
        (``shown``: the project context, whose lines are not sent again)."""
        if not self.searches_memory:
            return None
        return recall(self.rt.memory, self.access, self.rt.settings.memory_search, message,
                      shown, self.budget.context_window)

    def _too_large(self, message: Message, layers: Layers) -> str | None:
        """Why a user message can never be sent (it alone overfills the window), or None."""
        fixed, budget = self.meter.scaled(self.fixed_tokens(layers)), self.budget
        size = self.meter.scaled(estimate_messages([message]))
        room = budget.compact_at - fixed
        if size <= room:
            return None
        return (f"your message is {size:,} tokens and cannot fit: the model's window is "
                f"{budget.context_window:,} tokens, the system prompt, tools and workspace "
                f"files take {fixed:,} and {budget.context_window - budget.compact_at:,} are "
                f"kept for the reply, which leaves {max(room, 0):,} for a message; nothing was "
                f"sent (the message is kept in the transcript {self.transcript.path}, out of "
                f"the conversation)")

    def append(self, message: Message, target: list[Message] | None = None) -> None:
        """Persist a message, then add it to ``target`` (the history by default)."""
        self.transcript.append_message(message)
        (self.history.messages if target is None else target).append(message)

    def step(self, messages: list[Message], **how: Any) -> Generator[Event, None, StepResult]:
        """One model call on ``messages`` (see ``Stepper.run``)."""
        return (yield from self.stepper.run(messages, **how))

    # --- flush and compaction (``Upkeep``) --------------------------------------------------

    def flush(self, view: list[Message] | None = None) -> Generator[Event, None, None]:
        """Run the silent memory-flush turn now (see ``Upkeep.flush``)."""
        yield from self.upkeep.flush(view)

    def flush_before_end(self) -> Generator[Event, None, None]:
        """Before /new, /reset or an automatic reset: the once-per-cycle flush, if this
        session has turns that were not flushed in this cycle."""
        if any(m.role == "user" for m in self.history.messages):
            try:
                yield from self.upkeep.flush_if_due()
            except ProviderError as exc:  # the session still ends: its transcript is kept
                yield Notice(f"{exc}; the session ends without it")

    def compact(self, instructions: str | None = None, **how: Any
                ) -> Generator[Event, None, bool]:
        """Summarise older history now (see ``Upkeep.compact``); whether it did."""
        return (yield from self.upkeep.compact(instructions, **how))
