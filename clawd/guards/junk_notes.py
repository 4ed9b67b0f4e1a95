"""Whether a write to a daily log is a note, and the guard that refuses one that is not.

A 1.5B model appended "2026-11-25 00:00:00 2026-11-25 00:00:00 tern hostname tern Debian
12" to the daily log as a note. ``junk`` tells such a write from a note by its words, with
no model call: it is junk when it holds nothing under its headings, when half its lines or
more repeat an earlier line or hold fewer than half new words (not a timestamp, not a word
the line said before) with a word repeated or fewer than two new ones, when each line is one
bare word with no heading over it ("- Porto" for "I moved to Porto last month"), or when it
is the user's message copied back and that message holds no fact (a request or a question;
a statement written back as it was said is a note), or when it is JSON data. A terse note
is still a note: "2026-11-25 Lisbon 2400 euros", and so is a list of single words under a
heading.

``JunkNotes`` (guard ``junk_notes``, weak profile) refuses such a ``write`` or ``edit`` of
``memory/YYYY-MM-DD.md`` before it runs, and one that is ``unfounded`` (a number or name
nothing in the turn said, and few of its words either: made up): the tool result is an
error saying what a note should be, so the model can write again. A second junk write in
the turn is refused too, and the next step must answer in words. A write that is ``copied``
from a file the model was shown (IDENTITY.md's template, MEMORY.md, an older log, a
recalled note) and not from the user's message is refused at once with the file's name, and
the next step answers: the lines are kept already, and in today's log they would look new.
The shares named here ("half", "most") are the profile's ``Thresholds`` (``junk_…``).
"""

from __future__ import annotations

import posixpath
import re

from clawd.context.access import WRITE_TOOLS
from clawd.context.facts import asks, facts
from clawd.context.references import missing, references
from clawd.context.replytext import runs
from clawd.context.requests import content_words, stem
from clawd.core import listmark, phrases
from clawd.core.messages import Message, ToolCall
from clawd.core.textcut import empty_sections_out
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import Guard, Refusal, TurnView
from clawd.workspace.files import is_daily_log

_TIMESTAMP = re.compile(
    r"^(?:\d{4}-\d{2}-\d{2}(?:[T_]?\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:am|pm)?|\d{1,2}/\d{1,2}/\d{2,4}|am|pm|utc|gmt|z)$",
    re.I)
# a JSON object or list of them: a 1.5B model wrote a read's arguments and result as its note
_JSON = re.compile(r'^\s*(?:```(?:json)?\s*)?\[?\s*\{\s*"')

NOTE_IS = ('a note is one line, in words, of what the user told or decided, e.g. '
           '"- Ines arrives in Lisbon on May 14"')


def _body(content: str) -> list[str]:
    """The lines of a note without headings, list marks and blanks."""
    lines = (listmark.strip(line).strip() for line in content.replace("\\n", "\n")
             .splitlines() if not line.lstrip().startswith("#"))
    return [line for line in lines if line]


def _bare(content: str, lines: list[str]) -> bool:
    """Whether each line is one word of its own at most, with no heading over them ("- Porto"
    for "I moved to Porto last month"; a list of words under a heading is a list)."""
    headed = any(line.lstrip().startswith("#") for line in content.replace("\\n", "\n")
                 .splitlines())
    return not headed and all(
        len({t for t in _tokens([line]) if not _TIMESTAMP.match(t)}) <= 1 for line in lines)


def _tokens(lines: list[str]) -> list[str]:
    found = (t.strip(".,;:!?()[]{}\"'`*_").lower() for line in lines for t in line.split())
    return [t for t in found if t and t not in phrases.NOTE_PLAIN and re.search(r"\w", t)]


def _echoes(lines: list[str], said: str, tuning: Thresholds) -> bool:
    """Whether the note is the user's message (most of it) copied back, and that message
    holds no fact to keep."""
    note, message = phrases.words(" ".join(lines)), phrases.words(said)
    if not note or not message or len(note) < tuning.junk_echo_share * len(message):
        return False
    joined, whole = " ".join(note), " ".join(message)
    return f" {joined} " in f" {whole} " and not facts(said)


def _line_junk(tokens: list[str], tuning: Thresholds) -> tuple[int, int] | None:
    """(timestamps, repeated words) of a line that is no note: fewer than half of its
    words new (neither a timestamp nor a word the line said before), and a word repeated
    or fewer than two new ones (times beside words of their own are a schedule: "Meetings
    at 09:00, 10:00 and 11:00 on Tuesday"); None for a note."""
    stamps = sum(bool(_TIMESTAMP.match(t)) for t in tokens)
    fresh = len({t for t in tokens if not _TIMESTAMP.match(t)})
    repeats = len(tokens) - stamps - fresh
    if tokens and (fresh >= tuning.junk_new_share * len(tokens)
                   or (not repeats and fresh >= 2)):
        return None
    return stamps, repeats


def junk(content: str, said: str = "", tuning: Thresholds = DEFAULT) -> str | None:
    """What makes ``content`` (a write to a daily log) no note, or None when it is one.
    ``said``: the user's message of the turn ("": none, as in a memory flush). Each line is
    judged alone (a note of many lines may start each with the same label): it is no note
    when it repeats an earlier line, or holds fewer than half new words; the write is
    junk when half its lines or more are."""
    if _JSON.match(content):
        return "JSON data (a tool call's arguments?)"
    lines = _body(content)
    if not lines:
        return "a heading or an empty line with no note under it"
    if said and _echoes(lines, said, tuning):
        return "the user's message copied back"
    seen: set[tuple[str, ...]] = set()
    bad, stamps, repeats = 0, 0, 0
    for line in lines:
        tokens = _tokens([line])
        if tuple(tokens) in seen and tokens:
            bad, repeats = bad + 1, repeats + len(tokens)
            continue
        seen.add(tuple(tokens))
        if (found := _line_junk(tokens, tuning)) is not None:
            bad, stamps, repeats = bad + 1, stamps + found[0], repeats + found[1]
    if bad < tuning.junk_new_share * len(lines):
        return "a bare word with nothing said about it" if _bare(content, lines) else None
    if not stamps and not repeats:
        return "no words"
    return "mostly timestamps" if stamps >= repeats else "the same words over and over"


def written_note(call: ToolCall) -> str | None:
    """What a ``write`` or ``edit`` call adds to a daily log (an edit's new text past the
    old text it keeps), or None when it is no write to a daily log, or an edit that adds
    no word (a full stop put at a line's end)."""
    args = call.arguments
    if call.name not in ("write", "edit") or not is_daily_log(
            posixpath.normpath(str(args.get("path", "")))):
        return None
    if call.name == "write":
        return str(args.get("content") or "")
    new, old = str(args.get("newText") or ""), str(args.get("oldText") or "")
    added = new[len(old):] if old and new.startswith(old) else new
    return added if any(c.isalnum() for c in added) or not old else None


# the name a daily log has in the instructions, written as if it were one (a 0.5B model
# appended "Hallo again!" to memory/YYYY-MM-DD.md)
_PLACEHOLDER = re.compile(r"(?:^|/)(?:YYYY|yyyy)-(?:MM|mm)-(?:DD|dd)\.md$")


def tool_output(messages: list[Message]) -> dict[str, str]:
    """The tool results of a turn that can never be a note, by a name for each: errors,
    and what a file change answered ("edited memory/…"). What a read returned may be one
    ("read notes.txt and keep the admin port")."""
    return {f"the {m.tool_name} result {i}": m.text for i, m in enumerate(messages)
            if m.role == "toolResult" and (m.is_error or m.tool_name in WRITE_TOOLS)}


def unfounded(content: str, shown: str, tuning: Thresholds = DEFAULT) -> str | None:
    """What of a note nothing the model was shown says (``shown``: lower-cased, see
    ``TurnView.shown_text``), or None when it draws on it: a note is unfounded when a
    number, identifier or name of it appears nowhere there and fewer than half its other
    words do ("I live in a city with a population of 500,000. My job is a software
    developer", written by a 1.5B model asked where the user lives, who lives in Leeds)."""
    exact, names = references(content)
    unseen = sorted(ref for ref in exact | names if ref.lower() not in shown)
    if not unseen:
        return None
    words = {stem(w) for w in content_words(content)} - {r.lower() for r in exact | names}
    if words and sum(w in shown for w in words) >= tuning.junk_shown_share * len(words):
        return None
    return f"something the conversation never said ({', '.join(unseen)})"


def founded_summary(summary: str, history: str,
                    tuning: Thresholds = DEFAULT) -> tuple[str, list[str]]:
    """A compaction summary without its lines that claim what the history it replaces
    (``history``: its messages, tool calls and results, their dates, the summary before)
    never said; and those lines. A line is unfounded when it holds a number or identifier
    the history does not (thousands separators aside), or a name it does not and fewer
    than half its other words are there (``unfounded``, the rule for notes). A 1.5B
    model's summary said "The user decided to use Python 3.9 for … tidepool", which nobody
    had said. Headings stay, unless nothing is left under one."""
    flat = history.replace(",", "")
    kept: list[str] = []
    dropped: list[str] = []
    for line in summary.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            kept.append(line)
            continue
        numbers, names = missing(listmark.strip(line), history)  # "4." is no claim
        invented = [n for n in numbers  # "5" is not in "8500" nor in "2.5"; "2.5" is in "v2.5"
                    if not re.search(rf"(?<![\d.]){re.escape(n.replace(',', ''))}(?!\.?\d)",
                                     flat)]
        if invented or (names and unfounded(line, history.lower(), tuning)):
            dropped.append(line.strip())
        else:
            kept.append(line)
    if not dropped:
        return summary, []
    return "\n".join(empty_sections_out(kept, droppable=lambda _: True)).strip(), dropped


def advice(content: str, heard: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether a note is advice for the user rather than something they told: half its
    lines or more ask something of the reader (an imperative: "Remember to take a walk
    daily", saved by a 1.5B model as a note about a user who had said they were tired)
    with fewer than half their words in what the user said (``heard``). "Remember to call
    Ines on Friday", after "remind me to call Ines on Friday", is the user's own."""
    lines = _body(content)
    known = {stem(w) for w in content_words(heard)}
    bad = 0
    for line in lines:
        text = listmark.strip(line)
        if not asks(text):
            continue
        words = {stem(w) for w in content_words(text)}
        if words and sum(w in known for w in words) < tuning.junk_shown_share * len(words):
            bad += 1
    return bool(lines) and bad >= tuning.junk_new_share * len(lines)


def copied(content: str, files: dict[str, str], said: str = "", target: str = "",
           tuning: Thresholds = DEFAULT) -> str | None:
    """The file the lines of a note were copied from, or None: a line is copied when
    ``junk_copy_share`` of its runs of three words are in one of ``files`` (what the model was
    shown, by name; ``target``, the file written, left out) and fewer than half of them in
    the user's message ``said``; a note is when half its lines or more are. A 1.5B model
    wrote IDENTITY.md's template lines, "Name: Priya" put in, to the daily log as a note."""
    lines = _body(content)
    given = {name: set(runs(phrases.words(text), 3)) for name, text in files.items()
             if name != target}
    heard = set(runs(phrases.words(said), 3))
    sources: list[str] = []
    for line in lines:
        own = set(runs(phrases.words(line), 3))
        if not own or len(own & heard) >= len(own) / 2:
            continue
        sources += [name for name, known in given.items()
                    if len(own & known) >= tuning.junk_copy_share * len(own)][:1]
    if not sources or len(sources) < tuning.junk_new_share * len(lines):
        return None
    return max(sources, key=sources.count)


class JunkNotes(Guard):
    name = "junk_notes"

    def refuse(self, call: ToolCall, turn: TurnView) -> Refusal | None:
        target = posixpath.normpath(str(call.arguments.get("path", "")))
        if call.name in WRITE_TOOLS and _PLACEHOLDER.search(target):
            return Refusal(f"not written: {target} is the pattern of a daily log's name, not "
                           f"a file; today's log is {turn.daily_log}.")
        note = written_note(call)
        if note is None:
            return None
        if source := copied(note, tool_output(turn.messages), turn.text, tuning=self.tuning):
            return Refusal(f"not written: these lines are {source.rsplit(' ', 1)[0]}, a "
                           f"tool's output, not something the user told; {NOTE_IS}. Answer "
                           f"the user now if there is nothing to note.", final=True)
        if source := copied(note, turn.files, turn.text, target, self.tuning):
            return Refusal(f"not written: {source} already holds these lines, and a note "
                           f"of them today would date them anew; nothing to write. Answer "
                           f"the user now.", final=True)
        heard = " ".join([turn.text, *(m.text for m in turn.messages if m.role == "user")])
        if advice(note, heard, self.tuning):
            return Refusal("not written: this is advice for the user, not something they "
                           "told you; a note keeps what the user said, decided or asked to "
                           "be kept. Answer the user now.", final=True)
        why = (junk(note, turn.text, self.tuning)
               or unfounded(note, turn.shown_text(), self.tuning))
        if why is None:
            return None
        if turn.refused:  # its one retry is used: no more tries, an answer
            return Refusal(f"not written: this is {why} again, not a note; {NOTE_IS}. "
                           f"Do not write it again: answer the user now.", final=True)
        return Refusal(f"not written: this is {why}, not a note; {NOTE_IS}. Write it "
                       f"again as such a line.")
