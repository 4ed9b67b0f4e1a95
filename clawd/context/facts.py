"""Which of the user's sentences are facts to keep, and how a correction is kept (pure).

When the memory flush saves nothing even after being asked again, the user's own sentences
are kept in its place (``flush.unsaved_words``). Only facts are: a plain statement about
the user, their people, plans, preferences, decisions or corrections, whether or not it
holds a number or a name ("I'm allergic to peanuts.", "Moved to Porto last week.").
A sentence that asks for something is never a fact: a question (with or without its
``?``), an imperative ("Suggest a 3-day itinerary for Kyoto."), a polite or indirect ask
("can you …", "please …", "let's …", "I'd like you to …", "I need a packing list …").
Small talk ("thanks!", "sounds good", "this is a test") is neither. A request to keep
something whose content is a statement ("Also remember: I'm allergic to peanuts.") keeps
that statement as a fact.

A correction ("X is Y now, not Z", "actually it's Y", "I moved from Z to Y", "Y instead
of Z") is a fact saved with its new value and the old one named as replaced (``as_note``).
Everything here reads one sentence at a time, by its words: no model is called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from clawd.context.requests import keep_requests
from clawd.core import phrases
from clawd.core.phrases import changes, talk
from clawd.core.textcut import sentences

Kind = Literal["fact", "request", "other"]


# --- small talk ------------------------------------------------------------------------------


def is_chatter(sentence: str) -> bool:
    """Whether a sentence is only a greeting, thanks, or a test message (its Markdown
    emphasis and code marks aside)."""
    plain = re.sub(r"[*_`~]", "", sentence).strip(" \t\n.!")
    return talk.CHATTER.fullmatch(plain) is not None


def is_small_talk(sentence: str) -> bool:
    """Whether a sentence only talks about the conversation: chatter, words of assent or
    reaction, or the announcement of a question."""
    return (is_chatter(sentence)
            or all(w in talk.SMALL_TALK for w in phrases.words(_plain(sentence)))
            or talk.ABOUT_A_QUESTION.search(sentence) is not None)


# --- asking ----------------------------------------------------------------------------------


def _plain(sentence: str) -> str:
    """The sentence without Markdown marks, curly apostrophes and its leading fillers."""
    text = re.sub(r"[*_`~]", "", sentence).replace("’", "'").strip()
    return phrases.LEADING_FILLERS.sub("", text).strip()


def kept_statement(sentence: str) -> str | None:
    """What a request to keep something ("Also remember: I'm allergic to peanuts.") asks to
    keep, when that is a statement; None for any other sentence."""
    if not keep_requests(sentence):
        return None
    rest = talk.KEEP_CLAUSE.sub("", _plain(sentence), count=1).strip()
    rest = rest.rstrip("?").strip()
    if not rest or rest.lower().startswith(("to ", "this", "that", "it")):
        return None  # "Remember to call Ines": a thing to do, not a fact
    return rest if _kind(rest) == "fact" else None


def is_question(sentence: str) -> bool:
    """Whether a sentence is a question, with or without its ``?``."""
    text = _plain(sentence)
    return bool(text) and (text.rstrip().endswith("?") or bool(talk.QUESTION_START.search(text)))


def asks(sentence: str) -> bool:
    """Whether a sentence asks for something: a question, an imperative, a polite or
    indirect request."""
    text = _plain(sentence)
    if not text:
        return False
    if is_question(text) or talk.POLITE.search(text):
        return True
    if talk.WANT_WORK.search(text):
        return True
    first = re.match(r"([\w']+)\s*([\w']*)", text)
    word, after = (first.group(1).lower(), first.group(2).lower()) if first else ("", "")
    if word in talk.IMPERATIVES and after not in talk.SUBJECT_VERBS:
        return True
    negative = talk.NEGATIVE_ORDER.match(text)
    return negative is not None and negative.group(1).lower() in talk.IMPERATIVES


def _kind(sentence: str) -> Kind:
    if not re.search(r"\w", sentence) or is_small_talk(sentence):
        return "other"
    if asks(sentence):
        return "request"
    if talk.ABOUT_YOU.match(_plain(sentence)):
        return "other"  # about the assistant or its answer, not the user
    if len(re.findall(r"\w+", sentence)) < 2:
        return "other"
    return "fact"


def kind(sentence: str) -> Kind:
    """``fact``, ``request`` or ``other`` (small talk, talk about the assistant)."""
    if kept_statement(sentence) is not None:
        return "fact"
    return _kind(sentence)


def fact_text(sentence: str) -> str | None:
    """The words to keep of a sentence that is a fact (the statement a request to keep
    carries, else the sentence); None when it is not one."""
    if (statement := kept_statement(sentence)) is not None:
        return statement
    return " ".join(sentence.split()) if _kind(sentence) == "fact" else None


def facts(text: str) -> list[str]:
    """The facts among the sentences of a user's message, as they are to be kept."""
    return [kept for s in sentences(text) if (kept := fact_text(s)) is not None]


# --- corrections -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Correction:
    """A sentence that replaces a value said before: ``old`` is None when not named."""

    new: str
    old: str | None


def _trim(value: str) -> str:
    return changes.NOW_AT_VALUE_END.sub("", value.strip(" \t,.;:!?\"'")).strip()


VALUE_MAX_WORDS = 4  # a new value after its verb is this short ("is called wren")


def _value_before(before: str, old: str) -> str:
    """The new value at the end of the words before "not …" or "instead of …": what
    follows the clause's verb, else as many words as the old value has."""
    before = _trim(before)
    clause = re.split(r"[:;,]\s*", before)[-1]
    match = changes.VALUE_AFTER.match(clause)
    if match and len(match.group("value").split()) <= VALUE_MAX_WORDS:
        return _trim(match.group("value"))
    words = clause.split()
    take = max(len(old.split()), 1)
    if len(words) > take and words[-take - 1].lower() in changes.DETERMINERS:
        take += 1
    return " ".join(words[-take:])


def correction(sentence: str) -> Correction | None:
    """The new and old values of a sentence that corrects one said before, else None."""
    text = _plain(sentence)
    if (match := changes.FROM_TO.search(text)) is not None:
        return Correction(_trim(match.group("new")), _trim(match.group("old")))
    if (match := changes.NOT_OLD.match(text)) is not None and not changes.AUXILIARY_AT_END.search(
            match.group("before")):
        old = _trim(match.group("old"))
        return Correction(_value_before(match.group("before"), old), old)
    if (match := changes.INSTEAD_OF.match(text)) is not None:
        old = _trim(match.group("old"))
        return Correction(_value_before(match.group("before"), old), old)
    if changes.CORRECTION.search(text):
        match = changes.VALUE_AFTER.match(text.rstrip(".!"))
        if match:
            return Correction(_trim(match.group("value")), None)
    return None


def as_note(fact: str) -> str:
    """A fact as it is kept: a correction names its new value and the one it replaces."""
    fixed = correction(fact)
    if fixed is None or not fixed.new:
        return fact
    replaced = f"replacing {fixed.old}" if fixed.old else "replacing what was said before"
    return f"{fact} (correction: {fixed.new}, {replaced})"
