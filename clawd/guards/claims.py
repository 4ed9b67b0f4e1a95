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
food."): the model saying it kept what it was told.
"""

from __future__ import annotations

import re

from clawd.context.requests import held, keep_requests
from clawd.core.textcut import sentences

_SELF_SUFFICIENT = (r"(?:not(?:ed|e|ing)|sav(?:ed|e|ing)|record(?:ed|ing)?|remember(?:ed|ing)?|"
                    r"stor(?:ed|e|ing)|logg(?:ed|ing)|log|jott(?:ed|ing)|jot|"
                    r"(?:keep|kept|keeping) (?:that|this|it) in mind|"
                    r"(?:write|wrote|written|writing) (?:that|this|it) down)")
# "I remember that …", "I noted earlier …", "I keep in mind …": recalling, not saving; these
# verbs count only with a future, perfect or progressive form, or "let me"
_RECALLING = re.compile(r"not(?:e|ed)|remember(?:ed)?|keep .*|kept .*")
_ASPECT = re.compile(r"'ll|’ll|will|shall|going to|'ve|’ve|have|'m|’m|am|let me|I'd like to",
                     re.IGNORECASE)
# "I remember this." after a statement: the model saying it kept it, not recalling anything
_BARE_OBJECT = re.compile(r"\s+(?:this|that|it)\s*[.!]*\s*$", re.IGNORECASE)
_NEEDS_OBJECT = r"(?:add(?:ed|ing)?|writ(?:e|ten|ing)|wrote|append(?:ed|ing)?|" \
                r"updat(?:ed|e|ing)|put(?:ting)?|keep(?:ing)?|kept|creat(?:e|ed|ing)|" \
                r"mak(?:e|ing) a note|made a note)"
_SUBJECT = (r"(?:\bI(?:'ve|’ve| have|'ll|’ll| will|'m|’m| am|'m going to| am going to| shall|"
            r" need to)?"
            r"(?: also| now| just| already| go ahead and)?|\blet me|\bI'd like to)")
_OBJECT = re.compile(r"\bmemor(?:y|ies)\b|\bnotes?\b|\blog\b|daily log|MEMORY\.md|\.md\b",
                     re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|never|cannot|can't|can’t|won't|won’t|didn't|didn’t|"
                       r"haven't|haven’t|unable|if|whether|should|shall I|would you|"
                       r"do you want)\b", re.IGNORECASE)
_CLAIM = re.compile(rf"{_SUBJECT}\s+(?P<verb>{_SELF_SUFFICIENT}|{_NEEDS_OBJECT})\b",
                    re.IGNORECASE)
_DONE = r"added|saved|recorded|stored|written|appended|logged|updated"
_DONE_ALONE = frozenset({"saved", "recorded", "stored", "logged"})  # need no object
_PASSIVE = (  # "Note added: …", "Saved to memory/…", "Your budget has been saved."
    re.compile(rf"^\W*(?:(?:the|a|your) )?(?:notes?|it|this|that)\s+"
               rf"(?:(?:has|have) been |is now |is |was )?(?P<verb>{_DONE})\b", re.IGNORECASE),
    re.compile(rf"^\W*(?P<verb>{_DONE})\s+(?:to|in|it|that|this)\b", re.IGNORECASE),
    re.compile(rf"\b(?:has|have) been (?P<verb>{_DONE})\b", re.IGNORECASE))


def asks_to_note(message: str) -> bool:
    """Whether a user's message asks for something to be kept ("Please remember …", "Note
    that …", "Can you remember …?"; ``context.requests.keep_requests``)."""
    return bool(keep_requests(message))


def _keeps_told(rest: str, told: str) -> bool:
    """Whether what follows "I remember" says the fact just ``told`` was kept: nothing but
    "this" ("I remember this."), or that fact restated."""
    return bool(told) and bool(_BARE_OBJECT.match(rest) or held(rest, [told]))


def note_claim(text: str, asked: bool = False, told: str = "") -> str | None:
    """The first sentence of ``text`` that says a note was or will be saved, else None.
    ``asked``: the user asked for a note, so "I remember that …" says one was kept;
    ``told``: the user's message, when it told a fact: "I remember this." or "I remember
    that …" restating it says it was kept."""
    for sentence in sentences(text):
        if sentence.endswith("?"):
            continue
        if passive := next(filter(None, (p.search(sentence) for p in _PASSIVE)), None):
            said_no = _NEGATION.search(sentence[:passive.end()]) or re.search(
                r"\b(?:no|nothing|none)\b", sentence[:passive.start()], re.IGNORECASE)
            if not said_no and (passive.group("verb").lower() in _DONE_ALONE
                                or _OBJECT.search(sentence)):
                return sentence
            continue
        claim = _CLAIM.search(sentence)
        if claim is None or _NEGATION.search(sentence[:claim.end()]):
            continue
        verb = claim.group("verb").lower()
        subject = sentence[claim.start():claim.start("verb")]
        if _RECALLING.fullmatch(verb) and not (asked or _ASPECT.search(subject)
                                               or _keeps_told(sentence[claim.end():], told)):
            continue
        if re.fullmatch(_SELF_SUFFICIENT, verb) or _OBJECT.search(sentence[claim.start():]):
            return sentence
    return None
