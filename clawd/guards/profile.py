"""Model profiles: which guards a model runs, as data (pydantic-ai's ``ModelProfile``).

A guard costs a frontier model requests and can misread its replies, and it saves a small
local model from its habits; so each model gets a profile, and the profile names the
guards. Two are built in:

- ``weak`` (the default for a provider declared in the config, e.g. a local
  OpenAI-compatible server): every guard. Each one comes from transcripts of a 1.5B model,
  and each is measured on labelled points of a 0.5B and a 1.5B model: the reply guards on
  their replies and on good replies in a strong model's style (``scripts/bench_guards.py``),
  the turn guards on summaries, flushes and messages (``scripts/bench_turn_guards.py``);
  figures in docs/real-models.md. A change to a guard comes with its figures from there.
- ``strong`` (the default for the built-in ``anthropic`` and ``openai`` providers): none.
  A blank answer is still reported in a notice, and a reply at the output limit still says
  so: those cost nothing and are true of any model.

``models.providers.<name>.profile`` (or ``models[].profile`` for one model) picks a profile;
``guards: {echo: false}`` beside it switches single guards on or off. Beside its guards a
profile holds the numbers that are the model's rather than a guard's: how often one turn may
be asked again (``max_asks``) and how many MCP servers' tools it is told of; and the numbers
its guards judge by (``thresholds``: shares of words, lengths, ``core.thresholds``), each
guard built from them. Their defaults are the ones the guards' figures were measured with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from clawd.config.schema import GUARD_NAMES, GuardName
from clawd.core.messages import Message
from clawd.core.thresholds import Thresholds
from clawd.guards.answers import BlankAnswer, EchoAnswer, UnkeptNote
from clawd.guards.base import MAX_ASKS, Guard, Guards
from clawd.guards.flush_retry import FlushRetry
from clawd.guards.founded import FoundedNotes
from clawd.guards.junk_notes import JunkNotes
from clawd.guards.reading import FileAnswer
from clawd.guards.step_guards import (
    FakeReminders,
    Looping,
    RepeatedReads,
    RepeatedWrites,
    StrayText,
    SwallowedArgs,
    TextCalls,
)

# the guards of a model step, in the order they are asked
STEP_GUARDS: dict[str, type[Guard]] = {
    "looping": Looping, "text_calls": TextCalls, "swallowed_args": SwallowedArgs,
    "stray_text": StrayText,
    "repeated_writes": RepeatedWrites, "repeated_reads": RepeatedReads,
    "blank": BlankAnswer, "echo": EchoAnswer, "note_claim": UnkeptNote,
    "file_answer": FileAnswer,
    "junk_notes": JunkNotes, "founded_notes": FoundedNotes, "fake_reminders": FakeReminders,
}
# the memory flush's own: a bare "Done" or NO_REPLY asked once for the notes; when the
# flush still saved nothing, the facts the user told kept in the daily log; and an answer
# kept as notes without a bare acknowledgement, the lines the notes hold already and "I
# remember" before a fact (``loop.upkeep.Upkeep.flush``)
FLUSH_GUARDS = ("flush_retry", "flush_words", "flush_answer")
# what the model is told of: automatic recall searches memory for each message, and the
# model is not offered ``memory_search`` itself (``loop.parts.Window.withheld``)
TOOL_GUARDS = ("recall_only",)
# which messages automatic recall searches for: only those asking what notes could answer
# (``loop.recall.wants_recall``)
RECALL_GUARDS = ("recall_gate",)
# its compaction summaries: a line claiming what the summarised history never said is left
# out (``junk_notes.founded_summary``; ``loop.upkeep.Upkeep.compact``), and the user's sentences
# with a number or name the summary lost are appended (``context.references``)
SUMMARY_GUARDS = ("summary_claims", "summary_words")
# after a private turn: a request to remember that no note of the turn holds is kept in the
# daily log in the user's words (``loop.keeping.keep_request``); a reminder the turn did
# not set is set from the user's words, or said not to be (``loop.keeping.set_reminder``)
TURN_END_GUARDS = ("request_words", "reminder_set")


@dataclass(frozen=True)
class Profile:
    name: str
    guards: frozenset[str]
    # whether the model may consolidate notes into MEMORY.md (``clawd memory consolidate``):
    # on five days of notes a 1.5B model kept 3 facts of 14 and made others up
    # (docs/real-models-notes.md), so the weak profile is refused
    consolidates: bool = True
    # how many MCP servers' tools the model is told of (None: all that fit the window's
    # share, ``clawd.mcp.shapes.MCP_SHARE``): a small model picks worse among many tools
    mcp_tools: int | None = None
    # how many times one user turn (or flush) may be asked again, whatever guards asked
    max_asks: int = MAX_ASKS
    # the numbers its guards judge by (shares of words, lengths): the measured ones
    thresholds: Thresholds = Thresholds()

    def has(self, guard: GuardName) -> bool:
        return guard in self.guards

    # What the loop asks of a profile, by what it does rather than by a guard's name (a
    # misspelt name would be a silent "no"):
    @property
    def withholds_memory_search(self) -> bool:
        """Recall searches for each message and ``memory_search`` is not offered."""
        return self.has("recall_only")

    @property
    def gates_recall(self) -> bool:
        """Recall searches only for messages that ask what notes could answer."""
        return self.has("recall_gate")

    @property
    def refuses_junk_notes(self) -> bool:
        return self.has("junk_notes")

    @property
    def founds_notes(self) -> bool:
        """A note says only what the person said or a tool returned (``guards.founded``)."""
        return self.has("founded_notes")

    @property
    def keeps_told_facts(self) -> bool:
        """A flush that saved nothing keeps the facts the user told in the daily log."""
        return self.has("flush_words")

    @property
    def checks_summary_claims(self) -> bool:
        return self.has("summary_claims")

    @property
    def appends_users_words(self) -> bool:
        """A compaction summary gets the user's sentences with the numbers, names and
        identifiers it left out, word for word."""
        return self.has("summary_words")

    @property
    def tidies_flush_answer(self) -> bool:
        """A flush's answer kept as notes loses the lines the notes hold already or strike
        through, and "I remember" before a fact (a bare "Done." is no note for any model)."""
        return self.has("flush_answer")

    @property
    def sets_reminders(self) -> bool:
        """A reminder request the turn did not set with ``schedule`` is set by clawd."""
        return self.has("reminder_set")

    @property
    def keeps_requests(self) -> bool:
        """A request to remember that no note of its turn holds is kept in the user's words."""
        return self.has("request_words")

    @property
    def holds_json_starts(self) -> bool:
        """A reply that starts as JSON is held back until it ends (a call written as text)."""
        return self.has("text_calls")

    @property
    def holds_echoes(self) -> bool:
        """A reply that starts as the recalled notes or the answer before is held back."""
        return self.has("echo")

    def step_guards(self) -> Guards:
        """Fresh guards for one session's model steps."""
        return Guards((kind(self.thresholds) for name, kind in STEP_GUARDS.items()
                       if name in self.guards), self.max_asks)

    def flush_guards(self, conversation: list[Message], today: date, *,
                     summarised: bool) -> Guards:
        """Fresh guards for one memory flush over ``conversation``: a call written as text is
        taken as that call (``TextCalls``), arguments swallowed by one are taken back out
        (``SwallowedArgs``), repeated writes and reads are not made again,
        junk notes are refused (``JunkNotes``), and so are notes of what nobody said
        (``FoundedNotes``); a bare "Done" or silence is asked once
        for the notes (``FlushRetry``). The answers of a flush are never shown, so the
        blank, echo and claim guards stay out."""
        guards: list[Guard] = [TextCalls(self.thresholds)] if self.has("text_calls") else []
        if self.has("swallowed_args"):
            guards.append(SwallowedArgs(self.thresholds))
        if self.has("repeated_writes"):
            guards.append(RepeatedWrites(self.thresholds))
        if self.has("repeated_reads"):
            guards.append(RepeatedReads(self.thresholds))
        if self.has("junk_notes"):
            guards.append(JunkNotes(self.thresholds))
        if self.has("founded_notes"):
            guards.append(FoundedNotes(self.thresholds))
        if self.has("flush_retry"):
            guards.append(FlushRetry(conversation, today, summarised=summarised,
                                     tuning=self.thresholds))
        return Guards(guards, self.max_asks)


PROFILES = {
    "weak": Profile("weak", frozenset(GUARD_NAMES), consolidates=False, mcp_tools=8),
    # recall sends what the search ranked, within its caps (no ``recall_margin``)
    "strong": Profile("strong", frozenset(), thresholds=Thresholds(recall_margin=None)),
}


def make_profile(name: str, overrides: Mapping[str, bool] | None = None) -> Profile:
    """The built-in profile ``name`` with single guards switched on or off."""
    base = PROFILES[name]
    guards = set(base.guards)
    for guard, on in (overrides or {}).items():
        (guards.add if on else guards.discard)(guard)
    return dataclasses.replace(base, name=name if guards == base.guards else f"{name}+",
                               guards=frozenset(guards))
