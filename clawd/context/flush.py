"""When to run the silent memory flush, and the silent-reply rule (pure functions).

The flush is one agentic turn, before compaction, that lets the model write durable notes
to ``memory/`` while the details are still in context. It runs at most once per compaction
cycle: when the context (with the incoming message counted) crosses the flush point and
``memoryFlushCompactionCount`` differs from ``compactionCount``. The ``NO_REPLY`` rule is
told to the model in the flush turn only (``flush_system``): in everyday turns it makes weak
models answer nothing. ``NO_REPLY`` (alone or leading) marks a reply that is never shown;
``SilentFilter`` holds back streamed text until it is clear whether the reply is silent. A
flush that writes no file but answers in words keeps those words as notes
(``append_flush_notes``), so a model that cannot drive tools still saves what it was asked to.
A flush that wrote nothing and answered only "Done.", or ``NO_REPLY`` when the user said
something after the last note written in the conversation, is asked once more for the
notes themselves (``should_ask_again``); of that second answer only the list lines are
kept (``listed_notes``). When the second answer lists nothing either, clawd saves the facts the
user told in their own words, those no note holds yet (``unsaved_words``): statements, never
requests, questions or small talk (``facts``), a correction with the value it replaces.
"""

from __future__ import annotations

import json
import posixpath
import re
from datetime import date, datetime

from clawd.config import MemoryFlush
from clawd.context.access import WRITE_TOOLS
from clawd.context.facts import as_note, facts
from clawd.context.references import SHORT_MESSAGE, missing, references
from clawd.context.replytext import recall_start, unfenced
from clawd.context.requests import content_words, request_kept, stem
from clawd.core import listmark, phrases
from clawd.core.messages import Message, ToolCall
from clawd.core.phrases import answers
from clawd.core.templates import render
from clawd.core.textcut import shorten
from clawd.memory.superseded import unmark
from clawd.sessions.entry import SessionEntry
from clawd.workspace.files import (
    MEMORY_DIR,
    MEMORY_FILE,
    append_to_day,
    daily_log_path,
    is_private_memory,
    memory_files,
    runtime_heading,
)
from clawd.workspace.interface import WorkspaceFiles

SILENT = "NO_REPLY"
FROM_REPLY = "written from the model's reply"
FROM_USER = "the user's own words: the model saved no notes"
FROM_REQUEST = "asked to be remembered; the model wrote no note"
USERS_WORDS_CHARS = 800
FACT_CHARS = 300  # one fact kept at most this long


def flush_due(entry: SessionEntry, used_tokens: int, flush_at: int,
              cfg: MemoryFlush) -> bool:
    """True when the flush point is crossed and this compaction cycle has not flushed."""
    if not cfg.enabled or flush_at <= 0 or used_tokens < flush_at:
        return False
    return entry.get("memoryFlushCompactionCount") != entry.get("compactionCount", 0)


def flush_prompt(cfg: MemoryFlush, today: date) -> str:
    """The flush user message, with ``YYYY-MM-DD`` replaced by today's local date."""
    return cfg.prompt.replace("YYYY-MM-DD", today.isoformat())


def flush_system(cfg: MemoryFlush, today: date) -> str:
    """What the flush turn adds to the system prompt: ``systemPrompt``, how to append, and
    the ``NO_REPLY`` rule."""
    return render("flush_system.md.j2", system_prompt=cfg.system_prompt,
                  daily_log=daily_log_path(today)).strip()


def is_blank(text: str) -> bool:
    """Whether a reply shows the user nothing: empty, whitespace, or silent."""
    return not text.strip() or is_silent(text)


ACK_MAX_WORDS = 4  # a bare acknowledgement is this short ("OK, noted, thanks!")


def is_acknowledgement(text: str) -> bool:
    """Whether a reply is a bare acknowledgement with no content of its own."""
    words = phrases.words(text)
    return (bool(words) and len(words) <= ACK_MAX_WORDS
            and all(w in answers.ACK_WORDS for w in words))


def _note_calls(messages: list[Message]) -> list[tuple[int, ToolCall]]:
    """The ``write`` and ``edit`` calls of a memory file (MEMORY.md or under ``memory/``)
    that did not fail, each with the place of its assistant message."""
    failed = {m.tool_call_id for m in messages if m.role == "toolResult" and m.is_error}
    return [(i, call) for i, m in enumerate(messages) if m.role == "assistant"
            for call in m.tool_calls
            if call.name in WRITE_TOOLS and call.id not in failed
            and is_private_memory(posixpath.normpath(str(call.arguments.get("path", ""))))]


def _notes(messages: list[Message]) -> list[int]:
    """The places of the assistant messages that wrote a memory file."""
    return sorted({i for i, _ in _note_calls(messages)})


def notes_written(messages: list[Message]) -> list[str]:
    """What the successful writes and edits of memory files in ``messages`` put there."""
    return [str(call.arguments.get("content") or call.arguments.get("newText") or "")
            for _, call in _note_calls(messages)]


def noted(messages: list[Message]) -> bool:
    """Whether the conversation wrote a memory note."""
    return bool(_notes(messages))


def since_last_note(messages: list[Message]) -> list[Message]:
    """The messages after the conversation's last memory note (all of them when none)."""
    notes = _notes(messages)
    return messages[notes[-1] + 1 if notes else 0:]


def told_since_last_note(messages: list[Message]) -> bool:
    """Whether the user told a fact (``facts.facts``: not a question, chatter or a request
    for work such as "Write a poem about Lisbon") after the conversation's last memory note
    (or in the whole conversation when there is none)."""
    return any(m.role == "user" and not m.flush and facts(m.text)
               for m in since_last_note(messages))


def should_ask_again(answer: str, wrote: bool, conversation: list[Message]) -> bool:
    """Whether a flush answer that called no tool is asked once more for the notes: a bare
    acknowledgement with nothing written, or a silent (or empty) answer when the user said
    a fact after the last note written in the conversation (a weak model answers
    ``NO_REPLY`` to every flush; a model whose notes are up to date is not asked, and
    neither is one that was only asked questions or for work: measured on labelled flushes
    of a 1.5B model, ``scripts/bench_guards.py``)."""
    if wrote:
        return False
    if is_acknowledgement(answer):
        return True
    return is_blank(answer) and told_since_last_note(conversation)


def flush_retry_prompt(answer: str, today: date, noted_before: bool = False,
                       summarised: bool = False) -> str:
    """The flush turn's second request (``noted_before``: the conversation in view wrote a
    note; ``summarised``: earlier messages were compacted, so notes may have been written
    before them and it must not say nothing was saved). It offers no way out: a weak model
    takes any "reply X if there is nothing" it is offered, while a capable one that has
    nothing to keep says so in words, which ``listed_notes`` drops."""
    return render("flush_retry.md.j2", answer=answer.strip(),
                  acknowledged=is_acknowledgement(answer), noted=noted_before,
                  summarised=summarised,
                  daily_log=daily_log_path(today)).strip()


_MARK = rf"\s*{listmark.MARK}\s+"  # a list item's indent and mark
LIST_LINE = re.compile("^" + _MARK + r"\S")


def says_nothing(line: str) -> bool:
    """Whether a list line only says there is nothing to note (the silent token as an item,
    ``- No_reply``, too: a 1.5B model ended its list of notes with it)."""
    words = set(re.findall(r"[\w']+", line.lower().replace("_", " ")))
    return bool(phrases.NONE_WORDS & words) and words <= answers.NOTHING_WORDS


def listed_notes(answer: str) -> str:
    """The list lines of an answer (``- ``, ``* ``, ``1. ``), the notes asked for, without
    those that say there is nothing to note."""
    return "\n".join(line.rstrip() for line in answer.splitlines()
                     if LIST_LINE.match(line) and not says_nothing(line))


def without_repeats(text: str) -> str:
    """``text`` without the lines that repeat an earlier one: a small model caught in a loop
    lists the same notes until its output limit, and they would push the real ones out of
    the part of the daily log that new sessions see."""
    seen: set[str] = set()
    kept = []
    for line in text.splitlines():
        key = line.strip()
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def _saved(fact: str, notes: list[str]) -> bool:
    """Whether the lines of ``notes`` hold a fact. A fact with numbers, identifiers or names
    is held by a line with every one of them (the old and the new value of a correction
    too) and, when the fact says more than those, a word of the rest, in any form: "- Porto"
    does not hold "I moved to Porto last month", "- Moved to Porto in October" does, and
    "- The user lives in Leeds." holds "I live in Leeds and work nights". A fact without
    them is held by a line with most of its words."""
    exact, names = references(fact)
    if not (exact or names):
        return any(request_kept(fact, [line]) for line in notes)
    said = content_words(fact) - {ref.lower() for ref in exact | names}
    return any(not any(missing(fact, line))
               and (not said or any(stem(word) in line.lower() for word in said))
               for line in notes)


def _line_key(line: str) -> str:
    """A line's words, as compared with the notes' lines: its list mark, emphasis, case and
    punctuation left out."""
    return " ".join(re.findall(r"[^\W_]+(?:'[^\W_]+)?", listmark.strip(line).lower()))


def note_lines(files: WorkspaceFiles) -> set[str]:
    """The lines every note holds (MEMORY.md and the files in ``memory/``), as
    ``_line_key`` makes them; a note that cannot be read holds none."""
    keys: set[str] = set()
    for rel in [MEMORY_FILE, *files.listing(MEMORY_DIR)]:
        if not rel.endswith(".md"):
            continue
        try:
            text = files.read(rel) or ""
        except OSError:
            continue
        keys.update(_line_key(line) for line in text.splitlines())
    keys.discard("")
    return keys


# "- I remember Sam is vegetarian.": the model speaking of the fact, not the fact
_SELF_TALK = re.compile(rf"^({_MARK}){answers.SELF_TALK}\s+(\w)", re.IGNORECASE | re.MULTILINE)


def plain_notes(text: str) -> str:
    """``text`` with list lines that start with the model speaking of the fact ("- I
    remember Sam is vegetarian.") made the fact itself ("- Sam is vegetarian."): the 1.5B
    model began every line of a flush answer so."""
    return _SELF_TALK.sub(lambda m: m.group(1) + m.group(2).upper(), text)


def not_yet_noted(text: str, kept: set[str]) -> str:
    """``text`` without the lines a note already holds word for word (``kept``, from
    ``note_lines``) and without lines struck through as replaced: a model answering the
    flush in words copies lines from the notes it was shown (the recall block, MEMORY.md,
    an older log), and saved again under today's date an old fact would read as news, one
    that a correction since had replaced among them."""
    return "\n".join(line for line in text.splitlines()
                     if unmark(line) == line and _line_key(line) not in kept)


def unsaved_words(files: WorkspaceFiles, conversation: list[Message], today: date,
                  pending: str = "") -> str:
    """The facts the user told (``facts.facts``: statements about them, their people,
    plans, preferences and corrections; never requests, questions or small talk), in
    messages since the conversation's last note and short enough to be said rather than
    pasted, that no note holds yet (MEMORY.md, today's and yesterday's logs: ``_saved``),
    as ``- `` lines within ``USERS_WORDS_CHARS``, in conversation order. A correction
    names the value it replaces (``facts.as_note``). ``pending``: notes about to be
    written, counted as saved."""
    saved = pending.splitlines()  # the notes' lines
    for rel in memory_files(today):
        saved += (files.read(rel) or "").splitlines()
    kept: list[str] = []
    seen: set[str] = set()
    used = 0
    for m in since_last_note(conversation):
        if m.role != "user" or m.flush or len(m.text) > SHORT_MESSAGE:
            continue
        for fact in facts(m.text):
            note = as_note(shorten(fact, FACT_CHARS))
            if note in seen or _saved(fact, saved):
                continue
            seen.add(note)
            if used + len(note) + 3 <= USERS_WORDS_CHARS:
                kept.append(f"- {note}")
                used += len(note) + 3
    return "\n".join(kept)


def append_flush_notes(files: WorkspaceFiles, text: str, now: datetime,
                       source: str = FROM_REPLY, title: str = "Flush notes") -> str:
    """Append a flush turn's notes, once per distinct line, to today's daily log under a
    heading that says where they come from (``title`` and ``source``); returns the log's
    workspace-relative path."""
    return append_to_day(files, now.date(), f"{runtime_heading(title, now, source)}\n\n"
                         f"{without_repeats(text).strip()}\n", section=True)


def _unwrapped(text: str) -> str:
    """The text without what small models put before a bare token: blanks, a code fence,
    quotes, emphasis (a coder model answers "```\nNO_REPLY")."""
    return text.lstrip(" \t\r\n`'\"*")


_CALL_OPEN = "<tool_call>"  # Qwen's chat template wraps a call in it


def _json_start(probe: str) -> bool:
    """Whether unwrapped streamed text may be the start of a JSON object (``{``, or a
    fence's ``json`` tag or a ``<tool_call>`` tag before it)."""
    if _CALL_OPEN.startswith(probe):
        return True
    body = probe.removeprefix(_CALL_OPEN).lstrip().removeprefix("json").lstrip()
    return "json".startswith(probe) or body == "" or body.startswith("{")


def _json_value(text: str) -> str | None:
    """The value of a reply made of one JSON object with one string value (a coder model
    answers ``{"response": "NO_REPLY"}``), else None."""
    body = unfenced(text)
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict) and len(value) == 1:
        inner = next(iter(value.values()))
        return inner if isinstance(inner, str) else None
    return None


def is_silent(text: str) -> bool:
    """Whether a reply is the silent token (alone, or leading the reply; a code fence,
    quotes or a one-field JSON object around it do not count)."""
    return _unwrapped(_json_value(text) or text).startswith(SILENT)


class SilentFilter:
    """Passes streamed text through, except a reply that starts with ``NO_REPLY``; text
    without a letter or digit yet is held back until some comes. Two holds are a weak
    model's guards, switched on by its profile: ``calls_as_text`` (``text_calls``) holds a
    reply that starts as a JSON object until the stream ends (a tool call written as text,
    or ``{"response": "NO_REPLY"}``); ``echoes`` (``echo``) holds one that starts as the
    recalled-notes block until the end, and one that starts as the answer before
    (``previous``) until it differs from it. A strong model's JSON answer, or one that
    begins as the last one did, streams from its first word."""

    def __init__(self, previous: str = "", *, calls_as_text: bool = True,
                 echoes: bool = True) -> None:
        self._held = ""
        self._decided: bool | None = None  # True: silent; False: show
        self._calls_as_text, self._echoes = calls_as_text, echoes
        # the answer before, unwrapped as the probe is: a reply repeating it is held
        self._previous = _unwrapped(previous).strip() if echoes else ""

    def feed(self, delta: str) -> str:
        """The part of ``delta`` that may be shown now."""
        if self._decided is False:
            return delta
        if self._decided is True:
            return ""
        self._held += delta
        probe = _unwrapped(self._held)
        if probe.startswith(SILENT):
            self._decided = True
            return ""
        if (SILENT.startswith(probe) or not any(c.isalnum() for c in probe)
                or (self._calls_as_text and _json_start(probe))
                or (self._echoes and (recall_start(probe)
                                      or self._previous.startswith(probe.rstrip())))):
            # a possible prefix of NO_REPLY, nothing to read yet, a JSON object (maybe
            # ``{"response": "NO_REPLY"}``, maybe a tool call's arguments) or the recalled
            # notes copied (``replytext.dumps_notes``), or the answer before once more
            # (``replytext.repeats_answer``): held to the end
            return ""
        self._decided = False
        released, self._held = self._held, ""
        return released

    @property
    def held(self) -> str:
        """The text held back until the filter decides (empty once it has)."""
        return self._held if self._decided is None else ""

    def finish(self) -> str:
        """Whatever is still held back once the stream has ended."""
        if self._decided is None and not is_blank(self._held):
            released, self._held = self._held, ""
            return released
        return ""
