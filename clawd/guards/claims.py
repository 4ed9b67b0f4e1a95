"""Whether a reply says a note was (or is about to be) saved (a pure function).

A weak model often answers "Noted, I'll remember that" or "I'll add it to
memory/2026-11-24.md with `write`" and makes no tool call: the user is told something was
saved that never was. ``note_claim`` finds such a sentence (English only) so that the turn
can ask the model once to make the write it announced, and tell the user when it still did
not. A sentence counts when its subject is the model ("I", "I've", "Let me") and its verb
saves something: *note, save, record, remember, store, log, keep in mind, write down* on
their own, or *add, write, append, update, put, keep, create* with a note-like object
(memory, a note, a log, MEMORY.md, a ``.md`` file), "I need to …" among the subjects; so
do "Note added: …", "Saved to memory/…" and "… has been saved" or "… has been added to
memory/…". Negated, conditional and question sentences, and a bare "Noted." (an
acknowledgement), do not. Nor does "I remember that …" or "I note that …" (recalling),
unless the user's message asked for a note (``asks_to_note``: after "Please remember: …",
"I remember that …" is the model saying it saved it), or told a fact and the sentence ends
there ("I remember this.") or restates it ("I remember that your cat Pixel only eats wet
food."): the model saying it kept what it was told. The English of it is
``core.phrases.saving``.
"""

from __future__ import annotations

import re

from clawd.context.requests import keep_requests, request_kept
from clawd.core.phrases import saving
from clawd.core.textcut import sentences


def asks_to_note(message: str) -> bool:
    """Whether a user's message asks for something to be kept ("Please remember …", "Note
    that …", "Can you remember …?"; ``context.requests.keep_requests``)."""
    return bool(keep_requests(message))


def _keeps_told(rest: str, told: str) -> bool:
    """Whether what follows "I remember" says the fact just ``told`` was kept: nothing but
    "this" ("I remember this."), or that fact restated."""
    return bool(told) and bool(saving.BARE_OBJECT.match(rest) or request_kept(rest, [told]))


def note_claim(text: str, asked: bool = False, told: str = "") -> str | None:
    """The first sentence of ``text`` that says a note was or will be saved, else None.
    ``asked``: the user asked for a note, so "I remember that …" says one was kept;
    ``told``: the user's message, when it told a fact: "I remember this." or "I remember
    that …" restating it says it was kept."""
    for sentence in sentences(text):
        if sentence.endswith("?"):
            continue
        passive = next(filter(None, (p.search(sentence) for p in saving.PASSIVE_CLAIMS)),
                       None)
        if passive:
            said_no = saving.NEGATION.search(sentence[:passive.end()]) or saving.SAYS_NONE.search(
                sentence[:passive.start()])
            if not said_no and (passive.group("verb").lower() in saving.DONE_ALONE
                                or saving.NOTE_OBJECT.search(sentence)):
                return sentence
            continue
        claim = saving.CLAIM.search(sentence)
        if claim is None or saving.NEGATION.search(sentence[:claim.end()]):
            continue
        verb = claim.group("verb").lower()
        subject = sentence[claim.start():claim.start("verb")]
        if saving.RECALL_VERBS.fullmatch(verb) and not (
                asked or saving.ASPECT.search(subject)
                or _keeps_told(sentence[claim.end():], told)):
            continue
        if (re.fullmatch(saving.SAVE_VERBS, verb)
                or saving.NOTE_OBJECT.search(sentence[claim.start():])):
            return sentence
    return None
