"""A correction the person tells, and the older note lines it replaces (pure functions).

"Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired." The day-1 log and the saved
session both still say "her vet is Dr. Almeida", and a model answers from what it reads
first. So a correction replaces at the time it is told: ``changes_in`` finds the sentences
of a message that change a value (``facts.correction``: "moved from A to B", "B now, not A",
"B instead of A", "actually …"; and "X is now B", "X is B now", "X changed to B"), each with
what changed (``subject``: its words, in the first letters that several forms of a word
share), its new value and, when named, the old one (a name the sentence gives after the new
value, "Dr. Almeida retired", is taken as the old one). An opening that only says the
sentence corrects ("Correction:", "Update:", "Actually,") is not part of it. ``replaced``
picks the note lines that still say the old value of that subject: a line holding the old
value and a word of the subject ("I moved from Lisbon to Porto" replaces "- Moved to Lisbon
in 2020", never "Ana lives in Lisbon"), or, with no old value named, every word of the
subject, not the new value, and what the change is about (``Change.says``): where someone is
after a move ("Tom moved to Oslo" replaces "Tom lives in Bergen", never "Tom's birthday is
on 3 May"), the subject's own value otherwise ("Miso's vet is …", never "Miso's vet visit is
on Friday"). A line missed keeps an old value beside the correction in today's log; a line
taken wrongly would leave MEMORY.md without a true fact. The loop records them in
MEMORY.md's ``## Replaced`` record (``loop.keeping.keep_correction``), and wherever a note
is handed out the old line shows struck through with the new one beside it
(``memory.superseded``). ``standing`` keeps the changes a conversation told that no later
one of it changed again, and ``left_standing`` takes out of a note the lines they replace: a
note written after the correction (the flush's) never says the old value again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clawd.context.facts import correction, kind
from clawd.context.references import references
from clawd.context.requests import content_words
from clawd.core import phrases
from clawd.core.phrases import changes
from clawd.core.textcut import sentences

PREFIX = 5  # two words are one when they share their first letters up to this many


@dataclass(frozen=True)
class Change:
    """A sentence that changes a value: what it is about, the new value, the old one."""

    sentence: str
    subject: frozenset[str]
    new: str
    old: str | None
    # with no old value, what a line must say of the subject to be replaced: "where" (a
    # move: where someone is) or "value" ("… is …", "…: …", "the flight leaves at …")
    says: str = "value"


def _key(word: str) -> str:
    return phrases.without_possessive(word.lower().strip("'’.,:;!?\""))[:PREFIX]


def keys(text: str) -> set[str]:
    """The words of ``text`` that carry meaning, each as its first letters (a number
    whole)."""
    return {w if w.isdigit() else _key(w) for w in content_words(text)
            if w.isdigit() or len(_key(w)) >= 3}


def _same(a: str, b: str) -> bool:
    if a.isdigit() or b.isdigit():
        return a == b
    short, long = sorted((a, b), key=len)
    return long.startswith(short)


def _holds(line: set[str], wanted: set[str]) -> bool:
    return all(any(_same(w, word) for word in line) for w in wanted)


def _names(text: str) -> set[str]:
    exact, names = references(text)
    titled = set(changes.TITLED_NAME.findall(text))
    return exact | names | titled


def _named(words: str) -> set[str]:
    """The keys of ``words`` that name something, not the change ("now", "actually") nor
    its doer ("I", "she", "we just")."""
    return keys(words) - {_key(w) for w in changes.CHANGE_WORDS | changes.NO_SUBJECT}


def change(sentence: str) -> Change | None:
    """The change a sentence makes, or None when it changes nothing."""
    # "Dr. Costa": a title's full stop ends no value
    text = changes.TITLE_STOP.sub(r"\1 ", " ".join(sentence.split()))
    opening = changes.OPENING.match(text)  # "Correction:", "Actually,": not what changed
    body = text[opening.end():] if opening else text
    if not body or kind(body) != "fact":  # "What is my vet now?" asks; it changes nothing
        return None
    found = correction(body)
    subject, says = "", "value"
    if found is not None and found.new:
        new, old = found.new, found.old
    elif (match := next(filter(None, (p.match(body) for p in changes.NEW_VALUE)), None)):
        new, old, subject = match["new"].strip(), None, match["subject"]
        verb = match.groupdict().get("verb") or ""
        if changes.MOVE.search(body[:match.start("new")]) or changes.LIVES.match(verb):
            says = "where"
        elif verb:  # "Karen works at …": the verb is what the value is of, "She works
            if not _named(subject):  # at …" names nobody a note could hold
                return None
            subject = f"{subject} {verb}"
    elif opening and (found := correction(text)) is not None and found.new:
        new, old = found.new, found.old  # "Actually, the party is at 8"
    else:
        return None
    if old is None:  # a name after the new value is the old one's ("…, Dr. Almeida retired")
        after = body.find(new) + len(new) if new in body else 0
        others = {n for n in _names(body[after:]) if n not in new and n not in subject}
        old = " ".join(sorted(others)) or None
    about = _named(subject or body) - keys(new) - keys(old or "")
    about -= {_key(n) for n in _names(old or "")}
    if not about and not old:
        return None  # "It is now 5pm": nothing named that a note could hold
    return Change(" ".join(sentence.split()), frozenset(about), new, old, says)


def changes_in(message: str) -> list[Change]:
    """The changes among the sentences of a message, in order."""
    return [found for s in sentences(message) if (found := change(s)) is not None]


def replaced(found: Change, line: str) -> bool:
    """Whether a note line still says the value ``found`` changes."""
    words = keys(line)
    if not words or _holds(words, keys(found.new)) and keys(found.new):
        return False  # it says the new value already
    if found.old:
        olds = [keys(part) for part in _names(found.old)] or [keys(found.old)]
        says_old = any(old and _holds(words, old) for old in olds)
        return says_old and any(any(_same(w, word) for word in words)
                                for w in found.subject)
    return bool(found.subject) and _holds(words, set(found.subject)) and _gives_value(found,
                                                                                     line)


def _gives_value(found: Change, line: str) -> bool:
    """Whether ``line`` says what ``found`` (which names no old value) changes of its
    subject (``Change.says``): where someone is, after a move ("Tom lives in Bergen", not
    "Tom works at Equinor"); the subject's own value ("Miso's vet is …", "Team meeting:
    …", not "Miso's vet visit is …")."""
    if found.says == "where" and changes.PLACE.search(line):
        return True
    follows = changes.MOVED_STATES if found.says == "where" else changes.STATES
    return any(re.search(rf"\b{re.escape(word)}{follows}", line, re.I) for word in found.subject)


def standing(messages: list[str]) -> list[Change]:
    """The changes told in ``messages`` (in order) that no later one changes again."""
    told = [found for text in messages for found in changes_in(text)]
    return [found for i, found in enumerate(told)
            if not any(replaced(later, found.sentence) for later in told[i + 1:])]


def left_standing(note: str, told: list[Change]) -> tuple[str, list[str]]:
    """``note`` without its lines that a change in ``told`` replaces, and those lines. Only
    a change that names its old value counts: "My vet is now Dr. Costa" alone would take
    "Miso's vet visit is on Friday" too, a fact that was never corrected."""
    told = [found for found in told if found.old]
    if not told:
        return note, []
    kept: list[str] = []
    dropped: list[str] = []
    for line in note.splitlines():
        gone = line.strip() and not line.lstrip().startswith("#") and any(
            replaced(found, line) for found in told)
        (dropped if gone else kept).append(line)
    if not any(line.strip() and not line.lstrip().startswith("#") for line in kept):
        kept = []  # headings with nothing left under them
    return "\n".join(kept).strip("\n"), [line.strip() for line in dropped]
