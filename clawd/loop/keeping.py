"""Keeping what you asked to be remembered, and your corrections, whatever the model did.

"Also remember: I'm allergic to peanuts." A weak model answers "I remember that Priya is
allergic to peanuts" and writes nothing; asked again, it says it saved the note, and still
writes nothing. Under a profile with ``request_words`` (the weak one), a request to remember
is the runtime's to keep: when the turn ends and no note written in it holds what was asked
(``context.requests.request_kept``), the message's words go to today's log under a heading that says
they are the user's, and a notice says so. A model that wrote the note pays nothing for
this: no request, no second copy; a strong profile's turn is left as the model ended it.
Only private sessions keep requests this way: in a group, anyone's "remember …" would land
in the owner's notes. Corrections, reminders and promoted facts below are kept under every
profile.

A correction replaces at the time it is told ("Miso's vet is now Dr. Xavier Costa, Dr.
Almeida retired."): ``keep_correction`` finds the older note lines that still say the old
value (``context.corrections``: daily logs, saved sessions, MEMORY.md), records each in
MEMORY.md's ``## Replaced`` record with the person's sentence as what replaced it, so that
search, recall, ``memory_get`` and the context's daily logs hand the old line out struck
through with the new value on it, and keeps the sentence in today's log unless a note
written in the turn holds it. The daily logs themselves stay as they were written.

A session without the ``schedule`` tool (a group session, ``automation.enabled`` off)
cannot notify anyone at a later time. A request for a reminder there ("Remind me tomorrow
at 9 to call the landlord") is told so in the turn (``Turn.aside``), and ``keep_reminder``
keeps it in today's log, so the request is not lost, with a notice saying both. A session
with the tool is told to set the reminder with it instead; under a profile with
``reminder_set`` (the weak one: a 1.5B model answered "I will remind you tomorrow at 9"
and set nothing), ``set_reminder`` sets it when the turn did not, from the person's words,
or says that no reminder was set.

A model that may not curate MEMORY.md (its profile does not consolidate: a 1.5B model left
MEMORY.md and USER.md the templates, byte for byte, after three days) still gets the person's
own facts there: when a private session ends, ``promote_facts`` adds the facts the person
told about themselves and their people (``facts.facts``: statements and what they asked to
be remembered; never questions or requests), in their own words and dated, under MEMORY.md's
``## About the user``, those MEMORY.md does not hold yet, and a notice says so.

A request that names a file to read ("Read notes/router.txt and keep the admin port in your
notes") is kept with the lines of the file it is about, when the model read it in the turn
(``requests.lines_used``), and counts as held when the notes written hold those lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from datetime import date
from typing import Any

from clawd.context.access import Access
from clawd.context.corrections import Change, changes_in, replaced
from clawd.context.facts import facts
from clawd.context.flush import FROM_REQUEST, append_flush_notes, notes_written
from clawd.context.references import SHORT_MESSAGE
from clawd.context.requests import (
    lines_used,
    names_file,
    reminder_request,
    request_kept,
    to_keep,
)
from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError
from clawd.core.events import Event, Notice
from clawd.core.messages import Message, ToolCall, answered_calls, new_id
from clawd.guards.profile import Profile
from clawd.loop.runtime import Runtime
from clawd.loop.toolrunner import ToolRunner
from clawd.tools.schedule import adds, for_the_user
from clawd.workspace.files import (
    MEMORY_DIR,
    MEMORY_FILE,
    REPLACED_SECTION,
    daily_log_path,
    replaced_entry,
    replaced_lines,
    without_replaced,
)
from clawd.workspace.interface import WorkspaceFiles

FROM_CORRECTION = "the user's correction"
FROM_REMINDER = "asked for a reminder: clawd cannot notify at a time yet"


def _keeping(runtime: Runtime, failed: str, write: Callable[[], Any]
             ) -> Generator[Event, None, Any]:
    """Run ``write`` (notes the runtime keeps for the person) and return what it returns;
    when it fails, one notice says so (``failed`` and why) and None is returned. After a
    write that kept something, the memory index is told."""
    try:
        kept = write()
    except (ClawdError, OSError) as exc:
        yield Notice(f"{failed}: {exc}")
        return None
    if kept and runtime.memory is not None:
        runtime.memory.mark_dirty()
    return kept


def keep_reminder(message: Message, access: Access, runtime: Runtime
                  ) -> Generator[Event, None, None]:
    """After the turn of a reminder request: the request in today's log (unless the turn's
    request to keep it already put it there), and a notice that says what clawd can do."""
    now = runtime.clock()
    rel = daily_log_path(now.date())

    asked = " ".join(message.text.split())  # as a request to keep it was kept

    def write() -> str:
        if asked not in (runtime.files.read(rel) or ""):
            access.check_flush_write(rel)
            append_flush_notes(runtime.files, f"- {asked}", now, FROM_REMINDER,
                               title="Reminders asked for")
        return rel

    if (yield from _keeping(runtime, "clawd cannot notify you at a set time yet, and the "
                                     "request could not be kept", write)):
        yield Notice(f"clawd cannot notify you at a set time yet: nothing will remind you; "
                     f"the request is kept in {rel}")


def scheduled(turn: list[Message]) -> bool:
    """Whether a ``schedule`` add of the turn's messages succeeded."""
    return any(adds(call) and not result.is_error for call, result in answered_calls(turn))


def set_reminder(message: Message, history: list[Message], runtime: Runtime,
                 tools: ToolRunner, window: int) -> Generator[Event, None, None]:
    """After the turn of a reminder request in a session with the ``schedule`` tool, when
    no ``schedule`` add of the turn succeeded: set it with the session's tool (``tools``;
    ``window``: its model's context window) from the person's own words for the time and
    for what, when those are all the message says of when (``requests.reminder_request``);
    else say that no reminder was set."""
    if scheduled(_turn_of(message, history)):
        return
    asked = reminder_request(message.text, runtime.clock(), runtime.settings.user_timezone)
    if asked is None:
        yield Notice("no reminder was set: the model did not set one, and clawd could not "
                     "tell the time from your message alone; say it again with the time, "
                     "as \"tomorrow at 9\" or \"Friday 18:30\"")
        return
    when, what = asked
    call = ToolCall(new_id(), "schedule", {"action": "add", "at": when, "message": what})
    said, failed, _ = tools.call(call, CancelToken(), window=window)
    if failed:
        yield Notice(f"no reminder was set: the model did not set one, and clawd's try "
                     f"failed: {said.removeprefix('error: ')}")
        return
    yield Notice(f"the model did not set the reminder, so clawd did: "
                 f"{for_the_user(said)} ({what})")


def _turn_of(message: Message, history: list[Message]) -> list[Message]:
    at = next((i for i, m in enumerate(history) if m.id == message.id), None)
    return history[at:] if at is not None else []


def keep_request(message: Message, history: list[Message], access: Access,
                 runtime: Runtime, profile: Profile) -> Generator[Event, None, None]:
    """After the turn of ``message`` (its messages at the end of ``history``): keep what it
    asked to be remembered, unless a note written in the turn holds it (only when the
    model's ``profile`` keeps requests: ``request_words``)."""
    wanted = to_keep(message.text) if profile.keeps_requests else ""
    if not wanted:
        return
    turn = _turn_of(message, history)
    used = read_for(wanted, turn)
    # a file's ``admin_port = 8443`` is held by a note that says "admin port: 8443"
    notes = notes_written(turn)
    if used:
        lines = " ".join(line for _, line in used).replace("_", " ")
        done = request_kept(lines, [note.replace("_", " ") for note in notes])
    else:
        done = request_kept(wanted, notes)
    if done:  # a message no longer in the history has no notes of its turn: not done
        return
    wanted = "\n".join([wanted, *(f"  - from {path}: {line}" for path, line in used)])
    now = runtime.clock()

    def write() -> str:
        access.check_flush_write(daily_log_path(now.date()))
        return append_flush_notes(runtime.files, f"- {wanted}", now, FROM_REQUEST,
                                  title="The user's words")

    if rel := (yield from _keeping(runtime, "you asked to remember this, and it could not "
                                            "be saved", write)):
        yield Notice(f"your words were kept in {rel}, as you asked: no note written in this "
                     f"turn holds them")


def read_for(request: str, turn: list[Message]) -> list[tuple[str, str]]:
    """The lines that ``request`` is about of the files it names that the model read in
    ``turn`` (successful ``read`` calls), each with its file's path."""
    reply = next((m.text for m in reversed(turn) if m.role == "assistant" and m.text), "")
    used: list[tuple[str, str]] = []
    for call, result in answered_calls(turn):
        path = str(call.arguments.get("path") or "")
        if call.name == "read" and not result.is_error and names_file(request, path):
            used += [(path, line) for line in lines_used(request, reply, path, result.text)]
    return list(dict.fromkeys(used))


def note_places(files: WorkspaceFiles) -> list[tuple[str, int, str]]:
    """Every line of the notes a correction may replace, as (path, line number, text):
    MEMORY.md outside its ``## Replaced`` record, and each note under ``memory/``."""
    places: list[tuple[str, int, str]] = []
    for rel in [MEMORY_FILE, *files.listing(MEMORY_DIR)]:
        if not rel.endswith(".md"):
            continue
        try:
            text = files.read(rel) or ""
        except (ClawdError, OSError):
            continue
        if rel == MEMORY_FILE:
            text = without_replaced(text)
        places += [(rel, n, line) for n, line in enumerate(text.split("\n"), 1)
                   if line.strip() and not line.lstrip().startswith("#")]
    return places


def record_replaced(files: WorkspaceFiles, found: Change, day: date,
                    places: list[tuple[str, int, str]]) -> int:
    """Add the lines of ``places`` that ``found`` replaces (and that are not recorded yet)
    to MEMORY.md's ``## Replaced`` record; how many were added."""
    memory = files.read(MEMORY_FILE) or ""
    recorded = {(entry.path, entry.start) for entry in replaced_lines(memory)}
    chosen = [(path, n, line) for path, n, line in places
              if (path, n) not in recorded and replaced(found, line)]
    if not chosen:
        return 0
    entries = [replaced_entry(f"{line.strip().lstrip('-*+ ').strip()} ({path}#L{n})", day,
                              found.sentence) for path, n, line in chosen]
    # MEMORY.md is curated and goes into the context as it is: its own old lines are
    # replaced in place (the first by the correction, any other emptied), as consolidation
    # replaces them; the numbers of its other lines stay
    rows = memory.split("\n")
    own = [n for path, n, _ in chosen if path == MEMORY_FILE]
    for i, n in enumerate(own):
        mark = re.match(r"\s*(?:[-*+]\s+)?", rows[n - 1]).group(0)  # type: ignore[union-attr]
        rows[n - 1] = f"{mark or '- '}{found.sentence} ({day.isoformat()})" if i == 0 else ""
    memory = "\n".join(rows)
    if own:
        files.write(MEMORY_FILE, memory)
    head = "" if memory.endswith("\n") or not memory else "\n"
    if f"## {REPLACED_SECTION}" not in memory:
        head += ("\n" if memory else "") + f"## {REPLACED_SECTION}\n\n"
    files.append(MEMORY_FILE, head + "\n".join(entries) + "\n")
    return len(entries)


def keep_correction(message: Message, history: list[Message], access: Access,
                    runtime: Runtime) -> Generator[Event, None, None]:
    """After the turn of ``message``: each correction it tells replaces the older note
    lines that say otherwise, and is kept in today's log unless a note of the turn holds
    it."""
    found = changes_in(message.text)
    if not found:
        return
    now = runtime.clock()
    notes = notes_written(_turn_of(message, history))

    def write() -> tuple[int, str | None] | None:
        access.check_flush_write(daily_log_path(now.date()))
        access.check_flush_write(MEMORY_FILE)
        places = note_places(runtime.files)
        count = sum(record_replaced(runtime.files, change, now.date(), places)
                    for change in found)
        unsaved = [change.sentence for change in found if not request_kept(change.sentence, notes)]
        rel = append_flush_notes(runtime.files, "\n".join(f"- {s}" for s in unsaved), now,
                                 FROM_CORRECTION, title="Corrections") if unsaved else None
        return (count, rel) if count or rel else None

    kept = yield from _keeping(runtime, "your correction could not be recorded in the notes",
                               write)
    if not kept:
        return
    count, rel = kept
    said = [f"kept in {rel}"] if rel else []
    if count:
        said.append(f"{count} older note line{'s' * (count != 1)} that said otherwise now "
                    f"show{'s' * (count == 1)} it as replaced ({MEMORY_FILE}, "
                    f"## {REPLACED_SECTION})")
    if said:
        yield Notice("your correction: " + "; ".join(said))


ABOUT_USER = "About the user"
PROMOTED_CHARS = 800  # of facts one session adds to MEMORY.md at most


def promoted(memory: str, messages: list[Message], day: date) -> list[str]:
    """The ``- `` lines to add to MEMORY.md for the facts the person told in ``messages``
    (short messages only: a long one is pasted material) that ``memory`` does not hold and
    no later message of theirs corrected, in the order told, each dated, within
    ``PROMOTED_CHARS``."""
    held_lines = [line for line in without_replaced(memory).splitlines() if line.strip()]
    told = [m for m in messages if m.role == "user" and not m.flush
            and len(m.text) <= SHORT_MESSAGE]
    out: list[str] = []
    used = 0
    for i, m in enumerate(told):
        later = [change for after in told[i + 1:] for change in changes_in(after.text)]
        for fact in facts(m.text):
            line = f"- {fact} ({day.isoformat()})"
            if (request_kept(fact, held_lines) or used + len(line) > PROMOTED_CHARS
                    or any(replaced(change, fact) for change in later)):
                continue  # kept already, no room, or corrected later in the session
            out.append(line)
            held_lines.append(line)
            used += len(line)
    return out


def with_lines_under(text: str, heading: str, lines: list[str]) -> str:
    """``text`` (MEMORY.md) with ``lines`` at the end of its ``## heading`` section, the
    section made at the end (before ``## Replaced``) when there is none."""
    rows = text.split("\n") if text else []
    start = next((i for i, row in enumerate(rows) if row.strip() == f"## {heading}"), None)
    if start is None:
        at = next((i for i, row in enumerate(rows)
                   if row.strip() == f"## {REPLACED_SECTION}"), len(rows))
        block = [f"## {heading}", "", *lines, ""]
        if at and rows[at - 1].strip():
            block.insert(0, "")
        return "\n".join([*rows[:at], *block, *rows[at:]]).rstrip("\n") + "\n"
    end = next((i for i in range(start + 1, len(rows)) if rows[i].startswith("#")), len(rows))
    while end > start + 1 and not rows[end - 1].strip():
        end -= 1
    return "\n".join([*rows[:end], *lines, *rows[end:]]).rstrip("\n") + "\n"


def promote_facts(messages: list[Message], access: Access, runtime: Runtime
                  ) -> Generator[Event, None, None]:
    """When a private session ends under a model that does not curate MEMORY.md: the
    person's facts MEMORY.md does not hold yet, added under ``## About the user``."""
    now = runtime.clock()

    def write() -> list[str]:
        access.check_flush_write(MEMORY_FILE)
        memory = runtime.files.read(MEMORY_FILE) or ""
        lines = promoted(memory, messages, now.date())
        if lines:
            runtime.files.write(MEMORY_FILE, with_lines_under(memory, ABOUT_USER, lines))
        return lines

    lines = yield from _keeping(runtime, f"the facts you told could not be added to "
                                         f"{MEMORY_FILE}", write)
    if lines:
        yield Notice(f"{len(lines)} fact{'s' * (len(lines) != 1)} you told "
                     f"{'were' if len(lines) != 1 else 'was'} added to {MEMORY_FILE} "
                     f"(## {ABOUT_USER}), in your words")
