"""One model call of a session, as an outcome (``ModelCall``).

``ModelCall.run`` builds the request (the fixed layers, the summary and the history as the
``PruningLedger`` prunes it, a message that got no reply folded into the next, recalled
notes in front of the user's message), streams the reply (holding back a ``NO_REPLY`` so it
is never shown) through the model's guards (a held-back reply a guard will ask again for
whatever follows is not read to its end: the stream is closed, and the server stops), and
returns one of:

- ``Replied``: the assistant message, not yet kept: the caller decides whether it joins the
  history (``keep``), which then records the call's usage (``TokenMeter``, the store), and
  whether what is left to show of it (``pending``: text held back, a notice) is shown;
- ``Overflowed``: the server said the request does not fit; the caller compacts and calls
  again (``NeedsCompaction`` in the turn's terms), or gives up;
- ``Failed``: any other provider error, said in an ``ErrorEvent``; the text streamed before
  it is kept, marked ``aborted``.

A stop (the turn's ``CancelToken``, checked before the request and between deltas, or a
Ctrl-C landing in the stream) raises ``Cancelled`` with the text streamed so far kept and
attached as ``partial``; a provider error in a flush propagates too (the flush is not the
user's turn to fail). A reply a guard stops for looping is kept with its loop once, marked
(``stopReason: "looping"``) so its notice is shown again with the history, and one cut off
at the output limit says so. The model call never touches the session: it works
through the collaborators it is given (``parts``), so an async server can drive it as the
REPL does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clawd.context.flush import SilentFilter
from clawd.context.layers import Layers, assemble, fold_unanswered
from clawd.context.ledger import PruningLedger, prune_mode
from clawd.context.meter import TokenMeter
from clawd.context.replytext import last_answer
from clawd.core.cancel import Cancelled
from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.events import ErrorEvent, Event, Notice, TextDelta, Waiting
from clawd.core.messages import Message, ModelRequest, ModelResponse, Usage
from clawd.core.tokens import estimate_messages
from clawd.guards.step_guards import Looping
from clawd.loop.parts import Conversation, ModelInUse, Record, Window
from clawd.loop.turn import Turn

log = logging.getLogger(__name__)


@dataclass
class Replied:
    """The model answered: ``message`` (not yet kept), and the request and layers it was
    answered on (``ModelCall.keep`` learns from them)."""

    message: Message
    request: ModelRequest
    layers: Layers
    # what is shown of the reply once the guards have judged it, unless one drops it: the
    # text held back while streaming, and a notice that the output limit cut it
    pending: list[Event] = field(default_factory=list)


@dataclass
class Overflowed:
    """The request did not fit the model's window (the server said so)."""

    error: ContextOverflowError
    layers: Layers


@dataclass
class Failed:
    """The call failed (an ``ErrorEvent`` said why); ``partial``: the text streamed before
    it, kept in the history marked ``aborted``."""

    partial: str = ""


CallOutcome = Replied | Overflowed | Failed


def with_aside(messages: list[Message], aside: str) -> list[Message]:
    """``messages`` with ``aside`` in front of the last user message (a copy of it)."""
    at = next((i for i in range(len(messages) - 1, -1, -1)
               if messages[i].role == "user" and not messages[i].flush), None)
    if at is None:
        return messages
    lead = messages[at].with_lead(lambda text: f"{aside}\n\n{text}" if text else aside)
    return [*messages[:at], lead, *messages[at + 1:]]


class ModelCall:
    """The model calls of one session, through explicit collaborators."""

    def __init__(self, *, conversation: Conversation, record: Record, window: Window,
                 meter: TokenMeter, ledger: PruningLedger, model: ModelInUse,
                 clock: Callable[[], datetime], max_tokens: int):
        self.conversation, self.record, self.window = conversation, record, window
        self.meter, self.ledger, self.model = meter, ledger, model
        self.clock, self.max_tokens = clock, max_tokens

    def request(self, messages: list[Message], turn: Turn, *, flush: bool,
                extra_system: str | None = None) -> tuple[ModelRequest, Layers]:
        """The request for ``messages``, pruned as the ledger says (its new decisions are
        remembered in ``sessions.json``), messages that got no reply sent with the one
        after them (``fold_unanswered``), with the notes automatic recall found in front of
        the user's message (not in a flush), and the turn's ``ask`` after them (sent, never
        kept)."""
        window, record = self.window, self.record
        layers, model, budget = turn.layers or window.layers(), window.model, window.budget
        turn.layers = None  # a later step reads them anew: a tool may have written a file
        stored = record.entry.get("prunedResults") or {}
        sent, decisions = self.ledger.apply(
            messages, stored, mode=prune_mode(self.ledger.cfg, model.uses_cache),
            now=self.clock().timestamp(), last_call_at=record.entry.get("lastModelCallAt"),
            context_window=budget.context_window,
            tokens_of=lambda m: estimate_messages(m) * self.meter.ratio)
        if decisions != stored:
            live = ({m.id for m in self.conversation.history.messages}
                    | {m.id for m in messages})
            record.patch(prunedResults={k: v for k, v in decisions.items() if k in live})
        sent = fold_unanswered(sent)
        if turn.recall and not flush:
            sent = turn.recall.apply(sent)
        if turn.aside and not flush:
            sent = with_aside(sent, turn.aside)
        if turn.ask is not None:
            sent = [*sent, turn.ask]
        request = assemble(layers, self.conversation.history.summary, sent, window.tools,
                           max_tokens=model.max_tokens or self.max_tokens,
                           cache=model.uses_cache, extra_system=extra_system,
                           tool_choice=turn.tool_choice)
        return request, layers

    def run(self, messages: list[Message], turn: Turn, *, show: bool, flush: bool = False,
            extra_system: str | None = None) -> Generator[Event, None, CallOutcome]:
        """One model call of ``turn`` on ``messages`` (see the module docstring). ``show``:
        stream the text as ``TextDelta`` events (a flush is silent)."""
        turn.token.check()  # stopped between steps: no request
        request, layers = self.request(messages, turn, flush=flush,
                                       extra_system=extra_system)
        guards = self.model.guards
        guards.new_reply()
        last = None if flush else last_answer(messages)
        profile = self.window.model.profile  # the holds are a weak model's guards
        silent = SilentFilter(previous=last[0] if last else "",
                              calls_as_text=profile.holds_json_starts,
                              echoes=profile.holds_echoes)
        parts: list[str] = []
        cut: str | None = None
        if not flush:  # a flush's requests are its own stage (``Waiting("flush")``)
            yield Waiting("model")
            turn.token.check()  # stopped while the front end showed it
        try:
            final = None
            stream = self.model.provider.stream(request)
            try:
                for event in stream:
                    turn.token.check()
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                        shown = silent.feed(event.text)
                        if show and shown:
                            yield TextDelta(shown)
                        if (cut := guards.looping(parts)) is not None:  # its loop once
                            final = Message.assistant(cut, stop_reason=Looping.stop_reason)
                            break
                        if "\n" in event.text and guards.will_ask_again(silent.held):
                            # held back, and a guard will ask again whatever follows: stop
                            # reading, and the server stops generating when we go
                            final = Message.assistant("".join(parts), stop_reason="stopped")
                            break
                    elif isinstance(event, ModelResponse):
                        final = event.message
            finally:  # stopped early: the HTTP response is released now, not at GC
                getattr(stream, "close", lambda: None)()
            if final is None:
                raise ProviderError("the model's stream ended without a reply")
        except ContextOverflowError as exc:
            return Overflowed(exc, layers)
        except ProviderError as exc:
            partial = self._keep_partial(parts, messages, flush)
            if flush:  # not about size: the flush stops, and its caller decides
                raise
            yield ErrorEvent(str(exc))
            return Failed(partial)
        except (Cancelled, KeyboardInterrupt):  # a stop, or a Ctrl-C landing in the stream
            raise Cancelled(self._keep_partial(parts, messages, flush)) from None
        rest = silent.finish()
        kept = guards.clean(final)
        pending: list[Event] = []
        if cut is not None:
            log.info("the reply repeated %r; stopped", final.text[-60:])
            if show:
                yield Notice(Looping.notice)
        elif show and rest and not (final.tool_calls and not kept.text.strip()):
            pending.append(TextDelta(rest))  # held back (a NO_REPLY start, …), not stray
        if show and cut is None and final.stop_reason == "length":
            pending.append(Notice(f"the reply stopped at the model's output limit "
                                  f"({request.max_tokens:,} tokens)"))
        kept.flush, kept.model = flush, self.window.model.ref  # one form: provider/model
        return Replied(kept, request, layers, pending)

    def keep(self, replied: Replied, target: list[Message], turn: Turn, *,
             drop: bool = False) -> None:
        """Keep a reply of ``turn``: in ``target`` (the history, or a flush's own turn) and
        on disk, or with ``drop`` on disk only, marked ``retried``; then learn from the
        call's usage."""
        message = replied.message
        if drop:
            message.retried = True
            self.conversation.keep_on_disk(message)
        else:
            self.conversation.append(message, target)
        self._record(message.usage or Usage(), replied.layers, replied.request, turn,
                     in_history=target is self.conversation.history.messages)

    def _keep_partial(self, parts: list[str], messages: list[Message], flush: bool) -> str:
        """Persist the text streamed before an error or Ctrl-C, marked ``aborted``; returns
        it (nothing for a flush, whose words are never shown)."""
        if parts:
            self.conversation.append(Message.assistant(
                "".join(parts), aborted=True, flush=flush, model=self.window.model.ref),
                messages)
        return "" if flush else "".join(parts)

    def _record(self, usage: Usage, layers: Layers, request: ModelRequest, turn: Turn, *,
                in_history: bool) -> None:
        """Learn from the call's usage and record it in ``sessions.json``."""
        window = self.window
        self.meter.record(usage, request, window.fixed_tokens(layers), in_history=in_history)
        latest: dict[str, Any] = ({"totalTokens": usage.prompt_tokens, "totalTokensFresh": True}
                                  if usage.prompt_tokens else {})
        if in_history:  # the user's turn so far (OpenClaw: the latest run)
            turn.usage += usage
            latest.update(inputTokens=turn.usage.input_tokens,
                          outputTokens=turn.usage.output_tokens)
        self.record.patch(add={"cumulativeInputTokens": usage.input_tokens,
                               "cumulativeOutputTokens": usage.output_tokens,
                               "cumulativeCacheReadTokens": usage.cache_read_tokens,
                               "cumulativeCacheWriteTokens": usage.cache_write_tokens},
                          **latest,
                          contextTokens=window.budget.context_window,
                          contextUsedTokens=window.used(layers=layers),
                          tokenRatio=round(self.meter.ratio, 4),
                          lastModelCallAt=self.clock().timestamp(), model=window.model.ref)
