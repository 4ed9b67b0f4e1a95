"""Keeping a session within its window: the memory flush and compaction (``Upkeep``).

Before every request ``maintain`` flushes when the context has crossed the flush point (once
per compaction cycle, see ``flush.flush_due``) and compacts when it is over the compaction
point. ``flush`` runs the silent memory-flush turn; ``compact`` summarises the older history
(``cut.find_cut`` and ``compaction.summarize``) and records a ``compaction`` entry;
``recover`` does it when the server said a request does not fit. Both work through the
collaborators they are given (``parts``, the ``ModelCall``, the ``ToolRunner``), never the
session. A provider error that is not about size (the server is down) stops either one with
a ``ProviderError`` and leaves the history as it was: only a real overflow is summarised or,
at worst, truncated. The flush's steps run through the same loop as a user's turn
(``steps.run_steps``), with the flush's guards from the model profile: a weak model's bare
"Done" is asked again for the notes (``flush_retry``), its junk notes are refused
(``junk_notes``), an answer kept as notes loses a bare acknowledgement and the lines the notes
hold already (``flush_answer``), and its silence is made up for with the facts the user
told, in their words (``flush_words``: never their requests); a strong model's answer is
taken as it is. So is a strong model's compaction summary: the user's words are appended to
a weak one's only (``summary_words``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from functools import partial
from typing import Any

from clawd.context.access import Access
from clawd.context.compaction import summarize
from clawd.context.corrections import Change, left_standing, standing
from clawd.context.cut import find_cut
from clawd.context.flush import (
    FROM_REPLY,
    FROM_USER,
    append_flush_notes,
    flush_due,
    flush_prompt,
    flush_system,
    is_acknowledgement,
    is_blank,
    listed_notes,
    not_yet_noted,
    note_lines,
    plain_notes,
    unsaved_words,
)
from clawd.context.layers import Layers, describe_room, history_messages, report
from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError, ProviderError
from clawd.core.events import Compacted, ErrorEvent, Event, Flushed, Notice, Waiting
from clawd.core.messages import Message, new_id, without_automated
from clawd.core.textcut import shorten
from clawd.core.tokens import estimate_messages
from clawd.guards.base import TurnView
from clawd.guards.flush_retry import FlushRetry
from clawd.guards.founded import founded_note, known_notes, told_or_returned
from clawd.guards.junk_notes import founded_summary, junk
from clawd.loop.model_call import ModelCall, Overflowed
from clawd.loop.parts import Conversation, ModelInUse, Record, Window
from clawd.loop.runtime import Runtime
from clawd.loop.steps import StepPlan, run_steps
from clawd.loop.toolrunner import ToolRunner
from clawd.loop.turn import Turn
from clawd.sessions.transcript import apply_compaction
from clawd.workspace.files import daily_log_path

log = logging.getLogger(__name__)
OVERFLOW_ATTEMPTS = 3  # compactions tried for one request the server says does not fit
# a manual /compact of less history than this is refused before any model request: a
# summary (its sections, the facts it keeps) is rarely much smaller
WORTH_A_SUMMARY = 200


def summarised_text(summary: str | None, messages: list[Message]) -> str:
    """What a summary of ``messages`` may draw on: the summary before, and each message's
    date, text and tool calls (results are messages too)."""
    return "\n".join([summary or "", *(
        f"{(m.timestamp or '')[:10]} {m.text} "
        + " ".join(json.dumps(c.arguments, ensure_ascii=False) for c in m.tool_calls)
        for m in messages)])


class Upkeep:
    """The flush and compaction of one session."""

    def __init__(self, *, runtime: Runtime, access: Access, conversation: Conversation,
                 record: Record, window: Window, call: ModelCall, tools: ToolRunner,
                 model: ModelInUse):
        self.rt, self.access, self.conversation = runtime, access, conversation
        self.record, self.window, self.call, self.tools = record, window, call, tools
        self.model = model
        self._skip_logged: int | None = None  # the cycle whose skipped flush was logged

    @property
    def history(self) -> list[Message]:
        return self.conversation.history.messages

    def maintain(self, incoming: list[Message], token: CancelToken,
                 layers: Layers | None = None) -> Generator[Event, None, bool]:
        """Before a request: flush when due, then compact when over the compaction point;
        whether either ran. ``incoming``: the user's message about to be added (none: a turn
        in progress, whose own earlier steps may be summarised); ``token``: the stop of that
        turn; ``layers``: the workspace files as the turn read them a moment ago (not read
        again)."""
        budget, ran = self.window.budget, False
        used = self.window.used(incoming, layers)
        if used >= budget.flush_at:
            ran = True
            yield from self.flush_if_due(token, used)
            used = self.window.used(incoming)
        if used > budget.compact_at and self.rt.settings.compaction.enabled:
            ran = True
            yield from self.compact(token, reason="auto", incoming=incoming,
                                    within_turn=not incoming)
        return ran

    def flush_if_due(self, token: CancelToken, used: int | None = None, *,
                     view: list[Message] | None = None) -> Generator[Event, None, None]:
        """Flush when due; ``used=None`` means the flush point is known to be crossed
        (before ``/compact``, a reset and on a context overflow). ``view``: see ``flush``."""
        cfg, flush_at = self.rt.settings.compaction.memory_flush, self.window.budget.flush_at
        if not flush_due(self.record.entry, flush_at if used is None else used, flush_at, cfg):
            return
        if not any(m.role == "user" for m in without_automated(
                self.history if view is None else view)):
            return  # nothing said yet to keep (or only what automation said)
        if not self.rt.writable():
            cycle = self.record.entry.get("compactionCount", 0)
            if self._skip_logged != cycle:  # one log line per skipped cycle
                log.info("memory flush skipped: the workspace is not writable")
                self._skip_logged = cycle
                yield Flushed(skipped="the workspace is not writable")
            return
        yield from self.flush(token, view)

    def flush(self, token: CancelToken, view: list[Message] | None = None
              ) -> Generator[Event, None, None]:
        """Run the silent memory-flush turn now (its entries stay out of the history), a
        turn of its own stopped by ``token``: the stop of the turn or command it runs in.

        The turn sees the history, or ``view`` when given: on a context overflow the whole
        history no longer fits a request, so it sees the part about to be summarised. Its
        tool calls are not shown; only the ``Flushed`` event says which files were written.
        A flush that writes no file but answers with words other than ``NO_REPLY`` has those
        words appended to today's daily log (flush by reply); a bare acknowledgement ("Done."),
        or ``NO_REPLY`` when the user said something after the conversation's last note, is
        asked once more for the notes themselves, and only the list lines of that second
        answer are saved.
        """
        yield Waiting("flush")
        rt, profile = self.rt, self.model.profile
        cfg, clock = rt.settings.compaction.memory_flush, rt.clock
        today = clock().date()
        # what scheduled jobs and the heartbeat said is not the person's: left out of the
        # flush unless the job says ``remember``
        messages = without_automated(self.history if view is None else view)
        seen = messages[:]  # the conversation as the flush found it
        self.conversation.append(Message.user(flush_prompt(cfg, today), flush=True), messages)
        layers = self.window.layers()  # what a note may draw on besides the conversation
        summary = self.conversation.history.summary
        turn = Turn(TurnView(text="", offers_writes=True, daily_log=daily_log_path(today),
                             instructions=layers.instructions,
                             background=f"{layers.project}\n{summary or ''}",
                             files=layers.texts()), token=token)
        guards = profile.flush_guards(seen, today, summarised=bool(summary))
        plan = StepPlan(messages, guards, max_steps=rt.settings.max_steps, flush=True,
                    window=self.window.budget.context_window,
                    extra_system=flush_system(cfg, today))
        try:
            for _event in run_steps(self.call, self.tools, turn, plan):
                pass  # the flush is silent: no text, tool lines or notices
        except ProviderError as exc:  # not about size: the turn stops, nothing is cut
            raise ProviderError(f"the memory flush stopped: {exc}", status=exc.status) from exc
        if turn.failed:  # its request does not fit: recovery goes on
            yield Notice("the memory flush did not complete; continuing")
            return
        files, answer = turn.written, turn.reply
        asked_again = turn.view.asked_by(FlushRetry)
        notes = "" if files else (listed_notes(answer) if asked_again else answer)
        tidy = profile.tidies_flush_answer
        if notes and tidy:  # lines copied from notes it was shown are not news of today
            notes = not_yet_noted(plain_notes(notes), note_lines(rt.files))
        # a bare "Done." is no note, whatever the model
        if is_blank(notes) or is_acknowledgement(notes) or (
                profile.refuses_junk_notes and junk(notes, tuning=profile.thresholds) is not None):
            notes = ""
        if notes and profile.founds_notes:  # what nobody said is no note (a guess)
            said = "\n".join([summary or "", told_or_returned(seen), known_notes(turn.view.files)])
            notes, guessed = founded_note(notes, said, profile.thresholds)
            if guessed:
                log.info("flush note lines nobody said, left out: %s", guessed)
        kept = [(notes, FROM_REPLY)] if notes else []
        if not files and asked_again and profile.keeps_told_facts:
            # asked twice: the facts the user told that neither the notes nor the reply's
            # lines hold ("- Porto" for "I moved to Porto last month"), in their words
            words = unsaved_words(rt.files, seen, today, pending=notes)
            kept += [(words, FROM_USER)] if words else []
        # a value the person corrected in this conversation is not noted again, whoever
        # wrote it down
        told = standing([m.text for m in seen if m.role == "user" and not m.flush])
        kept = [(standing_text, source) for text, source in kept
                if (standing_text := self._standing(text, told))]
        for text, source in kept:
            try:
                self.access.check_flush_write(daily_log_path(today))
                files.append(append_flush_notes(rt.files, text, clock(), source))
            except (ClawdError, OSError) as exc:  # the notes stay in the transcript
                yield Notice(f"the memory flush's notes were not saved: {exc}")
                break
        log.info("memory flush: %d entries, wrote %s", len(messages) - len(seen),
                 files or "nothing")
        self.record.patch(memoryFlushAt=clock().isoformat(timespec="seconds"),
                          copy={"memoryFlushCompactionCount": "compactionCount"},
                          add={"memoryFlushCount": 1})
        if rt.memory is not None and files:
            rt.memory.mark_dirty()
        yield Flushed(files=sorted(set(files)))

    @staticmethod
    def _standing(notes: str, told: list[Change]) -> str:
        notes, gone = left_standing(notes, told)
        if gone:
            log.info("flush note lines the person corrected since, left out: %s", gone)
        return notes

    def compact(self, token: CancelToken, instructions: str | None = None, *,
                reason: str = "manual",
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
        messages = self.history
        keep = self.window.budget.keep_recent
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
        history = self.conversation.history
        # what the summary replaces (the flush below leaves both as they are)
        replaced = estimate_messages(history_messages(history.summary, messages[:cut]))
        if reason == "manual" and replaced < WORTH_A_SUMMARY:
            # decided before any flush or summary is asked for (it took minutes on a slow
            # model, to say the same)
            yield Notice(f"not compacted: the {cut} message{'s' * (cut != 1)} before the latest "
                         f"turn hold {replaced:,} tokens, too few for a summary to save room; "
                         f"the history is unchanged")
            return False
        if reason != "auto":
            yield from self.flush_if_due(token,
                                         view=messages[:cut] if reason == "overflow" else None)
        before = self.window.used(incoming)
        budget = self.window.budget
        yield Waiting("compaction")
        profile = self.model.profile
        founded = (partial(founded_summary,
                           history=summarised_text(history.summary, messages[:cut]),
                           tuning=profile.thresholds)
                   if profile.checks_summary_claims else None)
        try:
            summary = summarize(self.model.provider, messages[:cut],
                                previous_summary=history.summary, instructions=instructions,
                                settings=self.rt.settings.compaction, max_tokens=budget.summary,
                                max_chunk_tokens=budget.context_window // 2, founded=founded,
                                users_words=profile.appends_users_words)
        except ProviderError as exc:  # not about size (an outage): the history stays as is
            raise ProviderError(f"compaction stopped, the history is unchanged: {exc}",
                                status=exc.status) from exc
        if dropped := summary.left_out:
            log.info("summary lines nothing said, left out: %s", dropped)
            yield Notice(f"left out of the summary, as nothing in the conversation said "
                         f"it: {shorten(dropped[0].lstrip('-*+ '), 80)}"
                         + (f" (and {len(dropped) - 1} more)" if len(dropped) > 1 else ""))
        if summary.method != "truncated" and estimate_messages(
                history_messages(summary.text, [])) >= replaced:
            # a short history: its summary would take more room than the messages it replaces
            yield Notice(f"not compacted: the summary would not be smaller than the "
                         f"{cut} message{'s' * (cut != 1)} it replaces ({replaced:,} tokens); "
                         f"the history is unchanged")
            return False
        entry: dict[str, Any] = {"type": "compaction", "id": new_id(), "summary": summary.text,
                 "firstKeptId": messages[cut].id if cut < len(messages) else None,
                 "tokensBefore": before, "tokensAfter": 0, "instructions": instructions,
                 "method": summary.method, "reason": reason}
        if request is not None:
            entry["turnMessageId"] = request.id
        apply_compaction(history, entry)  # in place: the list stays the same object
        self.window.meter.forget()
        entry["tokensAfter"] = after = self.window.used(incoming)
        self.conversation.transcript.append(entry)
        self.record.patch(add={"compactionCount": 1}, contextUsedTokens=after,
                          totalTokensFresh=False)
        yield Compacted(before, after, summary.method, summary.dropped)
        return True

    def recover(self, overflow: Overflowed, attempt: int, messages: list[Message],
                token: CancelToken) -> Generator[Event, None, bool]:
        """The server said the request on ``messages`` does not fit (its ``attempt``-th
        time for this request): compact, keeping less verbatim each time (the cycle's flush
        first), and say whether to call again; when nothing more can be cut, an
        ``ErrorEvent`` says so (nothing is lost either way)."""
        compacted = False
        if attempt < OVERFLOW_ATTEMPTS:
            compacted = yield from self.compact(token, reason="overflow",
                                                keep_divisor=2 ** attempt,
                                                within_turn=True)
        if compacted:
            return True
        times = "once" if attempt == 2 else f"{attempt - 1} times"
        why = (f"even after compacting {times}" if attempt > 1 else
               "and there is nothing left to compact")
        room = describe_room(report(overflow.layers, self.conversation.history.summary,
                                    messages, self.window.tools))
        yield ErrorEvent(f"the conversation does not fit the model's context window "
                         f"({overflow.error}) {why}; {room}; nothing was lost")
        return False
