"""A request to remember, and whether the turn kept it (pure functions).

When you ask the assistant to remember something, that is the runtime's to keep, whatever
the model does: a weak model answers "I saved it" and writes nothing. ``keep_requests``
finds the sentences of a message that ask for something to be kept; ``request_kept`` tells
whether the notes written in the turn hold what they asked for; if not, the loop appends
the sentences to today's log, marked as your words.

A request is a sentence that asks: an imperative at its start ("Remember …", "Please note
…", "Don't forget …", "Keep in mind …", "Write this down: …", "Add to your notes …"), or a
polite question ("Can you remember that …?", "Could you note …?"), or "I want you to
remember …". A mention is not: "I need to remember to call Ines", "Do you remember …?",
"I remember when …", "Remember when we …?". German, French and Spanish imperatives count too
("Merk dir …", "N'oublie pas …", "Recuerda que …").

A request for a reminder (``asks_reminder``) gets a word from the runtime beside it
(``reminder_aside``): set it with ``schedule``, passing on the person's words for the time.
"""

from __future__ import annotations

import re
from datetime import datetime

from clawd.automation.when import time_phrase
from clawd.automation.zones import user_zone
from clawd.context.references import references
from clawd.core import phrases
from clawd.core.phrases import keep_words
from clawd.core.templates import render
from clawd.core.textcut import sentences


def keep_requests(message: str) -> list[str]:
    """The sentences of ``message`` that ask for something to be kept, in order."""
    found = []
    for sentence in sentences(message):
        text = sentence.strip()
        if not text or keep_words.REMEMBER_WHEN.search(text):
            continue
        asks = (keep_words.KEEP_ASKED.search(text) or keep_words.KEEP_WANTED.search(text)
                or (not text.endswith("?") and (keep_words.KEEP_ORDER.search(text)
                                               or keep_words.READ_THEN_KEEP.search(text)
                                               or keep_words.KEEP_ORDER_ELSEWHERE.search(text))))
        if asks:
            found.append(text)
    return found


SAID_CHARS = 400  # a message up to this long is kept whole: the request and what it is about


def to_keep(message: str) -> str:
    """What a message that asks to be remembered wants kept: all of it when it is short
    ("Remember this. My locker is 42."), else each request and the sentence after it; ""
    when it asks nothing."""
    asked = keep_requests(message)
    if not asked:
        return ""
    if len(message) <= SAID_CHARS:
        whole = " ".join(message.split())
        return whole if content_words(whole) else ""  # "Can you remember this?" says nothing
    parts = [s.strip() for s in sentences(message)]
    chosen = {i for i, s in enumerate(parts) if s in asked}
    chosen |= {i + 1 for i in chosen if i + 1 < len(parts)}
    return " ".join(" ".join(parts[i].split()) for i in sorted(chosen))


MAX_LINES = 10  # lines of a file read for a request that are kept with it
LINE_CHARS = 300


def names_file(request: str, path: str) -> bool:
    """Whether ``request`` names the file at ``path`` (its name, or its path)."""
    path = path.strip().removeprefix("./")
    name = path.rsplit("/", 1)[-1]
    return bool(name) and re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])",
                                    request) is not None


def lines_used(request: str, reply: str, path: str, text: str) -> list[str]:
    """The lines of a file read for ``request`` that it is about: those that share a word
    with the request (other than the file's own name) or hold a number or identifier the
    reply gives. At most ``MAX_LINES``, each cut at ``LINE_CHARS``."""
    own = set(re.findall(r"[a-z0-9]+", path.lower()))
    wanted = {w for w in re.findall(r"[a-z0-9]+", request.lower())
              if len(w) > 2 and w not in keep_words.ABOUT_STOP_WORDS and w not in own
              and w not in {"read", "open", "check", "look", "file", "and", "then"}}
    exact, names = references(reply)
    given = {t.lower() for t in exact | names}
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("[showing lines"):
            continue
        low = stripped.lower()
        if wanted & set(re.findall(r"[a-z0-9]+", low)) or any(t in low for t in given):
            kept.append(stripped[:LINE_CHARS])
    return kept[:MAX_LINES]


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry meaning (no stop words, no single letters)."""
    return {w for w in re.findall(r"[\w'’-]+", text.lower()) if w not in keep_words.ABOUT_STOP_WORDS
            and len(w) > 1}


def stem(word: str) -> str:
    """A word without the ending it takes in another form ("moved", "moves" → "mov")."""
    for ending in phrases.ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[:-len(ending)]
    return word


HELD_SHARE = 0.6  # of a request's words (but its references) a note holding it has


def request_kept(request: str, written: list[str]) -> bool:
    """Whether notes ``written`` in the turn hold ``request``: every number, identifier and
    name it gives, and most (``HELD_SHARE``) of its other words."""
    notes = " ".join(written).lower()
    if not notes.strip():
        return False
    exact, names = references(request)
    if any(token.lower() not in notes for token in exact | names):
        return False
    words = content_words(request)
    if not words:
        return True
    return sum(w in notes for w in words) >= HELD_SHARE * len(words)


def asks_reminder(text: str) -> bool:
    """Whether a message asks to be told something later ("remind me on Friday at 6pm
    to …", "set a reminder"), not what was said before ("remind me what we decided")."""
    return keep_words.REMIND_LATER.search(text) is not None


def reminder_aside(text: str, schedules: bool, now: datetime, zone: str | None) -> str:
    """What the runtime tells the model beside a message that asks for a reminder: how to
    set it with ``schedule`` (``schedules``), naming the words of ``text`` that give the
    time when there are some (``when.time_phrase``: a small model copied a template's
    example time instead); else that clawd cannot notify at a time."""
    if not schedules:
        return render("reminder_aside.md.j2").strip()
    phrase = time_phrase(text, now, user_zone(zone))
    return render("reminder_schedule.md.j2", when=phrase).strip()


# "Remind me tomorrow at 9 to call the landlord": the asking around what to be reminded of
_ASKING = re.compile(r"^.*?\b(?:remind (?:me|us)|set (?:me |up )?(?:a |an )?reminder|"
                     r"(?:don't|do not) let me forget)\b(?:\s+(?:again|please|later))?[\s,:]*"
                     r"(?:(?:to|that|about|of|for)\b\s*)?", re.IGNORECASE)


def reminded_of(text: str, when: str) -> str:
    """What a reminder request asks to be reminded of: ``text`` without the words that
    ask and the time ``when`` ("Remind me tomorrow at 9 to call the landlord." -> "call
    the landlord"); the message itself when nothing else is left."""
    rest = " ".join(text.replace(when, " ").split())
    rest = re.sub(r"\b(?:on|at|in)\s+(?=to\b)", "", rest)  # "Remind me on  to …"
    rest = _ASKING.sub("", rest, count=1)
    rest = re.sub(r"^(?:to|that|about)\s+", "", rest, flags=re.I).strip(" .,!?;:")
    return rest or " ".join(text.split())


# a word that says when, left over after the time read: the time read is not the whole of it
_WHEN_WORDS = re.compile(
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|tonight|"
    r"morning|afternoon|evening|noon|midnight|week|month|year|"
    r"jan(?:uary)?|feb(?:ruary)?|march|apr(?:il)?|june?|july?|aug(?:ust)?|sep(?:tember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|\d{1,2}(?::\d{2})?\s*(?:am|pm)|\d{1,2}:\d{2})\b",
    re.IGNORECASE)


def reminder_request(text: str, now: datetime, zone: str | None) -> tuple[str, str] | None:
    """(the words that give the time, what to be reminded of) of a reminder request, when
    the time read (``when.time_phrase``) is all the message says of when; None when it
    names no time clawd reads, or more than the words read ("pay rent on Monday at 10"
    read as "at 10" today)."""
    when = time_phrase(text, now, user_zone(zone))
    if when is None:
        return None
    what = reminded_of(text, when)
    return None if _WHEN_WORDS.search(what) else (when, what)
