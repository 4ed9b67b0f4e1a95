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
from clawd.core.textcut import sentences

Kind = Literal["fact", "request", "other"]


# --- small talk ------------------------------------------------------------------------------

# A greeting, thanks or a word of assent, alone or before "this is a test": talk about the
# conversation itself, never a fact to keep ("Hello, **this** is a test of the `REPL`").
_GREETING = (r"(?:hello|hi|hey|hiya|howdy|good (?:morning|afternoon|evening)|thanks|"
             r"thank you|ok|okay|cool|great|nice)")
_CHATTER = re.compile(rf"(?:{_GREETING}\b[\s,.!]*)*(?:(?:this|it)(?:'s| is) (?:just |only )?"
                      rf"(?:a |another )?test(?: message| run| of (?:the |this |my )?\w+)?"
                      rf"|testing(?:[ ,]+(?:one|two|three|1|2|3))*|)", re.I)

# the words of talk about the conversation: a sentence made only of them keeps nothing
# ("ok cool", "That makes sense.", "That's not what I meant.", "haha that's funny")
SMALL_TALK = frozenset("""ok okay cool great nice thanks thank you so much very lot yes no
yeah yep yup nope sure alright right perfect awesome excellent fine good morning afternoon
evening night bye goodbye see later hello hi hey sounds that that's this it it's makes make
sense never mind got gotcha wow interesting exactly indeed me to for is the a an oh ah well
haha hahaha lol lmao hmm hm um uh funny what meant mean not i i'm all set true agreed deal
done noted understood helpful works worked idea there we go let's go test testing again
too really just""".split())

_ABOUT_A_QUESTION = re.compile(r"^I(?: have|'ve got| got) (?:a|one|another|some|two|a few)"
                               r"(?: \w+)? questions?\b", re.I)


def is_chatter(sentence: str) -> bool:
    """Whether a sentence is only a greeting, thanks, or a test message (its Markdown
    emphasis and code marks aside)."""
    plain = re.sub(r"[*_`~]", "", sentence).strip(" \t\n.!")
    return _CHATTER.fullmatch(plain) is not None


def is_small_talk(sentence: str) -> bool:
    """Whether a sentence only talks about the conversation: chatter, words of assent or
    reaction, or the announcement of a question."""
    return (is_chatter(sentence) or all(w in SMALL_TALK for w in phrases.words(_plain(sentence)))
            or _ABOUT_A_QUESTION.search(sentence) is not None)


# --- asking ----------------------------------------------------------------------------------

_AUX = (r"(?:is|are|was|were|am|do|does|did|can|could|would|will|should|shall|have|has|had|"
        r"may|might|must|isn't|aren't|don't|doesn't|didn't|can't|won't|wouldn't|shouldn't)")
_PRONOUN = r"(?:i|you|u|we|he|she|it|they|there)"
_DETERMINER = r"(?:the|a|an|my|your|our|this|that|these|those)"
_WH = r"(?:what|what's|whats|how|how's|why|which|who|who's|whose|whom)"
_QUESTION_START = re.compile(
    rf"^(?:{_WH}\b|(?:when|where)(?:'s|\s+{_AUX}\b)|{_AUX}\s+{_PRONOUN}\b|"
    rf"(?:is|are|does|do|can|could|will|would|should)\s+{_DETERMINER}\b|"
    r"any (?:idea|ideas|chance|tips|thoughts|suggestions)\b|anyone know\b|"
    r"i wonder\b|i(?:'m| am| was) wondering\b|do you think\b)", re.I)
_POLITE = re.compile(r"\b(?:can|could|would|will|won't|can't) (?:you|u)\b|\bwould you mind\b|"
                     r"\b(?:i'?d|i would) (?:like|love|appreciate) (?:it if )?(?:you|u)\b|"
                     r"\bi (?:want|need) (?:you|u) to\b|\bplease\b|"
                     r"\blet'?s\b|\blet us\b|\blet me know\b", re.I)
# "I'd like a list …", "I need a packing list …": asking for a piece of work, not a plan
_WORK = (r"(?:list|summary|plan|draft|recap|overview|suggestions?|recommendations?|breakdown|"
         r"explanation|table|script|email|letter|outline|comparison|estimate|translation|"
         r"rewrite|review|hand|ideas?|examples?|itinerary|checklist|template|answer|"
         r"advice|tips?|quote)")
_WANT_WORK = re.compile(r"^i(?:'d| would)? (?:like|want|need|could use) (?:a|an|some|the|"
                        rf"your|another)?\s*(?:[\w-]+ )?{_WORK}\b", re.I)
# the verbs a request starts with ("Suggest …", "Book a table …", "Don't book …")
IMPERATIVES = frozenset("""suggest read tell give find show write make list explain summarise
summarize check book plan draft translate help send create compare recommend look search
calculate convert fix open run add remind describe generate rewrite edit review update
delete remove set schedule buy order email text get fetch download install print count sort
format name pick choose recap outline estimate figure work go keep turn change rename try
think brainstorm proofread correct analyse analyze debug refactor move start stop cancel
call ask answer reply respond continue repeat use put take bring prepare organise organize
arrange sum tally quote cite define compute draw sketch design build compose jot note save
store record log remember forget look google research investigate verify confirm double
clean tidy split merge shorten expand simplify improve polish reword rephrase paraphrase
walk guide teach show""".split())
# after a first word that is a noun, not an order: "Work starts at 9.", "Plan is to leave"
_SUBJECT_VERBS = frozenset("""is are was were 's will would has had starts started ends
ended begins began takes took costs cost runs ran went goes lasts""".split())
_NEGATIVE = re.compile(r"^(?:don't|dont|do not|never)\s+(\w+)", re.I)
_KEEP_CLAUSE = re.compile(
    r"^\W*(?:(?:can|could|would|will) (?:you|u) (?:please |also )?|i (?:want|need|'d like|"
    r"would like) you to (?:please )?)?(?:remember|note(?: down)?|keep in mind|"
    r"(?:don't|don’t|do not) forget|make a note(?: of)?|take a note(?: of)?|write down|"
    r"jot down|" + phrases.KEEP_ELSEWHERE_PATTERN
    + r")(?: (?:this|that))?\s*(?:(?:that|dass|que)\b|:|,|-|–)?\s*", re.I)


def _plain(sentence: str) -> str:
    """The sentence without Markdown marks, curly apostrophes and its leading fillers."""
    text = re.sub(r"[*_`~]", "", sentence).replace("’", "'").strip()
    return phrases.LEADING_FILLERS.sub("", text).strip()


def kept_statement(sentence: str) -> str | None:
    """What a request to keep something ("Also remember: I'm allergic to peanuts.") asks to
    keep, when that is a statement; None for any other sentence."""
    if not keep_requests(sentence):
        return None
    rest = _KEEP_CLAUSE.sub("", _plain(sentence), count=1).strip()
    rest = rest.rstrip("?").strip()
    if not rest or rest.lower().startswith(("to ", "this", "that", "it")):
        return None  # "Remember to call Ines": a thing to do, not a fact
    return rest if _kind(rest) == "fact" else None


def is_question(sentence: str) -> bool:
    """Whether a sentence is a question, with or without its ``?``."""
    text = _plain(sentence)
    return bool(text) and (text.rstrip().endswith("?") or bool(_QUESTION_START.search(text)))


def asks(sentence: str) -> bool:
    """Whether a sentence asks for something: a question, an imperative, a polite or
    indirect request."""
    text = _plain(sentence)
    if not text:
        return False
    if is_question(text) or _POLITE.search(text):
        return True
    if _WANT_WORK.search(text):
        return True
    first = re.match(r"([\w']+)\s*([\w']*)", text)
    word, after = (first.group(1).lower(), first.group(2).lower()) if first else ("", "")
    if word in IMPERATIVES and after not in _SUBJECT_VERBS:
        return True
    negative = _NEGATIVE.match(text)
    return negative is not None and negative.group(1).lower() in IMPERATIVES


def _kind(sentence: str) -> Kind:
    if not re.search(r"\w", sentence) or is_small_talk(sentence):
        return "other"
    if asks(sentence):
        return "request"
    if re.match(r"(?:you|you're|you are|your)\b", _plain(sentence), re.I):
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


_STOP = r"(?=\s+(?:now|last|this|next|since|from|on|in|at|today|yesterday|instead)\b|[,.;!]|$)"
_NOT = re.compile(r"^(?P<before>.+?)(?:\s+now\s*,?|\s*,)\s+(?:and )?not\s+(?P<old>[^,.;!?]+?)"
                  r"(?:\s+(?:anymore|any more|any longer))?\s*(?:[,.;!?]|$)", re.I)
_FROM_TO = re.compile(r"\b(?:moved|switched|changed|upgraded|downgraded|migrated|shifted|"
                      r"swapped|went|converted|transferred|moving|switching|changing)\b.*?"
                      rf"\bfrom\s+(?P<old>.+?)\s+to\s+(?P<new>.+?){_STOP}", re.I)
_INSTEAD = re.compile(r"^(?P<before>.+?)\s+instead of\s+(?P<old>[^,.;!?]+)", re.I)
_MARKER = re.compile(r"^\W*(?:actually|correction|sorry|oops|no wait|wait|scratch that|"
                     r"my (?:mistake|bad)|i meant|to correct)\b", re.I)
# the last word before a new value: "is called wren", "it's Maria", "I meant Tuesday"
_VALUE_AFTER = re.compile(r".*\b(?:is|are|was|were|it's|its|called|named|meant|mean|be|"
                          r"'s|take|use|using|got|get|prefer|with|at|on|to)\s+(?P<value>.+)$",
                          re.I)
_DETERMINERS = frozenset("the a an my our his her their your this that".split())


def _trim(value: str) -> str:
    return re.sub(r"\s+now$", "", value.strip(" \t,.;:!?\"'"), flags=re.I).strip()


def _value_before(before: str, old: str) -> str:
    """The new value at the end of the words before "not …" or "instead of …": what
    follows the clause's verb, else as many words as the old value has."""
    before = _trim(before)
    clause = re.split(r"[:;,]\s*", before)[-1]
    match = _VALUE_AFTER.match(clause)
    if match and len(match.group("value").split()) <= 4:
        return _trim(match.group("value"))
    words = clause.split()
    take = max(len(old.split()), 1)
    if len(words) > take and words[-take - 1].lower() in _DETERMINERS:
        take += 1
    return " ".join(words[-take:])


def correction(sentence: str) -> Correction | None:
    """The new and old values of a sentence that corrects one said before, else None."""
    text = _plain(sentence)
    if (match := _FROM_TO.search(text)) is not None:
        return Correction(_trim(match.group("new")), _trim(match.group("old")))
    if (match := _NOT.match(text)) is not None and not re.search(
            r"\b(?:do|does|did|am|is|are|was|were|can|could|will|would|have|has)\s*$",
            match.group("before"), re.I):
        old = _trim(match.group("old"))
        return Correction(_value_before(match.group("before"), old), old)
    if (match := _INSTEAD.match(text)) is not None:
        old = _trim(match.group("old"))
        return Correction(_value_before(match.group("before"), old), old)
    if _MARKER.search(text):
        match = _VALUE_AFTER.match(text.rstrip(".!"))
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
