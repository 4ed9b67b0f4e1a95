"""The turn loop: a plain loop over the typed outcomes of model steps, yielding events.

A ``Session`` is one conversation (a session key of one agent). It builds the parts that do
the work and hands each only what it needs (``parts``): its entry in ``sessions.json``
(``Record``), its history and transcript (``Conversation``), how full the window is
(``Window`` over a ``TokenMeter``), a ``PruningLedger``, a ``ToolRunner``, a ``ModelCall``
and an ``Upkeep`` (the memory flush and compaction). None of them holds the session.

``run_turn`` appends the user's message, then loops: a model call ends in an outcome
(``Replied``, ``Overflowed``, ``Failed``); a reply is decided (``decide``) into ``Answer``,
``RunTools``, ``AskAgain`` (a guard of the model's profile asks once more) or ``Stop``; the
loop acts on it and keeps its state in one ``Turn``. ``cancel`` stops the turn under way from
any thread (the turn's ``CancelToken``), as Ctrl-C does: the partial reply is kept, marked
``aborted``. Nothing here prints; front ends render the events, and a server can drive the
same generator.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator, Sequence
from functools import cached_property
from typing import Any

from clawd.context.access import Access, offered
from clawd.context.flush import is_blank, is_silent
from clawd.context.layers import Layers
from clawd.context.ledger import PruningLedger, prune_mode
from clawd.context.meter import TokenMeter
from clawd.context.requests import asks_reminder
from clawd.core.cancel import Cancelled, CancelToken
from clawd.core.errors import ClawdError, ProviderError, ProviderSetupError
from clawd.core.events import ErrorEvent, Event, Notice, Recalled, TurnDone, Waiting
from clawd.core.messages import ImagePart, Message, Usage
from clawd.core.templates import render
from clawd.core.tokens import Budget, estimate_messages
from clawd.guards.base import Guards, TurnView
from clawd.loop.keeping import (
    keep_correction,
    keep_reminder,
    keep_request,
)
from clawd.loop.model_call import ModelCall
from clawd.loop.opening import open_entry
from clawd.loop.parts import Conversation, Record, Window
from clawd.loop.recall import Recall, recall
from clawd.loop.runtime import ModelHandle, Runtime, session_model
from clawd.loop.steps import StepPlan, run_steps
from clawd.loop.toolrunner import ToolRunner
from clawd.loop.turn import Turn
from clawd.loop.upkeep import Upkeep
from clawd.providers.base import Provider
from clawd.sessions.entry import SessionEntry
from clawd.sessions.store import normalize_key
from clawd.sessions.transcript import History, undo_last
from clawd.tools.base import Tool
from clawd.workspace.files import daily_log_path

log = logging.getLogger(__name__)

__all__ = ["Runtime", "Session", "session_model"]


class Session:
    """A conversation under one session key (see the module docstring)."""

    def __init__(self, runtime: Runtime, key: str, model: str | None = None, *,
                 fresh: bool = False, pin: bool = True, wait: float | None = None):
        """``model`` is pinned to the session (``modelOverride``) unless ``pin`` is false:
        then it is used by this process only (``--model``, one-shot as in ``llm -m``).
        ``wait``: how long to wait for another process holding the session."""
        self.rt = runtime
        self.key = normalize_key(key)
        self.access = Access.of(self.key, runtime.settings, runtime.workspace)
        self.store = runtime.store
        # one writer per session: held until this Session is closed or collected
        self.lease = runtime.storage.hold(self.key, wait=wait)
        self._release = weakref.finalize(self, self.lease.release)
        self.run_model = None if pin else model
        opened = open_entry(runtime, self.key, self.access, model if pin else None,
                            run_model=self.run_model, fresh=fresh)
        self.record = Record(self.store, self.key, opened.entry)
        self.transcript = opened.transcript
        self.warnings = opened.warnings
        self.history: History = opened.history
        self.conversation = Conversation(self.history, self.transcript)
        self.meter = TokenMeter(self.history, float(self.entry.get("tokenRatio") or 1.0))
        self.ledger = PruningLedger(runtime.settings.context_pruning)
        tools = self._offered()
        self.window = Window(runtime, self.access, lambda: self.model, self.meter,
                             [t.spec for t in tools])
        self._provider: Provider | None = None
        self._guards: tuple[str, Guards] | None = None
        self.call = ModelCall(conversation=self.conversation, record=self.record,
                              window=self.window, meter=self.meter, ledger=self.ledger,
                              provider=lambda: self.provider, guards=lambda: self.guards,
                              clock=runtime.clock, max_tokens=runtime.settings.max_tokens)
        self.tools = ToolRunner(runtime, tools, self.access, self.key)
        # the stop of what runs now: the user's turn, or a flush or compaction asked for
        self.token = CancelToken()
        self.upkeep = Upkeep(runtime=runtime, access=self.access, token=lambda: self.token,
                             conversation=self.conversation, record=self.record,
                             window=self.window, call=self.call, tools=self.tools,
                             provider=lambda: self.provider, profile=lambda: self.model.profile)

    def close(self) -> None:
        """Let other processes use this session (also done when the Session is collected)."""
        self._release()

    def cancel(self) -> None:
        """Stop the turn under way from another thread or task, as Ctrl-C does: the reply
        so far is kept, marked interrupted, and the turn ends with ``TurnDone``."""
        self.token.cancel()

    @property
    def entry(self) -> SessionEntry:
        return self.record.entry

    def _offered(self) -> list[Tool]:
        """The tools offered here: the runtime's, as the access allows, less those of the
        MCP servers switched off in this session (``mcpOff``)."""
        off = set(self.entry.get("mcpOff") or [])
        return [t for t in offered(self.rt.tools, self.access) if t.spec.origin not in off]

    def reoffer(self) -> None:
        """Offer the tools again: the runtime's changed (a server listed its tools anew) or
        a server was switched on or off (``switch_mcp``)."""
        tools = self._offered()
        self.window.offered, self.tools.tools = [t.spec for t in tools], tools

    def switch_mcp(self, server: str, on: bool) -> None:
        """Offer an MCP server's tools in this session again, or no more."""
        off = set(self.entry.get("mcpOff") or [])
        (off.discard if on else off.add)(server)
        self.patch(touch=False, mcpOff=sorted(off))
        self.reoffer()

    def patch(self, add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
              touch: bool = True, **fields: Any) -> None:
        """Change the session's entry in the store (``Record.patch``)."""
        self.record.patch(add, copy, touch, **fields)

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

    @property
    def guards(self) -> Guards:
        """The guards of the model in use (its profile's), made once per model."""
        if self._guards is None or self._guards[0] != self.model_ref:
            self._guards = (self.model_ref, self.model.profile.step_guards())
        return self._guards[1]

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
        return self.window.budget

    def layers(self) -> Layers:
        return self.window.layers()

    @property
    def tool_specs(self) -> list:
        """The tools the model in use is told of (``Window.tools``)."""
        return self.window.tools

    @cached_property
    def offers_writes(self) -> bool:
        return "write" in {spec.name for spec in self.window.offered}

    @cached_property
    def offers_schedule(self) -> bool:
        """Whether this session can set reminders (the ``schedule`` tool)."""
        return "schedule" in {spec.name for spec in self.window.offered}

    @cached_property
    def searches_memory(self) -> bool:
        """Whether this session may search memory (``memory_search``), and so recalls
        automatically; under ``recall_only`` the model is not told of the tool itself."""
        return "memory_search" in {spec.name for spec in self.window.offered}

    def context_tokens(self, extra: list[Message] | None = None,
                       layers: Layers | None = None) -> int:
        """The context size now: last reported prompt plus estimates of everything since."""
        return self.window.used(extra, layers)

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

    def run_turn(self, text: str, images: Sequence[ImagePart] = (),
                 origin: dict[str, Any] | None = None) -> Generator[Event, None, None]:
        """Run one user turn to the end, yielding events (see the module docstring);
        ``images``: pictures sent with the text (a channel's photo).

        The turn always ends with something the user sees: a reply, or a notice saying why
        there is none (a blank answer, a note claimed and never written, the step limit).
        ``origin``: what sent a message no person typed (a job, the heartbeat), kept with
        it; nothing of such a turn is kept as a note.
        """
        message = Message.user(text, origin=origin)
        message.content.extend(images)
        self.token = CancelToken()
        self.reoffer()  # a server may have listed its tools anew since the last turn
        turn = Turn(TurnView(text=text, offers_writes=self.offers_writes,
                             offers_schedule=self.offers_schedule,
                             daily_log=daily_log_path(self.rt.clock().date())),
                    token=self.token)
        layers = self.layers()  # the workspace files as this turn starts
        turn.view.instructions = layers.instructions
        schedules = self.offers_schedule
        if origin is None and asks_reminder(text):  # said before the model answers
            turn.aside = render("reminder_schedule.md.j2" if schedules
                                else "reminder_aside.md.j2").strip()
        if (refusal := self._too_large(message, layers)) is not None:
            message.refused = True
            self.conversation.keep_on_disk(message)  # kept on disk, never sent
            yield ErrorEvent(refusal)
            yield self.turn_done("", usage=turn.usage, failed=True)
            return
        appended = False
        try:
            if self.searches_memory:
                yield Waiting("recall")
            turn.recall = self._recall(message, layers.project)
            recalled = turn.recall.hits if turn.recall else []
            turn.view.background = "\n".join(
                [layers.project, self.history.summary or "", *(h.text for h in recalled)])
            turn.view.files = layers.texts()
            for hit in recalled:
                turn.view.files[hit.path] = f"{turn.view.files.get(hit.path, '')}\n{hit.text}"
            if turn.recall:
                yield Recalled([(h.path, h.start, h.end, h.score) for h in turn.recall.hits])
            yield from self.upkeep.maintain(turn.recall.apply([message])
                                            if turn.recall else [message])
            self.conversation.append(message)
            appended = True
            if turn.recall:  # what was found for it, for the history a page shows
                self.conversation.transcript.append({
                    "type": "recall", "messageId": message.id,
                    "places": [[h.path, h.start, h.end, round(h.score, 3)]
                               for h in turn.recall.hits]})
            yield from self._steps(turn)
        except (Cancelled, KeyboardInterrupt) as exc:  # a stop; or Ctrl-C landing elsewhere
            turn.aborted = turn.interrupted = True
            turn.reply = (exc.partial if isinstance(exc, Cancelled) else "") or turn.reply
            if not appended:  # interrupted during a flush or compaction: keep what was typed
                self.conversation.append(message)
            yield Notice("reply interrupted" + ("" if is_blank(turn.reply)
                                                else "; the partial reply was kept"))
        except ClawdError as exc:  # a pinned model that cannot be used, an outage during a
            turn.failed = True     # flush or compaction: said, then ended; the history as it was
            if not appended:  # the message is kept, unanswered (``unanswered_ids``)
                self.conversation.append(message)
            yield ErrorEvent(str(exc))
        if not turn.interrupted:
            for notice in self.guards.unmet(turn.view):
                yield Notice(notice)
            if appended and self.offers_writes and self.access.private and origin is None:
                yield from keep_request(message, self.history.messages, self.access, self.rt,
                                        self.model.profile)
                yield from keep_correction(message, self.history.messages, self.access,
                                           self.rt)
                if turn.aside and not schedules:
                    yield from keep_reminder(message, self.access, self.rt)
        yield self.turn_done("" if is_silent(turn.reply) else turn.reply, turn.usage,
                             turn.aborted, turn.steps, turn.interrupted, turn.failed)

    def _steps(self, turn: Turn) -> Generator[Event, None, None]:
        """The model steps of a user turn (``steps.run_steps``): shown, recovered from an
        overflow by compaction, and the flush point checked after each tool step."""
        yield from run_steps(self.call, self.tools, turn, StepPlan(
            self.history.messages, self.guards, max_steps=self.rt.settings.max_steps,
            window=self.budget.context_window, recover=self.upkeep.recover,
            between=lambda: self.upkeep.maintain([])))

    def turn_done(self, text: str, usage: Usage, aborted: bool = False, steps: int = 0,
                  interrupted: bool = False, failed: bool = False) -> TurnDone:
        """The event that ends a user turn, with where it happened and its model calls'
        ``usage``."""
        return TurnDone(text, aborted, steps, interrupted, failed, usage,
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
                      shown, self.budget.context_window,
                      gate=self.window.model.profile.gates_recall)

    def _too_large(self, message: Message, layers: Layers) -> str | None:
        """Why a user message can never be sent (it alone overfills the window), or None."""
        fixed, budget = self.meter.scaled(self.window.fixed_tokens(layers)), self.budget
        size = self.meter.scaled(estimate_messages([message]))
        room = budget.compact_at - fixed
        if size <= room:
            return None
        return (f"your message is {size:,} tokens and cannot fit: the model's window is "
                f"{budget.context_window:,} tokens, the system prompt, tools and workspace "
                f"files take {fixed:,} and {budget.context_window - budget.compact_at:,} are "
                f"kept for the reply, which leaves {max(room, 0):,} for a message; nothing was "
                f"sent (the message is kept in the transcript {self.transcript.location}, out of "
                f"the conversation)")

    # --- flush and compaction (``Upkeep``) --------------------------------------------------

    def flush(self, view: list[Message] | None = None) -> Generator[Event, None, None]:
        """Run the silent memory-flush turn now (see ``Upkeep.flush``)."""
        self.token = CancelToken()
        yield from self.upkeep.flush(view)

    def flush_before_end(self) -> Generator[Event, None, None]:
        """Before /new, /reset or an automatic reset: the once-per-cycle flush, if this
        session has turns that were not flushed in this cycle."""
        if any(m.role == "user" for m in self.history.messages):
            self.token = CancelToken()
            try:
                yield from self.upkeep.flush_if_due()
            except ProviderError as exc:  # the session still ends: its transcript is kept
                yield Notice(f"{exc}; the session ends without it")

    def compact(self, instructions: str | None = None, **how: Any
                ) -> Generator[Event, None, bool]:
        """Summarise older history now (see ``Upkeep.compact``); whether it did."""
        self.token = CancelToken()
        return (yield from self.upkeep.compact(instructions, **how))
