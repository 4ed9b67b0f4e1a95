"""One model call of a session, with overflow recovery (``Stepper``).

``Stepper.run`` builds the request (the fixed layers, the summary and the history as the
``PruningLedger`` prunes it), streams the reply (holding back a ``NO_REPLY`` so it is never
shown), persists the assistant message and records the call's usage (``TokenMeter``, the
store's counters), and returns a ``StepResult``. When the server answers that the request
does not fit, the session is compacted (the cycle's flush first) and the call retried, up to
``OVERFLOW_ATTEMPTS`` times. Text streamed before an error or a Ctrl-C is kept, marked
``aborted``. A reply caught in a loop is stopped and kept with the repeated stretch once
(``LoopGuard``); one cut off at the output limit is kept as it is, and a notice says so.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawd.context.flush import SilentFilter, is_blank
from clawd.context.layers import Layers, assemble, describe_room, fold_unanswered, report
from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.events import ErrorEvent, Event, Notice, TextDelta, Waiting
from clawd.core.messages import Message, ModelRequest, ModelResponse, Part, TextPart, Usage
from clawd.core.tokens import estimate_messages
from clawd.guards.loops import LoopGuard
from clawd.guards.replytext import is_echo, is_stray, without_echoed_tags

if TYPE_CHECKING:
    from clawd.loop.session import Session

log = logging.getLogger(__name__)
OVERFLOW_ATTEMPTS = 3


@dataclass
class StepResult:
    """What one model call left: the assistant ``message`` (None when it failed: an
    ``ErrorEvent`` said why), and the text streamed before a failure (``partial``)."""

    message: Message | None
    partial: str = ""


def kept_parts(reply: Message) -> list[Part]:
    """The parts of ``reply`` worth keeping (see ``replytext``)."""
    stray = bool(reply.tool_calls) and is_stray(reply.text)
    parts: list[Part] = []
    for part in reply.content:
        if isinstance(part, TextPart):
            if stray or not (text := without_echoed_tags(part.text)):
                continue
            part = TextPart(text) if text != part.text else part
        parts.append(part)
    return parts


class Stepper:
    """The model calls of one session."""

    def __init__(self, session: Session):
        self.s = weakref.proxy(session)  # no cycle: a dropped session is released at once

    def _request(self, messages: list[Message], extra_system: str | None,
                 tool_choice: str, flush: bool, ask: Message | None = None
                 ) -> tuple[ModelRequest, Layers]:
        """The request for ``messages``, pruned as the ledger says (its new decisions are
        remembered in ``sessions.json``), messages that got no reply sent with the one
        after them (``fold_unanswered``), with the notes automatic recall found in front of
        the user's message (not in a flush), and ``ask`` after them (sent, never kept)."""
        s = self.s
        layers, model, budget = s.layers(), s.model, s.budget
        stored = s.entry.get("prunedResults") or {}
        sent, decisions = s.ledger.apply(
            messages, stored, mode=s.pruning_mode(), now=s.rt.clock().timestamp(),
            last_call_at=s.entry.get("lastModelCallAt"),
            context_window=budget.context_window,
            tokens_of=lambda m: estimate_messages(m) * s.meter.ratio)
        if decisions != stored:
            live = {m.id for m in s.history.messages} | {m.id for m in messages}
            s.patch(prunedResults={k: v for k, v in decisions.items() if k in live})
        sent = fold_unanswered(sent)
        if s.recall and not flush:
            sent = s.recall.apply(sent)
        if ask is not None:
            sent = [*sent, ask]
        request = assemble(layers, s.history.summary, sent, s.tool_specs,
                                  max_tokens=model.max_tokens or s.rt.settings.max_tokens,
                                  cache=model.uses_cache, extra_system=extra_system,
                                  tool_choice=tool_choice)
        return request, layers

    def run(self, messages: list[Message], *, show: bool, flush: bool = False,
            extra_system: str | None = None, retry_blank: bool = False,
            tool_choice: str = "auto", ask: Message | None = None, apart: bool = False,
            echo_of: str | None = None) -> Generator[Event, None, StepResult]:
        """One model call on ``messages``, with overflow recovery (flush if due, compact,
        retry, up to ``OVERFLOW_ATTEMPTS``). ``retry_blank``: a final answer that shows
        nothing, or only repeats ``echo_of`` (the user's message: ``is_echo``), is marked
        ``retried`` and kept out of ``messages`` (still written to the transcript), so the
        caller can ask again without it. ``ask``: a user message sent
        after ``messages`` in this request only. ``apart``: the reply shown just before
        ended mid-line with nothing after it, so this one's text starts a new paragraph. A
        Ctrl-C propagates with the text streamed so far as its ``partial`` attribute; so
        does a provider error in a flush (any other one is said in an ``ErrorEvent``)."""
        s = self.s
        for attempt in range(1, OVERFLOW_ATTEMPTS + 1):
            request, layers = self._request(messages, extra_system, tool_choice, flush, ask)
            silent, parts, guard = SilentFilter(), [], LoopGuard()
            if not flush:  # a flush's requests are its own stage (``Waiting("flush")``)
                yield Waiting("model")
            try:
                final = None
                stream = s.provider.stream(request)
                try:
                    for event in stream:
                        if isinstance(event, TextDelta):
                            parts.append(event.text)
                            shown = silent.feed(event.text)
                            if show and shown:
                                if apart:  # not run on from the reply before it
                                    yield TextDelta("\n\n")
                                    apart = False
                                yield TextDelta(shown)
                            if guard.looping(parts):  # stopped: the reply, its loop once
                                final = Message.assistant(guard.cut(parts))
                                break
                        elif isinstance(event, ModelResponse):
                            final = event.message
                finally:  # stopped early: the HTTP response is released now, not at GC
                    getattr(stream, "close", lambda: None)()
                if final is None:
                    raise ProviderError("the model's stream ended without a reply")
            except ContextOverflowError as exc:
                if flush:
                    # The flush's own request does not fit: give up the flush (it says so)
                    # and let the recovery around it go on; nothing was lost.
                    log.warning("the memory flush request does not fit: %s", exc)
                    return StepResult(None)
                compacted = False
                if attempt < OVERFLOW_ATTEMPTS:  # compact() flushes first, before the cut
                    compacted = yield from s.upkeep.compact(
                        reason="overflow", keep_divisor=2 ** attempt, within_turn=True)
                if not compacted:
                    times = "once" if attempt == 2 else f"{attempt - 1} times"
                    why = (f"even after compacting {times}" if attempt > 1 else
                           "and there is nothing left to compact")
                    room = describe_room(report(
                        layers, s.history.summary, messages, s.tool_specs))
                    yield ErrorEvent(f"the conversation does not fit the model's context "
                                     f"window ({exc}) {why}; {room}; nothing was lost")
                    return StepResult(None)
                continue
            except ProviderError as exc:
                partial = self._keep_partial(parts, messages, flush)
                if flush:  # not about size: the flush stops, and its caller decides
                    raise
                yield ErrorEvent(str(exc))
                return StepResult(None, partial)
            except KeyboardInterrupt as exc:
                exc.partial = self._keep_partial(parts, messages, flush)  # type: ignore[attr-defined]
                raise
            rest = silent.finish()
            if guard.period is not None:
                log.info("the reply repeated %r; stopped", final.text[-60:])
                if show:
                    yield Notice("the reply was stopped: the model kept repeating itself")
            elif show and rest and not (final.tool_calls and is_stray(rest)):
                yield TextDelta(("\n\n" if apart else "") + rest)
            if show and guard.period is None and final.stop_reason == "length":
                yield Notice(f"the reply stopped at the model's output limit "
                             f"({request.max_tokens:,} tokens)")
            final.flush, final.model = flush, s.model_ref  # one form: provider/model
            final.content = kept_parts(final)
            if retry_blank and not final.tool_calls and (
                    is_blank(final.text) or (echo_of and is_echo(final.text, echo_of))):
                final.retried = True
                s.transcript.append_message(final)
            else:
                s.append(final, messages)
            self._after_call(final.usage or Usage(), layers, messages, request)
            return StepResult(final)
        return StepResult(None)

    def _keep_partial(self, parts: list[str], messages: list[Message], flush: bool) -> str:
        """Persist the text streamed before an error or Ctrl-C, marked ``aborted``; returns
        it (nothing for a flush, whose words are never shown)."""
        s = self.s
        if parts:
            s.append(Message.assistant("".join(parts), aborted=True, flush=flush,
                                          model=s.model_ref), messages)
        return "" if flush else "".join(parts)

    def _after_call(self, usage: Usage, layers: Layers, messages: list[Message],
                    request: ModelRequest) -> None:
        """Learn from the call's usage and record it in ``sessions.json``."""
        s = self.s
        in_history = messages is s.history.messages  # not a flush's side turn
        s.meter.record(usage, request, s.fixed_tokens(layers), in_history=in_history)
        if in_history:  # the user's turn (OpenClaw: the latest run)
            s.turn_usage += usage
        latest = ({"totalTokens": usage.prompt_tokens, "totalTokensFresh": True}
                  if usage.prompt_tokens else {})
        s.patch(add={"cumulativeInputTokens": usage.input_tokens,
                        "cumulativeOutputTokens": usage.output_tokens,
                        "cumulativeCacheReadTokens": usage.cache_read_tokens,
                        "cumulativeCacheWriteTokens": usage.cache_write_tokens},
                   inputTokens=s.turn_usage.input_tokens,
                   outputTokens=s.turn_usage.output_tokens, **latest,
                   contextTokens=s.budget.context_window,
                   contextUsedTokens=s.context_tokens(layers=layers),
                   tokenRatio=round(s.meter.ratio, 4),
                   lastModelCallAt=s.rt.clock().timestamp(), model=s.model_ref)
