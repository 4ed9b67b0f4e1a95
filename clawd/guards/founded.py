"""Whether a note says only what was said, and the guard that refuses one that does not.

A 1.5B model's memory flush filled USER.md's template with guesses and saved them as notes:
"- **Time zone**: UTC", "- **Tools and stack they use**: Python, Flask, PostgreSQL", none of
it said; search then ranked them first. A note is *founded* when what it claims is in what
the person said or a tool returned in the conversation, or in what their older notes say
(``said``; never the model's own replies, which is where a guess would come from): every
number and identifier of the line, every name, and at least half of its other words, in
any form (``founded_share`` of the profile's ``Thresholds``; a date or a time the note is
dated with aside). A line that is a template's
label with a value ("- Pronouns: They") is judged by its value alone, and a value with no
word of its own is a blank filled with a guess. A note that fills a template's labels
(``template_lines``, two, or more) with any value nobody said is refused whole: its other values
were guessed the same way.

``founded_note`` splits a note into the lines kept and those left out (the flush keeps what
its answer founded, ``loop.upkeep``); ``FoundedNotes`` (guard ``founded_notes``, weak
profile) refuses a ``write`` or ``edit`` of a memory file (MEMORY.md, USER.md, anything
under ``memory/``) whose new lines are not founded, once with what nobody said, then with
the next step made to answer in words; and one whose lines say a value the person has
corrected in this conversation (``corrections.left_standing``).
"""

from __future__ import annotations

import posixpath
import re

from clawd.context.access import WRITE_TOOLS
from clawd.context.corrections import left_standing, standing
from clawd.context.references import references
from clawd.context.requests import content_words, stem
from clawd.core import listmark, phrases
from clawd.core.messages import Message, ToolCall
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import Guard, Refusal, TurnView
from clawd.workspace.files import is_private_memory
from clawd.workspace.template import template_labels

# the notes a model writes about the person: their profile too, not only memory/
PROFILE_FILES = frozenset({"USER.md", "IDENTITY.md"})


def told_or_returned(messages: list[Message]) -> str:
    """What a note may draw on in ``messages``: the person's messages (not the flush's
    request) and what tools returned (not a file change's acknowledgement, not an error)."""
    return "\n".join(m.text for m in messages
                     if (m.role == "user" and not m.flush)
                     or (m.role == "toolResult" and not m.is_error
                         and m.tool_name not in WRITE_TOOLS))


def known_notes(files: dict[str, str]) -> str:
    """What the person's notes already said, of the files a model was shown (MEMORY.md, the
    daily logs, recalled notes, USER.md): a note may draw on an older one ("Flat budget in
    Lisbon" after "Planning to move to Lisbon")."""
    return "\n".join(text for name, text in files.items()
                     if is_private_memory(name) or name == "USER.md")


def _label(line: str) -> tuple[str | None, str]:
    """(the template label a line fills, lower-cased, or None; the rest of the line)."""
    body = listmark.strip(line).replace("**", "").strip()
    label, colon, value = body.partition(":")
    key = " ".join(label.lower().split())
    if colon and key in template_labels():
        return key, value.strip()
    return None, body


def _flat(text: str) -> str:
    return text.lower().replace(",", "")


_CAPITALISED = re.compile(r"(?<![\w'’-])[A-Z][\w-]{2,}")


def _names(text: str) -> set[str]:
    """The capitalised words of a line but its first ("Miso's vet is Dr. Costa": Costa),
    possessives aside: in a note, a capital marks a name far more often than a sentence's
    start."""
    return {name for name in _CAPITALISED.findall(text)[1:]
            if name.lower() not in phrases.NOTE_FRAME}


# a date or a time: a note is dated ("2026-11-28: …", "at 10:05"), which nobody says
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}")


# "February 3rd" for "3 February": an ordinal says its number
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$", re.I)


def unsaid(text: str, said: str, tuning: Thresholds = DEFAULT) -> list[str]:
    """What ``text`` (one line) claims that ``said`` does not hold: its numbers,
    identifiers and names missing there, or, when fewer than ``founded_share`` of its other
    words are there (in any form), those words; [] when it is founded."""
    flat = _flat(said)
    exact, names = references(text)
    names |= _names(text)
    gone = sorted(ref for ref in exact | names
                  if _flat(_ORDINAL.sub(r"\1", ref)) not in flat and not _DATE.fullmatch(ref))
    if any(ref in exact for ref in gone):
        return gone
    known = {stem(w) for w in content_words(said)}
    words = {stem(w) for w in content_words(text)} - {ref.lower() for ref in exact | names}
    new = sorted(w for w in words if w not in known)
    if words and len(new) > (1 - tuning.founded_share) * len(words):
        return gone + new
    return gone


def founded_note(note: str, said: str, tuning: Thresholds = DEFAULT) -> tuple[str, list[str]]:
    """``note`` without the lines it claims that ``said`` does not hold, and those lines.
    Headings and blank lines stay while a line stays under them; a template's labels
    filled with a guess leave the whole note out."""
    kept: list[str] = []
    dropped: list[str] = []
    filled = guessed = 0
    for line in note.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            kept.append(line)
            continue
        label, value = _label(line)
        if label is not None:
            if not value or value.startswith("("):
                kept.append(line)  # the template's own blank, left as it was
                continue
            filled += 1
            wrong = not content_words(value) and not any(references(value)) or bool(
                unsaid(value, said, tuning))
            guessed += wrong
        else:
            wrong = bool(unsaid(value, said, tuning))
        (dropped if wrong else kept).append(line)
    if filled >= tuning.template_lines and guessed:
        whole = [line.strip() for line in note.splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
        return "", whole
    if not any(line.strip() and not line.lstrip().startswith("#") for line in kept):
        kept = []  # headings with nothing left under them
    return "\n".join(kept).strip("\n"), [line.strip() for line in dropped]


def added_lines(call: ToolCall) -> str | None:
    """What a ``write`` or ``edit`` adds to a memory file or the person's profile (an
    edit's new lines that its old text did not hold), or None for any other call."""
    path = posixpath.normpath(str(call.arguments.get("path", "")))
    if call.name not in WRITE_TOOLS or not (is_private_memory(path) or path in PROFILE_FILES):
        return None
    if call.name == "write":
        return str(call.arguments.get("content") or "")
    old = set(str(call.arguments.get("oldText") or "").splitlines())
    new = str(call.arguments.get("newText") or "")
    return "\n".join(line for line in new.splitlines() if line not in old)


class FoundedNotes(Guard):
    name = "founded_notes"

    def refuse(self, call: ToolCall, turn: TurnView) -> Refusal | None:
        note = added_lines(call)
        if not note:
            return None
        note = note.replace("\\n", "\n")
        told = standing([m.text for m in turn.messages if m.role == "user" and not m.flush]
                        + [turn.text])
        _, corrected = left_standing(note, told)
        if corrected:
            lines = "; ".join(f'"{line}"' for line in corrected[:3])
            return Refusal(f"not written: {lines} says what the user has since corrected. "
                           f"Write the new value only, or answer the user.",
                           final=bool(turn.refused))
        said = "\n".join([turn.text, told_or_returned(turn.messages), known_notes(turn.files)])
        _, dropped = founded_note(note, said, self.tuning)
        if not dropped:
            return None
        words = sorted({w for line in dropped
                        for w in unsaid(_label(line)[1], said, self.tuning)})
        what = f" ({', '.join(words[:6])})" if words else ""
        lines = "; ".join(f'"{line}"' for line in dropped[:3])
        if turn.refused:
            return Refusal(f"not written: {lines} says what nobody said{what}, again. Do not "
                           f"write it: answer the user now.", final=True)
        return Refusal(f"not written: {lines} says what neither the user nor a tool said"
                       f"{what}; a note keeps only what was said. Write only the lines the "
                       f"user's own words hold, or answer the user.")
