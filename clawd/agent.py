"""The turn loop: prune → flush? → compact? → request → tools → persist, as a stream of events.

A ``Session`` is one conversation (a session key of one agent): its transcript, its entry in
``sessions.json`` and its in-memory history. ``run_turn`` appends the user's message and runs
as many model/tool steps as the reply needs (up to ``maxSteps``), persisting every message as
it happens. Before every model request the context is measured (provider-reported prompt of
the last call plus estimates of what came after) and, when due, the silent memory flush and
compaction run first. Ctrl-C keeps the partial reply, marked ``aborted``. Nothing here
prints; front ends render the events.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime
from pathlib import Path
from typing import Any

from clawd import context as ctxmod
from clawd.access import Access, offered
from clawd.compaction import find_cut, summarize
from clawd.config import AgentDefaults, Config
from clawd.errors import ClawdError, ContextOverflowError, ProviderError, ProviderSetupError
from clawd.events import (Compacted, ErrorEvent, Event, Flushed, Notice, TextDelta,
                          ToolFinished, ToolStarted, TurnDone)
from clawd.flush import (SilentFilter, append_flush_notes, flush_due, flush_prompt,
                         flush_system, is_blank, is_silent)
from clawd.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage, new_id
from clawd.providers.base import Provider
from clawd.pruning import PrunedEntry, cap_tool_result, prune, reapply
from clawd import session_lock
from clawd.session_files import KEY_ENTRY, session_key_of
from clawd.sessions import SessionStore, new_entry, normalize_key
from clawd.templates import render
from clawd.tokens import (MIN_ROOM, Budget, calibration, estimate_messages, estimate_request,
                          estimate_text, estimate_tools, make_budget)
from clawd.tools.base import Tool, ToolContext
from clawd.transcript import (History, Transcript, apply_compaction, apply_undo,
                              build_history)
from clawd.workspace import daily_log_path, is_writable

log = logging.getLogger(__name__)
OVERFLOW_ATTEMPTS = 3


def blank_notice(reply: str, retried: bool) -> str:
    """The one line shown when a user turn ends with nothing to show."""
    what = "replied NO_REPLY" if is_silent(reply) else "returned an empty reply"
    return f"the model {what}{' twice (asked again once)' if retried else ''}; nothing to show"


@dataclass
class Runtime:
    """One agent's fixed surroundings, built once by the front end."""

    config: Config
    agent_id: str
    settings: AgentDefaults
    workspace: Path
    sessions_dir: Path
    provider_for: Callable[[str], Provider]
    context_window_for: Callable[[str], int]
    uses_cache: Callable[[str], bool] = lambda ref: False
    max_tokens_for: Callable[[str], int] | None = None
    tools: list[Tool] = field(default_factory=list)
    memory: Any = None
    allow_exec: bool = False
    approve: Callable[[str], bool] | None = None
    clock: Callable[[], datetime] = lambda: datetime.now().astimezone()

    @property
    def store(self) -> SessionStore:
        return SessionStore(self.sessions_dir / "sessions.json", now=self.now_iso)

    def now_iso(self) -> str:
        return self.clock().isoformat(timespec="milliseconds")


def agent_budget(rt: Runtime, model_ref: str) -> Budget:
    """The flush and compaction points and the shares of the window for one model."""
    comp = rt.settings.compaction
    return make_budget(rt.context_window_for(model_ref), comp.reserve_tokens_floor,
                       comp.memory_flush.soft_threshold_tokens, comp.memory_flush.soft_threshold,
                       comp.threshold_ratio, comp.keep_recent_tokens, rt.settings.max_tokens)


def agent_layers(rt: Runtime, key: str, budget: Budget) -> ctxmod.Layers:
    """Layers 0 and 1 of a request in session ``key``: system prompt and workspace files."""
    access = Access.of(key, rt.settings, rt.workspace)
    return ctxmod.build_layers(
        rt.workspace, [t.spec for t in offered(rt.tools, access)], private=access.private,
        workspace_files=access.workspace_files, now=rt.clock(),
        max_chars=rt.settings.bootstrap_max_chars,
        read_only=rt.settings.workspace_access != "rw", max_tokens=budget.files)


def check_window(rt: Runtime, key: str, model_ref: str) -> None:
    """Refuse, in one line, a model whose window cannot hold the fixed layers (system prompt,
    tool schemas, workspace files) and leave ``MIN_ROOM`` for the conversation."""
    budget = agent_budget(rt, model_ref)
    layers = agent_layers(rt, key, budget)
    fixed = (estimate_text(layers.system) + estimate_text(layers.project)
             + estimate_tools([t.spec for t in rt.tools]))
    if fixed + MIN_ROOM <= budget.compact_at:
        return
    need = -(-(fixed + MIN_ROOM) * 4 // 3 // 1024) * 1024  # compaction at 3/4, in 1k steps
    raise ClawdError(
        f"{model_ref}: a context window of {budget.context_window:,} tokens is too small: "
        f"the system prompt, tools and workspace files take {fixed:,} tokens and leave less "
        f"than {MIN_ROOM:,} for the conversation; set the model's real window "
        f"(models.providers.{model_ref.partition('/')[0]}.models[].contextWindow, at least "
        f"{need:,}) and run its server with it, or choose a model with a larger window")


def _pruned_lines(entries: Iterable[PrunedEntry], messages: list[Message]) -> list[str]:
    """One line per pruned tool result, in the order of ``messages``."""
    order = {m.id: i for i, m in enumerate(messages)}
    return [f"{p.tool_name or 'tool'} result {p.message_id}: {p.action} "
            f"({p.chars_before} → {p.chars_after} chars)"
            for p in sorted(entries, key=lambda p: order[p.message_id])]


def session_model(entry: dict[str, Any] | None, settings: Any) -> str:
    """The model a session uses: the one pinned to it (``/model``, ``/new MODEL``), else the
    agent's configured model, so a config change reaches old sessions."""
    return (entry or {}).get("modelOverride") or settings.model


class Session:
    """A conversation under one session key."""

    def __init__(self, runtime: Runtime, key: str, model: str | None = None, *,
                 fresh: bool = False, pin: bool = True):
        """``model`` is pinned to the session (``modelOverride``) unless ``pin`` is false:
        then it is used by this process only (``--model``, one-shot as in ``llm -m``)."""
        self.rt = runtime
        self.key = normalize_key(key)
        self.access = Access.of(self.key, runtime.settings, runtime.workspace)
        self.tools = offered(runtime.tools, self.access)
        self.store = runtime.store
        # one writer per session: held until this Session is closed or collected
        held = session_lock.acquire(runtime.sessions_dir, self.key)
        self._release = weakref.finalize(self, session_lock.release, held)
        self.run_model = None if pin else model
        pinned = model if pin else None
        entry = self.store.get(self.key)
        check_window(runtime, self.key, model or session_model(entry, runtime.settings))
        if fresh or entry is None or not entry.get("sessionId"):
            entry = self._start(pinned)
        elif pinned and pinned != entry.get("modelOverride"):
            entry = self.store.patch(self.key, base=entry, model=pinned,
                                     modelOverride=pinned) or entry
        self.entry = entry
        self.transcript = Transcript.create(Path(entry["sessionFile"]), entry["sessionId"],
                                            runtime.agent_id, key=self.key,
                                            model=entry.get("model"),
                                            modelOverride=entry.get("modelOverride"),
                                            timestamp=entry.get("createdAt"))
        loaded = self.transcript.load(quiet=True)
        if loaded.header is not None and session_key_of(loaded) is None:
            # written before headers named the key: recorded once, so a rebuilt store finds it
            self.transcript.append({"type": KEY_ENTRY, "key": self.key})
        self.warnings = self._new_warnings(loaded.invalid_lines, loaded.warnings)
        try:
            window = runtime.context_window_for(self.model_ref)
        except ClawdError:  # an unusable model is reported when the session is used
            window = self.entry.get("contextTokens")
        if self.entry.get("contextTokens") != window:  # OpenClaw's meaning: the window
            self._patch(contextTokens=window, touch=False)
        self.history: History = build_history(loaded.entries)
        # (reported prompt + output, history length, fixed-layer tokens) of the last call;
        # None when no call since the last compaction reported usage: estimate everything.
        self._base: tuple[int, int, int | None] | None = self._reported_base()
        self._provider: Provider | None = None
        # provider tokens per estimated token, learnt from each call's reported usage
        self.token_ratio: float = float(self.entry.get("tokenRatio") or 1.0)
        self._flush_skip_logged: int | None = None  # the cycle whose skip was logged
        self.last_pruned: list[str] | None = None  # None: no request from this process yet
        self.last_partial = ""  # text of the last reply cut off mid-stream
        self._turn_usage = Usage()  # the current (or last) user turn's model calls

    def close(self) -> None:
        """Let other processes use this session (also done when the Session is collected)."""
        self._release()

    def _new_warnings(self, invalid: list[int], warnings: list[str]) -> list[str]:
        """The transcript's unreadable lines not reported before: each is warned about
        once (the numbers reported are kept in ``invalidLines``), not on every run."""
        known = set(self.entry.get("invalidLines") or [])
        fresh = [w for n, w in zip(invalid, warnings) if n not in known]
        for warning in fresh:
            log.warning(warning)
        if fresh:
            self._patch(invalidLines=sorted(known | set(invalid)), touch=False)
        return fresh

    def _reported_base(self) -> tuple[int, int, None] | None:
        """The token base from the newest usage on disk (after the latest compaction)."""
        messages = self.history.messages
        for index in range(len(messages) - 1, self.history.after_compaction - 1, -1):
            usage = messages[index].usage
            if usage is not None and usage.prompt_tokens:
                # the fixed layers of that call are taken to be today's (None)
                return usage.prompt_tokens + usage.output_tokens, index + 1, None
        return None

    # --- session store ----------------------------------------------------------------------

    def _start(self, model: str | None) -> dict[str, Any]:
        session_id = new_id() + new_id()[:4]
        path = self.rt.sessions_dir / f"{session_id}.jsonl"
        ref = model or session_model(None, self.rt.settings)
        entry = new_entry(session_id, path, ref, self.rt.now_iso(),
                          context_window=self.rt.context_window_for(ref))
        if model:
            entry["modelOverride"] = model
        return self.store.update(self.key, lambda old: entry) or entry

    def _patch(self, add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
               touch: bool = True, **fields: Any) -> None:
        """Set fields, add to counters and copy fields in the store, against what is on disk
        (re-creating a vanished entry from this copy); ``self.entry`` becomes what is there.
        ``touch=False``: housekeeping, not activity (``updatedAt`` is left alone)."""
        self.entry = self.store.patch(self.key, base=self.entry, add=add, copy=copy,
                                      touch=touch, **fields) or self.entry

    @property
    def model_ref(self) -> str:
        return self.run_model or session_model(self.entry, self.rt.settings)

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
                self._provider = self.rt.provider_for(self.model_ref)
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
        target = ref or self.rt.settings.model
        self.rt.provider_for(target)  # fails here, with a clear message, if unusable
        check_window(self.rt, self.key, target)
        self._provider = None
        self.run_model = None
        self._patch(model=target, modelOverride=ref)

    # --- budget -----------------------------------------------------------------------------

    @property
    def budget(self) -> Budget:
        return agent_budget(self.rt, self.model_ref)

    def layers(self) -> ctxmod.Layers:
        return agent_layers(self.rt, self.key, self.budget)

    @property
    def max_tokens(self) -> int:
        find = self.rt.max_tokens_for
        return find(self.model_ref) if find else self.rt.settings.max_tokens

    @property
    def tool_specs(self) -> list:
        return [t.spec for t in self.tools]

    @cached_property
    def _tool_tokens(self) -> int:
        """The tool schemas' tokens (they never change for a runtime)."""
        return estimate_tools(self.tool_specs)

    def _fixed_tokens(self, layers: ctxmod.Layers) -> int:
        return estimate_text(layers.system) + estimate_text(layers.project) + self._tool_tokens

    def context_tokens(self, extra: list[Message] | None = None,
                       layers: ctxmod.Layers | None = None) -> int:
        """The context size now: last reported prompt plus estimates of everything since."""
        fixed = self._fixed_tokens(layers or self.layers())
        estimated = estimate_messages(extra or [])
        if self._base is not None:
            reported, count, fixed_then = self._base
            estimated += (fixed - (fixed if fixed_then is None else fixed_then)
                          + estimate_messages(self.history.messages[count:]))
            return reported + round(estimated * self.token_ratio)
        estimated += fixed + estimate_messages(ctxmod.history_messages(
            self.history.summary, self.history.messages))
        return round(estimated * self.token_ratio)

    # --- a turn -----------------------------------------------------------------------------

    def run_turn(self, text: str) -> Iterator[Event]:
        """Run one user turn to the end, yielding events.

        The turn always ends with something the user sees: a blank answer (empty or
        ``NO_REPLY``) is asked again once with a nudge, and a second blank one is reported
        in a notice.
        """
        message = Message.user(text)
        steps, reply, aborted, appended, nudge = 0, "", False, False, None
        interrupted = failed = False
        self._turn_usage = Usage()
        if (refusal := self._too_large(message)) is not None:
            message.refused = True
            self.transcript.append_message(message)  # kept on disk, never sent
            yield ErrorEvent(refusal)
            yield self.turn_done("", failed=True)
            return
        try:
            yield from self._maintain([message])
            self._append(message)
            appended = True
            while True:
                steps += 1
                # asked again after a blank answer: in words this time, no tool calls
                result = yield from self._step(self.history.messages, show=True,
                                               extra_system=nudge, retry_blank=nudge is None,
                                               tool_choice="none" if nudge else "auto")
                if result is None:  # an error, said in an ErrorEvent
                    failed = True
                    if self.last_partial:  # cut off mid-stream: the reply so far, kept
                        reply, aborted = self.last_partial, True
                    break
                reply = result.text
                if result.retried:
                    log.info("the model gave a blank answer (%r); asking again", reply[:40])
                    nudge = render("blank_retry.md.j2", silent=is_silent(reply)).strip()
                    continue
                if not result.tool_calls or steps >= self.rt.settings.max_steps:
                    if result.tool_calls:
                        yield Notice(f"stopped after {steps} model steps (agents.defaults."
                                     f"maxSteps); send a message to continue")
                    elif is_blank(reply):
                        yield Notice(blank_notice(reply, nudge is not None))
                    break
                yield from self._run_tools(result, self.history.messages, flush=False)
                yield from self._maintain([])
        except KeyboardInterrupt:
            aborted = interrupted = True
            reply = self.last_partial or reply
            if not appended:  # interrupted during a flush or compaction: keep what was typed
                self._append(message)
            yield Notice("reply interrupted" + ("" if is_blank(reply)
                                                else "; the partial reply was kept"))
        except ClawdError as exc:  # e.g. a pinned model that cannot be used: said, then ended
            failed = True
            yield ErrorEvent(str(exc))
        yield self.turn_done("" if is_silent(reply) else reply, aborted, steps, interrupted,
                             failed)

    def turn_done(self, text: str, aborted: bool = False, steps: int = 0,
                  interrupted: bool = False, failed: bool = False,
                  usage: Usage | None = None) -> TurnDone:
        """The event that ends a user turn, with where it happened and its usage (by default
        that of the model calls of the turn that ``run_turn`` ran last)."""
        return TurnDone(text, aborted, steps, interrupted, failed,
                        self._turn_usage if usage is None else usage,
                        self.key, self.entry["sessionId"], self.model_ref)

    def undo_turn(self, verb: str = "undo") -> tuple[Message, bool]:
        """Take the last turn (its user message and everything after it) out of the history
        the model sees; the transcript keeps it and records an ``undo`` entry.

        Returns the turn's user message, and whether a memory flush ran after it (the notes
        it saved stay in ``memory/``). A turn a compaction summarised, even in part, cannot
        be undone: the summary would still tell it. ``verb`` (``undo``, ``retry``) words the
        refusal.
        """
        messages = self.history.messages
        request = next((m for m in reversed(messages) if m.role == "user"), None)
        if request is None:
            raise ClawdError(f"nothing to {verb}: " + (
                "the earlier turns are summarised (compacted) and cannot be taken back"
                if self.history.summary else "this session has no turns yet"))
        if request.id == self.history.summarised_turn:
            raise ClawdError(f"cannot {verb}: the last turn was partly summarised by a "
                             f"compaction")
        entries = self.transcript.load(quiet=True).entries
        start = next((i for i, e in enumerate(entries) if e.get("id") == request.id),
                     len(entries))
        flushed = any(e.get("flush") and e.get("role") == "user" for e in entries[start:])
        self.transcript.append({"type": "undo", "messageId": request.id, "reason": verb})
        apply_undo(self.history, request.id)
        self._base = self._reported_base()
        self._patch(contextUsedTokens=self.context_tokens(), totalTokensFresh=False)
        return request, flushed

    def _too_large(self, message: Message) -> str | None:
        """Why a user message can never be sent (it alone overfills the window), or None."""
        layers = self.layers()
        fixed, budget = self._fixed_tokens(layers), self.budget
        size = round(estimate_messages([message]) * self.token_ratio)
        room = budget.compact_at - round(fixed * self.token_ratio)
        if size <= room:
            return None
        return (f"your message is {size:,} tokens and cannot fit: the model's window is "
                f"{budget.context_window:,} tokens, the system prompt, tools and workspace "
                f"files take {round(fixed * self.token_ratio):,} and "
                f"{budget.context_window - budget.compact_at:,} are kept for the reply, which "
                f"leaves {max(room, 0):,} for a message; nothing was sent (the message is kept "
                f"in the transcript {self.transcript.path}, out of the conversation)")

    def _append(self, message: Message, target: list[Message] | None = None) -> None:
        """Persist a message, then add it to ``target`` (the history by default)."""
        self.transcript.append_message(message)
        (self.history.messages if target is None else target).append(message)

    def _request(self, messages: list[Message], extra_system: str | None = None,
                 tool_choice: str = "auto"):
        layers = self.layers()
        request = ctxmod.assemble(layers, self.history.summary, self._pruned(messages),
                                  self.tool_specs, max_tokens=self.max_tokens,
                                  cache=self.rt.uses_cache(self.model_ref),
                                  extra_system=extra_system, tool_choice=tool_choice)
        return request, layers

    def _pruned(self, messages: list[Message]) -> list[Message]:
        """The messages to send: earlier pruning decisions (kept in ``sessions.json`` as
        ``prunedResults``) applied again, identically, then this request's own pruning."""
        cfg = self.rt.settings.context_pruning
        mode = self._prune_mode()
        stored: dict[str, str] = self.entry.get("prunedResults") or {}
        decisions = dict(stored)
        sent, kept = reapply(messages, decisions if mode != "off" else {}, cfg)
        pruned = prune(sent, cfg, mode=mode, now=self.rt.clock().timestamp(),
                       last_call_at=self.entry.get("lastModelCallAt"),
                       context_window=self.budget.context_window,
                       tokens_of=lambda m: estimate_messages(m) * self.token_ratio)
        first = {e.message_id: e.chars_before for e in kept}
        for e in pruned.entries:
            e.chars_before = first.get(e.message_id, e.chars_before)
            if not (e.action == "soft-trim" and e.message_id in decisions):
                decisions[e.message_id] = e.action  # a trim of a trim stays one trim
        if decisions != stored:
            live = {m.id for m in self.history.messages} | {m.id for m in messages}
            self._patch(prunedResults={k: v for k, v in decisions.items() if k in live})
        merged = {e.message_id: e for e in kept} | {e.message_id: e for e in pruned.entries}
        self.last_pruned = _pruned_lines(merged.values(), messages)
        return pruned.messages

    def _prune_mode(self) -> str:
        cfg = self.rt.settings.context_pruning
        return cfg.mode or ("cache-ttl" if self.rt.uses_cache(self.model_ref) else "off")

    def pruned_results(self) -> list[str]:
        """What pruning took out of the last request, one line per tool result (``/context
        detail``): this process's last request, or before there is one, the decisions
        remembered in ``sessions.json`` (``prunedResults``) as the next request re-applies
        them."""
        if self.last_pruned is not None:
            return self.last_pruned
        if self._prune_mode() == "off":
            return []
        messages = self.history.messages
        _, kept = reapply(messages, self.entry.get("prunedResults") or {},
                          self.rt.settings.context_pruning)
        return _pruned_lines(kept, messages)

    def _step(self, messages: list[Message], *, show: bool, flush: bool = False,
              extra_system: str | None = None, retry_blank: bool = False,
              tool_choice: str = "auto") -> Iterator[Event]:
        """One model call with overflow recovery; returns the assistant message (or None).

        ``retry_blank``: a final answer that shows nothing is marked ``retried`` and kept
        out of ``messages`` (it is still written to the transcript), so the caller can ask
        again without the blank answer in the request.
        """
        for attempt in range(1, OVERFLOW_ATTEMPTS + 1):
            request, layers = self._request(messages, extra_system, tool_choice)
            silent, partial = SilentFilter(), []
            self.last_partial = ""
            try:
                final = None
                for event in self.provider.stream(request):
                    if isinstance(event, TextDelta):
                        partial.append(event.text)
                        shown = silent.feed(event.text)
                        if show and shown:
                            yield TextDelta(shown)
                    elif isinstance(event, ModelResponse):
                        final = event.message
                if final is None:
                    raise ProviderError("the model's stream ended without a reply")
            except ContextOverflowError as exc:
                if flush:
                    # The flush's own request does not fit: give up the flush (``flush``
                    # says so) and let the recovery around it go on; nothing was lost.
                    log.warning("the memory flush request does not fit: %s", exc)
                    return None
                compacted = False
                if attempt < OVERFLOW_ATTEMPTS:
                    # compact() runs the cycle's flush first, before the cut.
                    compacted = yield from self.compact(reason="overflow",
                                                        keep_divisor=2 ** attempt,
                                                        within_turn=True)
                if not compacted:
                    times = "once" if attempt == 2 else f"{attempt - 1} times"
                    why = (f"even after compacting {times}" if attempt > 1 else
                           "and there is nothing left to compact")
                    room = ctxmod.describe_room(ctxmod.report(
                        layers, self.history.summary, messages, self.tool_specs))
                    yield ErrorEvent(f"the conversation does not fit the model's context "
                                     f"window ({exc}) {why}; {room}; nothing was lost")
                    return None
                continue
            except ProviderError as exc:
                self._keep_partial(partial, messages, flush)
                yield ErrorEvent(str(exc))
                return None
            except KeyboardInterrupt:
                self._keep_partial(partial, messages, flush)
                raise
            if show and (rest := silent.finish()):
                yield TextDelta(rest)
            final.flush = flush
            final.model = self.model_ref  # one form in the transcript: provider/model
            if retry_blank and not final.tool_calls and is_blank(final.text):
                final.retried = True
                self.transcript.append_message(final)
            else:
                self._append(final, messages)
            self._after_call(final.usage, layers, messages, request)
            return final
        return None

    def _keep_partial(self, parts: list[str], messages: list[Message], flush: bool) -> None:
        """Persist the text streamed before an error or Ctrl-C, marked ``aborted``."""
        self.last_partial = "" if flush else "".join(parts)
        if parts:
            self._append(Message.assistant("".join(parts), aborted=True, flush=flush,
                                           model=self.model_ref),
                         messages)

    def _after_call(self, usage: Usage | None, layers: ctxmod.Layers,
                    messages: list[Message], request: ModelRequest) -> None:
        usage = usage or Usage()
        if usage.prompt_tokens:
            self.token_ratio = calibration(usage.prompt_tokens, estimate_request(request),
                                           self.token_ratio)
        if messages is self.history.messages and usage.prompt_tokens:
            self._base = (usage.prompt_tokens + usage.output_tokens,
                          len(self.history.messages), self._fixed_tokens(layers))
        if messages is self.history.messages:  # the user's turn (OpenClaw: the latest run)
            self._turn_usage += usage
        latest = ({"totalTokens": usage.prompt_tokens, "totalTokensFresh": True}
                  if usage.prompt_tokens else {})
        self._patch(add={"cumulativeInputTokens": usage.input_tokens,
                         "cumulativeOutputTokens": usage.output_tokens,
                         "cumulativeCacheReadTokens": usage.cache_read_tokens,
                         "cumulativeCacheWriteTokens": usage.cache_write_tokens},
                    inputTokens=self._turn_usage.input_tokens,
                    outputTokens=self._turn_usage.output_tokens, **latest,
                    contextTokens=self.budget.context_window,
                    contextUsedTokens=self.context_tokens(layers=layers),
                    tokenRatio=round(self.token_ratio, 4),
                    lastModelCallAt=self.rt.clock().timestamp(), model=self.model_ref)

    def _run_tools(self, reply: Message, target: list[Message], *, flush: bool
                   ) -> Iterator[Event]:
        pending = list(reply.tool_calls)
        try:
            while pending:
                call = pending[0]
                yield ToolStarted(call.id, call.name, call.arguments)
                text, is_error = self._call_tool(call, flush=flush)
                result = Message.tool_result(call, text, is_error, flush=flush)
                self._append(result, target)
                pending.pop(0)
                yield ToolFinished(call.id, call.name, is_error, text)
        except KeyboardInterrupt:
            for call in pending:  # every call keeps a result, so the history stays valid
                self._append(Message.tool_result(call, "interrupted by the user", True,
                                                 flush=flush),
                             target)
            raise

    def _call_tool(self, call: ToolCall, *, flush: bool = False) -> tuple[str, bool]:
        tool = next((t for t in self.tools if t.spec.name == call.name), None)
        if tool is None:
            return f"unknown tool: {call.name}", True
        ctx = ToolContext(self.rt.workspace, self.rt.settings, allow_exec=self.rt.allow_exec,
                          approve=self.rt.approve, memory=self.rt.memory,
                          today=lambda: self.rt.clock().date(), access=self.access,
                          flush=flush)
        try:
            text, is_error = tool.run(call.arguments, ctx), False
        except ClawdError as exc:
            text, is_error = f"error: {exc}", True
        except Exception as exc:  # noqa: BLE001 - a tool bug must not end the turn
            # one line for the user (the model gets the error as the result); the
            # traceback only with debug logging
            log.warning("tool %s failed: %s: %s", call.name, type(exc).__name__, exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            text, is_error = f"error: {type(exc).__name__}: {exc}", True
        return cap_tool_result(text, self._result_chars(text)), is_error

    def _result_chars(self, text: str) -> int:
        """The cap of one tool result: ``maxOutputChars``, and at most half the window, so
        that a result always fits a request next to the fixed layers and a summary."""
        limit, room = self.rt.settings.tools.max_output_chars, self.budget.context_window // 2
        if len(text) <= room:  # a token is at least a character: it fits, no need to count
            return limit
        tokens = estimate_text(text)
        return min(limit, len(text) * room // tokens) if tokens > room else limit

    # --- flush and compaction ---------------------------------------------------------------

    def _maintain(self, incoming: list[Message]) -> Iterator[Event]:
        """Before a request: flush when due, then compact when over the compaction point."""
        budget = self.budget
        used = self.context_tokens(incoming)
        if used >= budget.flush_at:
            yield from self._flush_if_due(used)
            used = self.context_tokens(incoming)
        if used > budget.compact_at and self.rt.settings.compaction.enabled:
            # no incoming message: a turn in progress, whose own steps may be summarised
            yield from self.compact(reason="auto", incoming=incoming,
                                    within_turn=not incoming)

    def _flush_if_due(self, used: int | None = None, *,
                      view: list[Message] | None = None) -> Iterator[Event]:
        """Flush when due; ``used=None`` means the flush point is known to be crossed
        (before ``/compact``, a reset and on a context overflow). ``view``: see ``flush``."""
        cfg = self.rt.settings.compaction.memory_flush
        flush_at = self.budget.flush_at
        if not flush_due(self.entry, flush_at if used is None else used, flush_at, cfg):
            return
        if not is_writable(self.rt.workspace, self.rt.settings.workspace_access):
            cycle = self.entry.get("compactionCount", 0)
            if self._flush_skip_logged != cycle:  # one log line per skipped cycle
                log.info("memory flush skipped: the workspace is not writable")
                self._flush_skip_logged = cycle
                yield Flushed(skipped="the workspace is not writable")
            return
        yield from self.flush(view)

    def flush_before_end(self) -> Iterator[Event]:
        """Before /new, /reset or an automatic reset: the once-per-cycle flush, if this
        session has turns that were not flushed in this cycle."""
        if any(m.role == "user" for m in self.history.messages):
            yield from self._flush_if_due()

    def flush(self, view: list[Message] | None = None) -> Iterator[Event]:
        """Run the silent memory-flush turn now (its entries stay out of the history).

        The turn sees the history, or ``view`` when given: on a context overflow the whole
        history no longer fits a request, so it sees the part about to be summarised. Its
        tool calls are not shown; only the ``Flushed`` event says which files were written.
        A flush that writes no file but answers with words other than ``NO_REPLY`` has those
        words appended to today's daily log (flush by reply).
        """
        cfg = self.rt.settings.compaction.memory_flush
        today = self.rt.clock().date()
        turn = list(self.history.messages if view is None else view)
        start = len(turn)
        self._append(Message.user(flush_prompt(cfg, today), flush=True), turn)
        files: list[str] = []
        failed, answer = False, ""
        for _ in range(self.rt.settings.max_steps):
            result = yield from self._step(turn, show=False, flush=True,
                                           extra_system=flush_system(cfg, today))
            if result is None:
                failed = True
                break
            answer = result.text
            if not result.tool_calls:
                break
            for _event in self._run_tools(result, turn, flush=True):
                pass  # the flush is silent: no tool lines or events
            files += [str(c.arguments.get("path")) for c, r in
                      zip(result.tool_calls, turn[-len(result.tool_calls):])
                      if c.name in ("write", "edit") and not r.is_error]
        if failed:
            yield Notice("the memory flush did not complete; continuing")
            return
        if not files and not is_blank(answer):
            try:
                self.access.check_flush_write(daily_log_path(today))
                files.append(append_flush_notes(self.rt.workspace, answer, self.rt.clock()))
            except (ClawdError, OSError) as exc:  # the notes stay in the transcript
                yield Notice(f"the memory flush's notes were not saved: {exc}")
        log.info("memory flush: %d entries, wrote %s", len(turn) - start, files or "nothing")
        self._patch(memoryFlushAt=self.rt.clock().isoformat(timespec="seconds"),
                    copy={"memoryFlushCompactionCount": "compactionCount"},
                    add={"memoryFlushCount": 1})
        if self.rt.memory is not None and files:
            self.rt.memory.mark_dirty()
        yield Flushed(files=sorted(set(files)))

    def compact(self, instructions: str | None = None, *, reason: str = "manual",
                incoming: list[Message] | None = None, keep_divisor: int = 1,
                within_turn: bool = False) -> Generator[Event, None, bool]:
        """Summarise older history; returns whether anything was compacted.

        ``within_turn`` (a turn in progress outgrew the window): the turn's earlier steps
        may be summarised too; its user message stays verbatim. A manual ``/compact``
        summarises at least everything before the latest turn. The cycle's flush runs
        first, before the cut, and only when there is something to cut (a ``/compact`` with
        nothing to do must not use up the cycle's flush). ``auto`` callers flushed already,
        at the flush point.
        """
        comp = self.rt.settings.compaction
        messages = self.history.messages
        keep = self.budget.keep_recent
        if reason == "overflow":  # the server's window is smaller than we were told
            keep = min(keep, estimate_messages(messages))
        keep //= keep_divisor
        cut = find_cut(messages, keep, within_turn=within_turn)
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        if cut == 0 and reason == "manual" and users and users[-1] > 0:
            cut = users[-1]  # asked for: everything before the latest turn
        if cut == 0:
            if reason == "manual":
                yield Notice(f"nothing to compact: the history ({estimate_messages(messages)} "
                             f"tokens) is one turn, and the latest turn is always kept")
            return False
        request = messages[users[-1]] if users and cut > users[-1] else None
        if reason != "auto":
            yield from self._flush_if_due(view=messages[:cut] if reason == "overflow" else None)
        before = self.context_tokens(incoming)
        budget = self.budget
        summary = summarize(self.provider, messages[:cut],
                            previous_summary=self.history.summary, instructions=instructions,
                            settings=comp, max_tokens=budget.summary,
                            max_chunk_tokens=budget.context_window // 2)
        entry = {"type": "compaction", "id": new_id(), "summary": summary.text,
                 "firstKeptId": messages[cut].id if cut < len(messages) else None,
                 "tokensBefore": before, "tokensAfter": 0, "instructions": instructions,
                 "method": summary.method, "reason": reason}
        if request is not None:
            entry["turnMessageId"] = request.id
        apply_compaction(self.history, entry)  # in place: the list stays the same object
        self._base = None
        entry["tokensAfter"] = self.context_tokens(incoming)
        self.transcript.append(entry)
        self._patch(add={"compactionCount": 1}, contextUsedTokens=entry["tokensAfter"],
                    totalTokensFresh=False)
        yield Compacted(before, entry["tokensAfter"], summary.method, summary.dropped)
        return True
