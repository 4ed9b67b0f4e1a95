"""The turn loop: a plain loop over the typed outcomes of model steps, yielding events.

A ``Session`` is one conversation (a session key of one agent), opened with
``Session.open`` (its lease taken, its entry and transcript read) and closed with ``close``
or a ``with`` block. It builds the parts that do the work and hands each only what it needs
(``parts``), as values: its entry in ``sessions.json`` (``Record``), its history and
transcript (``Conversation``), the model in use (``ModelInUse``), how full the window is
(``Window`` over a ``TokenMeter``), a ``PruningLedger``, a ``ToolRunner``, a ``ModelCall``
and an ``Upkeep`` (the memory flush and compaction). None of them holds the session.

``run_turn`` appends the user's message, then loops: a model call ends in an outcome
(``Replied``, ``Overflowed``, ``Failed``); a reply is decided (``decide``) into ``Answer``,
``RunTools``, ``AskAgain`` (a guard of the model's profile asks once more) or ``Stop``; the
loop acts on it and keeps its state in one ``Turn``. A turn's ``CancelToken`` is made by
whoever sends the turn (the gateway's queue: when it is queued) and stops it from any
thread, before or while it runs, as Ctrl-C does: the partial reply is kept, marked
``aborted``. A flush or compaction run by a command stops with the command's token.
Nothing here prints; front ends render the events, and a server can drive the same
generator.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from collections.abc import Generator, Sequence
from functools import cached_property, partial
from typing import Any

from clawd.context.access import Access, offered
from clawd.context.flush import is_blank, is_silent
from clawd.context.layers import Layers
from clawd.context.ledger import PruningLedger, prune_mode
from clawd.context.meter import TokenMeter
from clawd.context.requests import asks_reminder, reminder_aside
from clawd.core.cancel import Cancelled, CancelToken
from clawd.core.errors import ClawdError, ProviderError
from clawd.core.events import ErrorEvent, Event, Notice, Recalled, TurnDone, Waiting
from clawd.core.messages import ImagePart, Message, Usage
from clawd.core.tokens import Budget
from clawd.guards.base import Guards, TurnView
from clawd.loop.keeping import (
    keep_correction,
    keep_reminder,
    keep_request,
    set_reminder,
)
from clawd.loop.model_call import ModelCall
from clawd.loop.opening import Opened, open_entry
from clawd.loop.parts import Conversation, ModelInUse, Record, Window
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
from clawd.storage.interface import Lease
from clawd.tools.base import Tool
from clawd.workspace.files import daily_log_path

log = logging.getLogger(__name__)

__all__ = ["Runtime", "Session", "session_model"]


class Session:
    """A conversation under one session key (see the module docstring). Made by ``open``,
    which takes the session's lease and reads or creates its entry and transcript; let go
    by ``close`` (or at the end of a ``with`` block). The constructor itself does no I/O."""

    def __init__(self, runtime: Runtime, key: str, access: Access, lease: Lease,
                 opened: Opened, run_model: str | None = None):
        """The parts of an opened session (``open``): its ``lease``, what ``open_entry``
        read (``opened``) and this run's model (``run_model``, not pinned)."""
        self.rt, self.key, self.access, self.lease = runtime, key, access, lease
        self.store = runtime.store
        self.record = Record(self.store, key, opened.entry)
        self.transcript = opened.transcript
        self.warnings = opened.warnings
        self.history: History = opened.history
        self.conversation = Conversation(self.history, self.transcript)
        self.in_use = ModelInUse(runtime, self.record, run_model)
        self.meter = TokenMeter(self.history, float(self.entry.get("tokenRatio") or 1.0))
        self.ledger = PruningLedger(runtime.settings.context_pruning)
        tools = self._offered()
        self.window = Window(runtime, access, self.in_use, self.meter, [t.spec for t in tools])
        self.call = ModelCall(conversation=self.conversation, record=self.record,
                              window=self.window, meter=self.meter, ledger=self.ledger,
                              model=self.in_use, clock=runtime.clock,
                              max_tokens=runtime.settings.max_tokens)
        self.tools = ToolRunner(runtime, tools, access, key)
        self.upkeep = Upkeep(runtime=runtime, access=access, conversation=self.conversation,
                             record=self.record, window=self.window, call=self.call,
                             tools=self.tools, model=self.in_use)
        # a Session never closed lets its lease go when collected, with a ResourceWarning
        self._finalizer = weakref.finalize(self, _not_closed, lease, key)

    @classmethod
    def open(cls, runtime: Runtime, key: str, model: str | None = None, *, fresh: bool = False,
             pin: bool = True, wait: float | None = None) -> Session:
        """Open session ``key`` of ``runtime``'s agent: hold it (one writer per session,
        until ``close``), then read its entry and transcript (``fresh``: start a new one).
        ``model`` is pinned to the session (``modelOverride``) unless ``pin`` is false:
        then it is used by this process only (``--model``, one-shot as in ``llm -m``).
        ``wait``: how long to wait for another process holding the session."""
        key = normalize_key(key)
        access = Access.of(key, runtime.settings, runtime.workspace)
        lease = runtime.storage.hold(key, wait=wait)
        try:
            run_model = None if pin else model
            opened = open_entry(runtime, key, access, model if pin else None,
                                run_model=run_model, fresh=fresh)
        except BaseException:
            lease.release()
            raise
        return cls(runtime, key, access, lease, opened, run_model)

    def close(self) -> None:
        """Let other processes use this session; the Session is not used after."""
        if self._finalizer.detach() is not None:
            self.lease.release()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    # --- the model (``ModelInUse``) ---------------------------------------------------------

    @property
    def run_model(self) -> str | None:
        """This run's model, not pinned (``--model``)."""
        return self.in_use.run_model

    @run_model.setter
    def run_model(self, ref: str | None) -> None:
        self.in_use.run_model = ref

    @property
    def model_ref(self) -> str:
        return self.in_use.ref

    @property
    def model(self) -> ModelHandle:
        return self.in_use.handle

    @property
    def model_source(self) -> str:
        """Where ``model_ref`` comes from, for ``/model``."""
        return self.in_use.source

    @property
    def provider(self) -> Provider:
        return self.in_use.provider

    @property
    def guards(self) -> Guards:
        """The guards of the model in use (its profile's), made once per model."""
        return self.in_use.guards

    def set_model(self, ref: str | None) -> None:
        """Pin ``ref`` to the session; ``None`` removes the pin (the config's model again)."""
        target = self.rt.models(ref or self.rt.settings.model)
        target.connect()  # fails here, with a clear message, if unusable
        self.rt.check_window(self.access, target)
        self.in_use.switched()
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

    def pruned_results(self) -> list[str]:
        """What pruning took out of the last request (``/context detail``)."""
        return self.ledger.describe(self.history.messages, self.entry.get("prunedResults") or {},
                                    self.pruning_mode())

    def pruning_mode(self) -> str:
        """``contextPruning.mode``, its default decided by the current model."""
        return prune_mode(self.rt.settings.context_pruning, self.model.uses_cache)

    # --- a turn -----------------------------------------------------------------------------

    def run_turn(self, text: str, images: Sequence[ImagePart] = (),
                 origin: dict[str, Any] | None = None, token: CancelToken | None = None
                 ) -> Generator[Event, None, None]:
        """Run one user turn to the end, yielding events (see the module docstring);
        ``images``: pictures sent with the text (a channel's photo); ``token``: the turn's
        stop, made by whoever queued it (cancelled from any thread, before or while it runs:
        the turn ends as Ctrl-C ends it).

        The turn always ends with something the user sees: a reply, or a notice saying why
        there is none (a blank answer, a note claimed and never written, the step limit).
        ``origin``: what sent a message no person typed (a job, the heartbeat), kept with
        it; nothing of such a turn is kept as a note.
        """
        message = Message.user(text, origin=origin)
        message.content.extend(images)
        self.reoffer()  # a server may have listed its tools anew since the last turn
        turn = Turn(TurnView(text=text, offers_writes=self.offers_writes,
                             offers_schedule=self.offers_schedule,
                             daily_log=daily_log_path(self.rt.clock().date())),
                    token=token or CancelToken())
        layers = self.layers()  # the workspace files as this turn starts
        turn.view.instructions = layers.instructions
        schedules = self.offers_schedule
        if origin is None and asks_reminder(text):  # said before the model answers
            turn.aside = reminder_aside(text, schedules, self.rt.clock(),
                                        self.rt.settings.user_timezone)
        if (refusal := self.window.too_large(message, layers, self.transcript.location)):
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
            ran = yield from self.upkeep.maintain(turn.recall.apply([message])
                                                  if turn.recall else [message], turn.token,
                                                  layers)
            turn.layers = None if ran else layers
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
                elif turn.aside and self.model.profile.sets_reminders:
                    yield from set_reminder(message, self.history.messages, self.rt,
                                            self.tools, self.budget.context_window)
        yield self.turn_done("" if is_silent(turn.reply) else turn.reply, turn.usage,
                             turn.aborted, turn.steps, turn.interrupted, turn.failed)

    def _steps(self, turn: Turn) -> Generator[Event, None, None]:
        """The model steps of a user turn (``steps.run_steps``): shown, recovered from an
        overflow by compaction, and the flush point checked after each tool step."""
        yield from run_steps(self.call, self.tools, turn, StepPlan(
            self.history.messages, self.guards, max_steps=self.rt.settings.max_steps,
            window=self.budget.context_window, recover=self.upkeep.recover,
            between=partial(self.upkeep.maintain, [])))

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
                      gate=self.window.model.profile.gates_recall,
                      tuning=self.window.model.profile.thresholds)

    # --- flush and compaction (``Upkeep``) --------------------------------------------------

    def flush(self, view: list[Message] | None = None, token: CancelToken | None = None
              ) -> Generator[Event, None, None]:
        """Run the silent memory-flush turn now (see ``Upkeep.flush``); ``token``: its stop."""
        yield from self.upkeep.flush(token or CancelToken(), view)

    def flush_before_end(self, token: CancelToken | None = None
                         ) -> Generator[Event, None, None]:
        """Before /new, /reset or an automatic reset: the once-per-cycle flush, if this
        session has turns that were not flushed in this cycle (``token``: its stop)."""
        if any(m.role == "user" for m in self.history.messages):
            try:
                yield from self.upkeep.flush_if_due(token or CancelToken())
            except ProviderError as exc:  # the session still ends: its transcript is kept
                yield Notice(f"{exc}; the session ends without it")

    def compact(self, instructions: str | None = None, token: CancelToken | None = None,
                **how: Any) -> Generator[Event, None, bool]:
        """Summarise older history now (see ``Upkeep.compact``); whether it did
        (``token``: the stop of the flush it may run first)."""
        return (yield from self.upkeep.compact(token or CancelToken(), instructions, **how))


def _not_closed(lease: Lease, key: str) -> None:
    """A Session collected without ``close``: its lease goes, and the leak is said."""
    warnings.warn(f"session {key} was not closed (use Session.open in a with block)",
                  ResourceWarning, stacklevel=1)
    lease.release()
