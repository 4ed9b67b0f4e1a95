"""Automatic recall: the notes memory search finds for the user's message, sent with it.

A small model rarely calls ``memory_search`` on its own, and the daily logs in the project
context are cut to their newest lines in a small window, so a note written days (or a
compaction) ago is out of its sight. Before each user turn clawd runs the search itself on
the user's message, as the session may see it (``visible_search``: shareable notes only in
a group session), and the best hits (``memorySearch.recall``; under the weak profile none
``recall_margin`` below the best one, ``core.thresholds``: a weak model answers from
whatever it is given) go in front of the message in that turn's requests: never into the
transcript, never into later turns, so the prompt cache keeps everything before the
message. Only the lines of a hit not already in the
project context are sent (a hit with none left, or only headings and a template's
placeholders, is left out), except MEMORY.md's: its lines are the curated, newest values
(consolidation replaces the older ones there), and a weak model answers from the block in
front of the message, so without them the block held only the older notes around them
(``scripts/bench_memory_weeks.py``). The block is capped at ``maxChars`` and a fifth of the
window (in characters, about 5% of its tokens). Each hit is named by its citation (``path#Lx-Ly``);
with ``memorySearch.citations`` the block asks the reply to end with the ones it used. The
search waits up to ``SYNC_WAIT`` for a sync of notes written just before (a flush,
``/new``); a failed search leaves the turn as it was. When the best hit is already in view
whole, nothing is sent. Under the weak profile's ``recall_gate``, only a message that asks
something notes could answer is searched for (``wants_recall``): statements and requests of
nobody's in particular go to the model alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from clawd.config.sections import MemorySearch
from clawd.context.access import Access
from clawd.context.facts import asks, is_question
from clawd.context.requests import keep_requests
from clawd.core import listmark
from clawd.core.messages import Message
from clawd.core.phrases import talk
from clawd.core.templates import render
from clawd.core.textcut import sentences, shorten
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.memory.interface import Memory, SearchHit, citation
from clawd.tools.memory import visible_search
from clawd.workspace.files import MEMORY_FILE

log = logging.getLogger(__name__)

QUERY_CHARS = 2000  # the embedder reads about 256 tokens; more only slows the keyword half
SYNC_WAIT = 2.0  # seconds a turn may wait for the sync of notes written just before


@dataclass(frozen=True)
class Hit:
    path: str
    start: int
    end: int
    score: float
    text: str

    @property
    def citation(self) -> str:
        """``path#Lstart-Lend``, as a reply cites it."""
        return citation(self.path, self.start, self.end)


@dataclass(frozen=True)
class Recall:
    """What was found for one user message: the hits and the text sent in front of it;
    ``cite`` (``memorySearch.citations``) asks the reply to name the notes it used."""

    message_id: str
    hits: list[Hit] = field(default_factory=list)
    cite: bool = False

    def block(self, message: str) -> str:
        return render("recall.md.j2", hits=self.hits, message=message,
                      cite=self.cite).strip()

    def apply(self, messages: list[Message]) -> list[Message]:
        """``messages`` with the notes in front of the user's message (a copy of it)."""
        return [m.with_lead(self.block) if m.id == self.message_id and self.hits else m
                for m in messages]


def unseen(text: str, shown: str) -> str:
    """The lines of ``text`` worth sending: not blank, not already in ``shown`` and not a
    template's placeholder (``- (name — who they are)``); empty when no line but headings
    is left."""
    keep = []
    for line in text.splitlines():
        probe = line.strip().removesuffix("…").rstrip()  # a snippet's last line may be cut
        if probe and probe not in shown and not listmark.PLACEHOLDER.match(probe):
            keep.append(line)
    return "\n".join(keep) if any(not line.lstrip().startswith("#") for line in keep) else ""


def choose(results: list[SearchHit], shown: str, max_chars: int,
           tuning: Thresholds = DEFAULT) -> list[Hit]:
    """The hits worth sending, best first (``results`` are), within the ``recall_margin``
    of the best one (when the profile sets one), with only their lines not already in view,
    within ``max_chars`` (a hit that would be cut below ``recall_min_piece`` ends them).
    When the best hit is already in view whole, nothing is sent: the answer is before the
    model, and the weaker hits alone, framed as what memory found, told a 1.5B model the
    notes held nothing ("What is my sister's name?": today's log had it at 0.88, an
    unrelated 0.40 chunk was sent)."""
    hits: list[Hit] = []
    room = max_chars
    best = max((float(r["score"]) for r in results), default=0.0)
    for r in results:
        if tuning.recall_margin is not None and float(r["score"]) < best - tuning.recall_margin:
            break  # far below the best hit: noise beside it for a small model
        text = unseen(str(r.get("snippet") or ""),
                      "" if r["path"] == MEMORY_FILE else shown)
        if not text:
            if not hits:
                return []  # the best match is in view: nothing weaker is worth sending
            continue
        if len(text) > room:
            if room < tuning.recall_min_piece:
                break
            text = shorten(text, room)
        room -= len(text)
        hits.append(Hit(str(r["path"]), int(r["startLine"]), int(r["endLine"]),
                        float(r["score"]), text))
    return hits


def wants_recall(text: str) -> bool:
    """Whether a message may need notes from before (the ``recall_gate`` guard): a question
    ("What is my cat called?", "What's the capital of France?"), or a request about the
    user's own things ("Plan my week", "Draft a reply to our landlord"). A statement ("My
    sister Ines lives in Porto") tells, and a request of nobody's in particular ("Write a
    haiku about the Tagus") needs none, nor does a request to keep something (the note is
    the loop's to make): with notes in front of them a 1.5B model answered "I did not find
    any relevant information in the notes" to statements and requests alike."""
    for sentence in sentences(text):
        if not asks(sentence) or keep_requests(sentence):
            continue  # told, or asked to be kept: the note is the loop's, not an answer
        if is_question(sentence) or talk.OWN_WORDS.search(sentence) or talk.REMIND.search(sentence):
            return True
    return False


def recall(memory: Memory | None, access: Access, settings: MemorySearch, message: Message,
           shown: str, window: int, *, gate: bool = False,
           tuning: Thresholds = DEFAULT) -> Recall | None:
    """Search memory for ``message``; None when recall is off, the message has no text (or,
    with ``gate``, does not ask for anything notes could answer: ``wants_recall``), the
    search fails or finds nothing new. ``tuning``: the profile's (``choose``)."""
    cfg = settings.recall
    query = message.text.strip()[:QUERY_CHARS]
    if not cfg.enabled or memory is None or not query:
        return None
    if gate and not wants_recall(query):
        return None
    try:
        memory.catch_up(SYNC_WAIT)
        found = visible_search(memory, access, query, max_results=cfg.max_results,
                               min_score=cfg.min_score)
    except Exception as exc:  # noqa: BLE001 - recall is a help; the turn goes on without it
        log.warning("automatic recall skipped: memory search failed: %s", exc)
        return None
    hits = choose(found.get("results") or [], shown, min(cfg.max_chars, window // 5), tuning)
    return Recall(message.id, hits, settings.citations) if hits else None
