"""Consolidation of notes into MEMORY.md, as policy (pure functions, no model call).

Daily logs and session files pile up; what lasts in them (facts, decisions, preferences,
people, open commitments) belongs in MEMORY.md. The model is shown the numbered lines of
the notes written since the last run (``S1``, ``S2`` …, ``source_lines``) and MEMORY.md's
numbered bullets (``M1`` …), and answers with one operation a line (``parse``):

    ADD <section> | <fact> | S<n>
    REPLACE M<n> | <fact> | S<n>

or ``NONE``. Nothing the model writes reaches the file unchecked (``check``): a fact must
come from the line it cites (its numbers, identifiers and names are on that line, and it
shares words with it); a fact MEMORY.md already holds is a duplicate and merges; a
``REPLACE`` names a bullet that exists. ``apply`` then edits the text itself: an added
fact goes under its section (one of ``SECTIONS``), with its provenance
(``memory/2026-11-20.md#L12``); a replaced bullet moves, word for word, to ``## Replaced``
with the date and what replaced it, so the older value leaves visibly and no line written
by hand is ever lost (``lost_lines`` checks that before anything is written).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from clawd.context.flush import FACT_CHARS
from clawd.context.references import references
from clawd.context.requests import content_words, request_kept
from clawd.core import listmark, phrases
from clawd.workspace.files import MEMORY_DIR, REPLACED_SECTION, replaced_entry, without_replaced

SECTIONS = ("About the user", "People", "Projects", "Decisions", "Facts and references",
            "Lessons", "Open threads")
DEFAULT_SECTION = "Facts and references"
_BULLET = re.compile(r"^\s*[-*+]\s+\S")
_PROVENANCE_TAIL = re.compile(rf"\s*\({MEMORY_DIR}/[^()]+#L\d+(?:-\d+)?\)\s*$")
_OP = re.compile(r"^\W*(ADD|REPLACE)\s+(.+?)\s*\|\s*(.+?)\s*\|\s*\[?(S\d+)\]?\W*$", re.I)


@dataclass(frozen=True)
class Source:
    """One line of a note, as the model is shown it."""

    ref: str  # S1, S2, …
    path: str
    line: int
    text: str

    @property
    def provenance(self) -> str:
        return f"{self.path}#L{self.line}"


@dataclass(frozen=True)
class Op:
    kind: str  # "add" or "replace"
    target: str  # a section (add) or M<n> (replace)
    fact: str
    source: str  # S<n>


@dataclass
class Outcome:
    """What a run decided: the new text, and what it did and refused, for the report."""

    text: str
    added: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)  # (old, new)
    merged: list[str] = field(default_factory=list)  # facts MEMORY.md already held
    refused: list[str] = field(default_factory=list)  # why each refused operation was


def source_lines(notes: dict[str, str]) -> list[Source]:
    """The lines worth showing of ``notes`` (path -> text), numbered: list items and plain
    sentences, not headings, blank lines, fences or the template's placeholders."""
    found: list[Source] = []
    for path in sorted(notes):
        for number, line in enumerate(notes[path].splitlines(), 1):
            text = line.strip()
            if (len(text) < 8 or text.startswith(("#", "```", "|", ">")) or
                    listmark.PLACEHOLDER.match(text) or not re.search(r"[A-Za-z]{3}", text)):
                continue
            found.append(Source(f"S{len(found) + 1}", path, number, text[:FACT_CHARS]))
    return found


def bullets(memory: str) -> dict[str, int]:
    """MEMORY.md's bullets as the model is shown them: ``M<n>`` -> their line index (those
    of ``## Replaced`` are history, never shown to be replaced again)."""
    lines = without_replaced(memory).splitlines()
    ids = [i for i, line in enumerate(lines) if _BULLET.match(line) and not
           listmark.PLACEHOLDER.match(line)]
    return {f"M{n}": i for n, i in enumerate(ids, 1)}


def parse(answer: str) -> list[Op] | None:
    """The operations of a model's answer; ``[]`` for ``NONE``; None when the answer is
    neither (empty or malformed)."""
    ops = []
    for line in answer.splitlines():
        found = _OP.match(line.strip().strip("`"))
        if found:
            kind, target, fact, source = found.groups()
            ops.append(Op(kind.lower(), target.strip().strip("#").strip(), fact.strip(),
                          source.upper()))
    if ops:
        return ops
    return [] if re.fullmatch(r"\W*NONE\W*", answer.strip(), re.I) else None


def _words(text: str) -> set[str]:
    """The words that carry meaning ("the" is no evidence that two lines say the same), a
    possessive read as its name ("Noor's" as "noor")."""
    return {phrases.without_possessive(word) for word in content_words(text)}


SOURCE_SHARE = 0.5  # of a fact's words (but its references) on the line it cites


def from_source(fact: str, source: Source) -> bool:
    """Whether ``fact`` comes from ``source``: its numbers, identifiers and names are on
    that line, and so are at least half of its other words (a small model must not invent:
    one cited "Gareth fixed the leaking tap" for a fact about patio layouts)."""
    exact, names = references(fact)
    low = source.text.lower()
    if any(token.lower() not in low for token in exact | names):
        return False
    said = _words(fact)
    shared = said & _words(source.text)
    return bool(shared) and len(shared) >= SOURCE_SHARE * len(said)


def same_subject(fact: str, bullet: str) -> bool:
    """Whether ``fact`` may replace ``bullet``: they share a word that carries meaning or a
    name (a small model replaced "parking space B14" with a fact about patio layouts)."""
    return bool(_words(fact) & _words(_PROVENANCE_TAIL.sub("", bullet)))


def section_of(name: str) -> str:
    """The section an ``ADD`` names, as one of ``SECTIONS`` (unknown: ``DEFAULT_SECTION``)."""
    wanted = name.lower().strip()
    return next((s for s in SECTIONS if s.lower() == wanted),
                next((s for s in SECTIONS if wanted and wanted in s.lower()), DEFAULT_SECTION))


def check(ops: list[Op], sources: list[Source], memory: str) -> tuple[list[Op], list[str]]:
    """The operations that may be applied, and why each of the others may not."""
    by_ref = {s.ref: s for s in sources}
    marks = bullets(memory)
    lines = memory.splitlines()
    kept: list[Op] = []
    refused: list[str] = []
    for op in ops:
        source = by_ref.get(op.source)
        if source is None:
            refused.append(f"{op.fact!r}: cites {op.source}, which is no line shown")
        elif not op.fact or len(op.fact) > FACT_CHARS:
            refused.append(f"{op.fact[:60]!r}: empty or longer than {FACT_CHARS} characters")
        elif not from_source(op.fact, source):
            refused.append(f"{op.fact!r}: not what {source.provenance} says")
        elif op.kind == "replace" and op.target.upper() not in marks:
            refused.append(f"{op.fact!r}: replaces {op.target}, which is no bullet")
        elif op.kind == "replace" and _words(op.fact) <= _words(
                _PROVENANCE_TAIL.sub("", lines[marks[op.target.upper()]])):
            refused.append(f"{op.fact!r}: the same as the bullet it would replace")
        elif op.kind == "replace" and not same_subject(op.fact,
                                                       lines[marks[op.target.upper()]]):
            refused.append(f"{op.fact!r}: not about {op.target}, the bullet it would replace")
        else:
            kept.append(Op(op.kind, op.target.upper() if op.kind == "replace" else op.target,
                           op.fact, op.source))
    return kept, refused


def apply(memory: str, ops: list[Op], sources: list[Source], today: date) -> Outcome:
    """MEMORY.md with the checked ``ops`` applied (see the module docstring)."""
    by_ref = {s.ref: s for s in sources}
    lines = memory.splitlines()
    marks = bullets(memory)
    outcome = Outcome(memory)
    moved: list[str] = []
    additions: dict[str, list[str]] = {}
    done: set[int] = set()
    for op in ops:
        line = f"- {op.fact} ({by_ref[op.source].provenance})"
        if op.kind == "replace":
            at = marks[op.target]
            if at in done:  # replaced already in this run: the first one stands
                outcome.refused.append(f"{op.fact!r}: {op.target} was replaced already")
                continue
            done.add(at)
            old = lines[at]
            lines[at] = line
            moved.append(replaced_entry(_bare(old), today, op.fact))
            outcome.replaced.append((_bare(old), op.fact))
            continue
        present = lines + [a for v in additions.values() for a in v]
        if any(request_kept(op.fact, [_bare(x)]) for x in present if _BULLET.match(x)):
            outcome.merged.append(op.fact)
            continue
        additions.setdefault(section_of(op.target), []).append(line)
        outcome.added.append(op.fact)
    for section, new in additions.items():
        lines = _insert(lines, section, new)
    if moved:
        lines = _insert(lines, REPLACED_SECTION, moved)
    outcome.text = "\n".join(lines).rstrip("\n") + "\n"
    return outcome


def _bare(line: str) -> str:
    """A bullet's text without its marker."""
    return listmark.strip(line).strip()


def _insert(lines: list[str], section: str, new: list[str]) -> list[str]:
    """``new`` bullets at the end of ``section`` (made at the end of the file when missing;
    a template placeholder there gives way to the first real bullet)."""
    heading = next((i for i, x in enumerate(lines)
                    if re.fullmatch(rf"##\s+{re.escape(section)}\s*", x.strip(), re.I)), None)
    if heading is None:
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        return [*lines, "", f"## {section}", "", *new]
    end = next((i for i in range(heading + 1, len(lines)) if lines[i].startswith("#")),
               len(lines))
    body = [x for x in lines[heading + 1:end] if not listmark.PLACEHOLDER.match(x)]
    while body and not body[-1].strip():
        body = body[:-1]
    if not any(x.strip() for x in body):
        body = [""]
    return [*lines[:heading + 1], *body, *new, *([""] if end < len(lines) else []),
            *lines[end:]]


def lost_lines(before: str, after: str) -> list[str]:
    """Lines of ``before`` whose text ``after`` no longer holds (the template's placeholders
    aside): a consolidation that would lose one is not written."""
    kept = after
    return [line for line in before.splitlines() if line.strip()
            and not listmark.PLACEHOLDER.match(line) and _bare(line) not in kept]

