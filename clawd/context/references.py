"""What a compaction summary must not lose: the user's exact references (pure functions).

The summariser is asked to copy numbers, names and identifiers exactly, yet a model may
still leave them out: the 1.5B model summarised "my budget for the Lisbon trip is 2400 euros
in total" away entirely, and the budget was gone. After a summary is written,
``with_users_words`` looks for the user's sentences (in the summarised messages, and those
an earlier summary kept this way) that hold an exact reference the summary does not: a
number, an identifier (a word mixing letters and digits, or holding ``_``, ``/`` or an
inner ``.``), a URL, or a capitalised name inside a sentence. It appends them word for word
under ``## The user's words``, the sentences of short messages (things the user said,
rather than pasted) and those with more missing numbers and identifiers first, within a
budget of characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from clawd.core.messages import Message
from clawd.core.textcut import sentences

HEADING = "## The user's words"
MAX_CHARS = 1500
SENTENCE_CHARS = 300
SHORT_MESSAGE = 400  # characters: longer user messages are mostly pasted material

_URL = re.compile(r"https?://\S+[^\s.,;:!?)\]]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:/-]\d+)*(?![\w])")
_IDENTIFIER = re.compile(r"(?<![\w/.-])(?=[\w./-]*[A-Za-z])(?=[\w./-]*(?:\d|_|\w[./]\w))"
                         r"[\w][\w./-]*[\w](?![\w/-])")
_NAME = re.compile(r"(?<=[\w,;:)] )[A-Z][a-z]{2,}\b|\b[A-Z]{2,}\b")


def references(sentence: str) -> tuple[set[str], set[str]]:
    """(numbers, identifiers and URLs; names) in ``sentence``."""
    urls = _URL.findall(sentence)
    rest = _URL.sub(" ", sentence)
    identifiers = _IDENTIFIER.findall(rest)
    rest = _IDENTIFIER.sub(" ", rest)
    return set(urls + identifiers + _NUMBER.findall(rest)), set(_NAME.findall(rest))


def _present(token: str, text: str, *, exact: bool) -> bool:
    flags = 0 if exact else re.IGNORECASE
    return re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text, flags) is not None


def missing(sentence: str, known: str) -> tuple[list[str], list[str]]:
    """The references of ``sentence`` that ``known`` does not hold: (numbers, identifiers
    and URLs, matched exactly; names, matched case aside)."""
    exact, names = references(sentence)
    return ([t for t in exact if not _present(t, known, exact=True)],
            [t for t in names if not _present(t, known, exact=False)])


def _clip(sentence: str) -> str:
    flat = " ".join(sentence.split())
    return flat if len(flat) <= SENTENCE_CHARS else flat[:SENTENCE_CHARS - 1].rstrip() + "…"


def _kept_before(previous: str | None) -> list[str]:
    """The sentences an earlier summary kept under ``HEADING``."""
    if not previous or HEADING not in previous:
        return []
    section = previous.split(HEADING, 1)[1].split("\n## ", 1)[0]
    return [line[2:].strip() for line in section.splitlines() if line.startswith("- ")]


def _candidates(messages: Iterable[Message], previous: str | None
                ) -> list[tuple[str, bool]]:
    """(sentence, from a short message) in order: an earlier summary's first."""
    found = [(sentence, True) for sentence in _kept_before(previous)]
    for m in messages:
        if m.role != "user" or m.flush or not m.text.strip():
            continue
        short = len(m.text) <= SHORT_MESSAGE
        found += [(sentence, short) for sentence in sentences(m.text)]
    return found


def users_words(known: str, messages: list[Message], previous: str | None = None,
                max_chars: int = MAX_CHARS) -> list[str]:
    """The user's sentences holding references that ``known`` (a summary, or the notes
    already saved) leaves out, within ``max_chars``, in conversation order."""
    scored = []
    seen: set[str] = set()
    for order, (sentence, short) in enumerate(_candidates(messages, previous)):
        text = _clip(sentence)
        if text in seen:
            continue
        seen.add(text)
        missing_exact, missing_names = missing(sentence, known)
        if missing_exact or missing_names:
            weight = 2 * len(missing_exact) + len(missing_names)
            scored.append((not short, -weight, order, text))
    kept, used = [], 0
    for _, _, order, text in sorted(scored):
        if used + len(text) + 3 <= max_chars:
            kept.append((order, text))
            used += len(text) + 3
    return [text for _, text in sorted(kept)]


def with_users_words(summary: str, messages: list[Message], previous: str | None = None,
                     max_chars: int = MAX_CHARS) -> str:
    """``summary`` with ``users_words`` appended under ``HEADING`` (unchanged when none)."""
    words = users_words(summary, messages, previous, max_chars)
    if not words:
        return summary
    lines = "\n".join(f"- {text}" for text in words)
    return (f"{summary.rstrip()}\n\n{HEADING}\nSentences of the user's with numbers, names or "
            f"identifiers the summary above leaves out, word for word:\n{lines}")
