"""Keeping a session within its window: the memory flush and compaction (``Upkeep``).

Before every request ``maintain`` flushes when the context has crossed the flush point (once
per compaction cycle, see ``flush.flush_due``) and compacts when it is over the compaction
point. ``flush`` runs the silent memory-flush turn; ``compact`` summarises the older history
(``compaction.find_cut`` and ``compaction.summarize``) and records a ``compaction`` entry. Both
work through the session's own step, tool runner, transcript and store. A provider error
that is not about size (the server is down) stops either one with a ``ProviderError`` and
leaves the history as it was: only a real overflow is summarised or, at worst, truncated.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator
from typing import TYPE_CHECKING

from clawd.context.access import WRITE_TOOLS
from clawd.context.compaction import find_cut, summarize
from clawd.context.flush import (
    FROM_REPLY,
    FROM_USER,
    append_flush_notes,
    flush_due,
    flush_prompt,
    flush_retry_prompt,
    flush_system,
    is_acknowledgement,
    is_blank,
    listed,
    noted,
    should_ask_again,
    unsaved_words,
)
from clawd.context.layers import history_messages
from clawd.core.errors import ClawdError, ProviderError
from clawd.core.events import Compacted, Event, Flushed, Notice, Waiting
from clawd.core.messages import Message, new_id
from clawd.core.tokens import estimate_messages
from clawd.loop.toolrunner import Calls, calls_of, repeats_writes
from clawd.sessions.transcript import apply_compaction
from clawd.workspace.files import daily_log_path, is_writable

if TYPE_CHECKING:
    from clawd.loop.session import Session

log = logging.getLogger(__name__)


class Upkeep:
    """The flush and compaction of one session."""

    def __init__(self, session: Session):
        self.s = weakref.proxy(session)  # no cycle: a dropped session is released at once
        self._skip_logged: int | None = None  # the cycle whose skipped flush was logged

    def maintain(self, incoming: list[Message]) -> Generator[Event, None, None]:
        """Before a request: flush when due, then compact when over the compaction point.
        ``incoming``: the user's message about to be added (none: a turn in progress, whose
        own earlier steps may be summarised)."""
        s = self.s
        budget = s.budget
        used = s.context_tokens(incoming)
        if used >= budget.flush_at:
            yield from self.flush_if_due(used)
            used = s.context_tokens(incoming)
        if used > budget.compact_at and s.rt.settings.compaction.enabled:
            yield from self.compact(reason="auto", incoming=incoming, within_turn=not incoming)

    def flush_if_due(self, used: int | None = None, *, view: list[Message] | None = None
                     ) -> Generator[Event, None, None]:
        """Flush when due; ``used=None`` means the flush point is known to be crossed
        (before ``/compact``, a reset and on a context overflow). ``view``: see ``flush``."""
        s = self.s
        cfg, flush_at = s.rt.settings.compaction.memory_flush, s.budget.flush_at
        if not flush_due(s.entry, flush_at if used is None else used, flush_at, cfg):
            return
        if not any(m.role == "user" for m in (s.history.messages if view is None else view)):
            return  # nothing said yet to keep: a first message crossed the point on its own
        if not is_writable(s.rt.workspace, s.rt.settings.workspace_access):
            cycle = s.entry.get("compactionCount", 0)
            if self._skip_logged != cycle:  # one log line per skipped cycle
                log.info("memory flush skipped: the workspace is not writable")
                self._skip_logged = cycle
                yield Flushed(skipped="the workspace is not writable")
            return
        yield from self.flush(view)

    def flush(self, view: list[Message] | None = None) -> Generator[Event, None, None]:
        """Run the silent memory-flush turn now (its entries stay out of the history).

        The turn sees the history, or ``view`` when given: on a context overflow the whole
        history no longer fits a request, so it sees the part about to be summarised. Its
        tool calls are not shown; only the ``Flushed`` event says which files were written.
        A flush that writes no file but answers with words other than ``NO_REPLY`` has those
        words appended to today's daily log (flush by reply); a bare acknowledgement ("Done."),
        or ``NO_REPLY`` when the user said something after the conversation's last note, is
        asked once more for the notes themselves, and only the list lines of that second
        answer are saved.
        """
        s = self.s
        yield Waiting("flush")
        cfg, clock = s.rt.settings.compaction.memory_flush, s.rt.clock
        today = clock().date()
        turn = list(s.history.messages if view is None else view)
        start = len(turn)
        s.append(Message.user(flush_prompt(cfg, today), flush=True), turn)
        files: list[str] = []
        answer, asked_again = "", False
        last_calls: Calls | None = None
        for _ in range(s.rt.settings.max_steps):
            try:
                step = yield from s.step(turn, show=False, flush=True,
                                         extra_system=flush_system(cfg, today))
            except ProviderError as exc:  # not about size: the turn stops, nothing is cut
                raise ProviderError(f"the memory flush stopped: {exc}",
                                    status=exc.status) from exc
            if step.message is None:  # its request does not fit: the recovery goes on
                yield Notice("the memory flush did not complete; continuing")
                return
            answer = step.message.text
            calls = step.message.tool_calls
            if not calls and not asked_again and should_ask_again(answer, bool(files),
                                                                   turn[:start]):
                # "Done." or NO_REPLY with nothing written (a weak model's habit): ask once
                retry = flush_retry_prompt(answer, today, noted(turn[:start]),
                                           summarised=bool(s.history.summary))
                s.append(Message.user(retry, flush=True), turn)
                asked_again = True
                continue
            if not calls:
                break
            # the same note as the step before (a small model in a loop): not written
            # again, and the flush ends
            made = calls_of(step.message)
            repeated, last_calls = repeats_writes(made, last_calls), made
            for _event in s.tools.run(step.message, lambda m: s.append(m, turn),
                                      window=s.budget.context_window, flush=True,
                                      repeated=repeated):
                pass  # the flush is silent: no tool lines or events
            if repeated:
                break
            files += [str(c.arguments.get("path")) for c, r in zip(calls, turn[-len(calls):])
                      if c.name in WRITE_TOOLS and not r.is_error]
        notes, source = (listed(answer) if asked_again else answer), FROM_REPLY
        if files or is_blank(notes) or is_acknowledgement(notes):
            notes = ""
        if not files and not notes and asked_again:  # asked twice, and nothing saved
            notes, source = unsaved_words(s.rt.workspace, turn[:start], today), FROM_USER
        if notes:
            try:
                s.access.check_flush_write(daily_log_path(today))
                files.append(append_flush_notes(s.rt.workspace, notes, clock(), source))
            except (ClawdError, OSError) as exc:  # the notes stay in the transcript
                yield Notice(f"the memory flush's notes were not saved: {exc}")
        log.info("memory flush: %d entries, wrote %s", len(turn) - start, files or "nothing")
        s.patch(memoryFlushAt=clock().isoformat(timespec="seconds"),
                copy={"memoryFlushCompactionCount": "compactionCount"},
                add={"memoryFlushCount": 1})
        if s.rt.memory is not None and files:
            s.rt.memory.mark_dirty()
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
        s = self.s
        messages = s.history.messages
        keep = s.budget.keep_recent
        if reason == "overflow":  # the server's window is smaller than we were told
            keep = min(keep, estimate_messages(messages))
        cut = find_cut(messages, keep // keep_divisor, within_turn=within_turn)
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
            yield from self.flush_if_due(view=messages[:cut] if reason == "overflow" else None)
        before = s.context_tokens(incoming)
        budget = s.budget
        yield Waiting("compaction")
        try:
            summary = summarize(s.provider, messages[:cut], previous_summary=s.history.summary,
                                instructions=instructions, settings=s.rt.settings.compaction,
                                max_tokens=budget.summary,
                                max_chunk_tokens=budget.context_window // 2)
        except ProviderError as exc:  # not about size (an outage): the history stays as is
            raise ProviderError(f"compaction stopped, the history is unchanged: {exc}",
                                status=exc.status) from exc
        replaced = estimate_messages(history_messages(s.history.summary, messages[:cut]))
        if summary.method != "truncated" and estimate_messages(
                history_messages(summary.text, [])) >= replaced:
            # a short history: its summary would take more room than the messages it replaces
            yield Notice(f"not compacted: the summary would not be smaller than the "
                         f"{cut} message{'s' * (cut != 1)} it replaces ({replaced:,} tokens); "
                         f"the history is unchanged")
            return False
        entry = {"type": "compaction", "id": new_id(), "summary": summary.text,
                 "firstKeptId": messages[cut].id if cut < len(messages) else None,
                 "tokensBefore": before, "tokensAfter": 0, "instructions": instructions,
                 "method": summary.method, "reason": reason}
        if request is not None:
            entry["turnMessageId"] = request.id
        apply_compaction(s.history, entry)  # in place: the list stays the same object
        s.meter.forget()
        entry["tokensAfter"] = s.context_tokens(incoming)
        s.transcript.append(entry)
        s.patch(add={"compactionCount": 1}, contextUsedTokens=entry["tokensAfter"],
                totalTokensFresh=False)
        yield Compacted(before, entry["tokensAfter"], summary.method, summary.dropped)
        return True
