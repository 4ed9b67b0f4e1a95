"""Notes that are notes: under the weak profile, a daily-log write that is mostly timestamps,
repeats itself or copies a request back is refused with what a note should be, once more
on a second try, and the turn still ends with an answer; the strong profile never refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawd.core.events import Flushed, ToolFinished
from clawd.core.messages import Message
from clawd.guards.base import Guard, Guards, TurnView
from clawd.guards.junk_notes import NOTE_IS, JunkNotes, copied, junk, unfounded, written_note
from clawd.guards.profile import make_profile
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime
from loopmodel import filler, is_flush, talk_until_flush

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")
ROWS = [json.loads(line) for line in
        (Path(__file__).parents[1] / "data" / "daily_notes.jsonl").read_text().splitlines()]
TERN = "2026-11-25 00:00:00 2026-11-25 00:00:00 tern hostname tern Debian 12"
TOLD = "The NAS is called tern and runs Debian 12."


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['label']}-{i}" for i, r in enumerate(ROWS)])
def test_the_labelled_writes_are_told_apart(row):
    assert (junk(row["content"], row["user"]) is not None) is (row["label"] == "junk")


def test_the_labelled_set_holds_both_kinds():
    labels = [r["label"] for r in ROWS]
    assert labels.count("junk") >= 10 and labels.count("note") >= 10


@pytest.mark.parametrize("content, said, why", [
    (TERN, TOLD, "mostly timestamps"),
    ("2026-11-25 00:00:00", "", "mostly timestamps"),
    ("- tern tern tern tern", "", "the same words over and over"),
    ("- Suggest a 3-day itinerary for Kyoto.", "Suggest a 3-day itinerary for Kyoto.",
     "the user's message copied back"),
    ("# 2026-11-25\n", "", "a heading or an empty line with no note under it"),
    # seen with Qwen2.5-Coder-1.5B: the fact gone, its name kept
    ("- Porto", "Hi! I moved to Porto last month.", "a bare word with nothing said about it"),
    ("2026-11-26 Porto\n- heron", "", "a bare word with nothing said about it"),
    # seen with Qwen2.5-Coder-1.5B: a read's arguments and result, written as the note
    ('{"from": 1, "lines": 200, "path": "identity.md", "text": "Name: Priya"}', "",
     "JSON data (a tool call's arguments?)"),
    ('```json\n[{"path": "memory/2026-11-22.md"', "", "JSON data (a tool call's arguments?)"),
])
def test_junk_says_what_it_is(content, said, why):
    assert junk(content, said) == why


@pytest.mark.parametrize("content, said", [
    ("2026-11-25 Lisbon 2400 euros", "My budget for the Lisbon trip is 2400 euros."),
    ("I'm allergic to peanuts.", "I'm allergic to peanuts."),  # a statement written back
    ("- Ines: arrives May 14\n- Ines: vegan\n- Ines: nurse", ""),  # one label per line
    ('- The status API answers {"ok": true} when the NAS is up.', ""),  # JSON in a note
    ("- Meetings at 09:00, 10:00 and 11:00 on Tuesday", ""),  # a schedule
    ("- note 1: FACT-000\n- note 1: FACT-001\n- note 1: FACT-002\n- note 1: FACT-003", ""),
    ("## Shopping\n- milk\n- eggs", "Add milk and eggs to the shopping list."),  # a list
    ("- Lisbon 2400", ""),  # two words of its own say something
])
def test_a_terse_or_labelled_note_is_a_note(content, said):
    assert junk(content, said) is None


def test_only_writes_to_a_daily_log_are_judged():
    assert written_note(tool("write", path="./memory/2026-11-22.md", content="x")) == "x"
    assert written_note(tool("write", path="MEMORY.md", content=TERN)) is None
    assert written_note(tool("write", path="notes.md", content=TERN)) is None
    assert written_note(tool("read", path=DAILY)) is None
    edit = tool("edit", path=DAILY, oldText="- a", newText="- a\n2026-11-25 00:00:00")
    assert written_note(edit) == "\n2026-11-25 00:00:00"


def test_a_guard_refuses_nothing_by_default():
    message = Message.assistant("", [tool("write", path=DAILY, content=TERN)])
    assert Guard().refuse(message.tool_calls[0], TurnView(text="")) is None
    assert Guards([Guard()]).refuse(message, TurnView(text="")) == {}
    refused = Guards([JunkNotes()]).refuse(message, TurnView(text=TOLD))
    call = message.tool_calls[0]
    assert list(refused) == [call.id] and not refused[call.id].final
    assert Guards([JunkNotes()]).refuse(message, TurnView(text=TOLD, refused=1))[call.id].final


def session_with(tmp_path, provider, profile):
    runtime = make_runtime(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    return runtime, Session.open(runtime, KEY)


def junk_write(content=TERN):
    return Reply("", [tool("write", path=DAILY, content=content, append=True)])


def test_a_junk_note_is_refused_and_the_model_writes_again(tmp_path):
    provider = ScriptedProvider([
        junk_write(),
        Reply("", [tool("write", path=DAILY, content="- NAS: tern, Debian 12", append=True)]),
        "Noted: tern runs Debian 12."])
    runtime, session = session_with(tmp_path, provider, "weak")
    events = list(session.run_turn(TOLD))
    results = [e for e in events if isinstance(e, ToolFinished)]
    assert [r.is_error for r in results] == [True, False]
    assert results[0].text.startswith("not written: this is mostly timestamps, not a note; "
                                      "a note is one line")
    assert NOTE_IS in results[0].text and "Write it again" in results[0].text
    assert provider.requests[1].tool_choice == "auto"  # the one retry
    log = runtime.files.read(DAILY)
    assert "- NAS: tern, Debian 12" in log and "00:00:00" not in log
    assert events[-1].text == "Noted: tern runs Debian 12."
    provider.assert_done()


def test_a_second_junk_note_is_refused_too_and_the_turn_ends_with_an_answer(tmp_path):
    provider = ScriptedProvider([junk_write(), junk_write("- tern tern tern tern Debian"),
                                 "I kept nothing for now."])
    runtime, session = session_with(tmp_path, provider, "weak")
    events = list(session.run_turn(TOLD))
    results = [e for e in events if isinstance(e, ToolFinished)]
    assert [r.is_error for r in results] == [True, True]
    assert "Do not write it again: answer the user now." in results[1].text
    assert provider.requests[2].tool_choice == "none"  # no third try: an answer
    assert events[-1].text == "I kept nothing for now." and not events[-1].failed
    assert runtime.files.stat(DAILY) is None
    provider.assert_done()


MADE_UP = ("I live in a city with a population of 500,000. My job is a software developer "
           "at a tech company.")


@pytest.mark.parametrize("content, shown, unfounded_", [
    (MADE_UP, "where do i live and what is my job? - priya lives in leeds", True),
    # a number from the notes shown (MEMORY.md, recall), in other words
    ("Gareth has a new phone number: 07700 900871.",
     "what is the plumber's phone number? - gareth's number changed to 07700 900871", False),
    ("- Mira's play: 13 December, 6pm", "actually the play moved to 13 december, same time. "
     "(earlier: mira's school play is on 12 december at 6pm)", False),
    # a note without numbers or names is left to the other rules
    ("- Prefers window seats on long flights.", "hello", False),
    # an unseen name among words the conversation did say: a summary, not made up
    ("- Sam (partner) is vegetarian; book restaurants with vegetarian menus.",
     "my partner is vegetarian, so restaurants need vegetarian menus when you book", False),
])
def test_a_note_that_says_what_nothing_said_is_unfounded(content, shown, unfounded_):
    assert (unfounded(content, shown) is not None) is unfounded_


def test_a_made_up_note_is_refused_and_the_turn_answers(tmp_path):
    """Asked "Where do I live and what is my job?" with "Priya lives in Leeds" recalled, the
    1.5B model appended a made-up city and job to the daily log, and answered with them."""
    provider = ScriptedProvider([junk_write(MADE_UP), "You live in Leeds and work as a nurse."])
    runtime, session = session_with(tmp_path, provider, "weak")
    runtime.files.write("USER.md", "- Priya lives in Leeds; night-shift nurse.\n")
    events = list(session.run_turn("Where do I live and what is my job?"))
    results = [e for e in events if isinstance(e, ToolFinished)]
    assert [r.is_error for r in results] == [True]
    assert results[0].text.startswith("not written: this is something the conversation "
                                      "never said (500,000), not a note")
    assert runtime.files.stat(DAILY) is None
    assert events[-1].text == "You live in Leeds and work as a nurse."
    provider.assert_done()


def test_the_strong_profile_never_refuses_a_note(tmp_path):
    provider = ScriptedProvider([junk_write(), "Saved."])
    runtime, session = session_with(tmp_path, provider, "strong")
    events = list(session.run_turn(TOLD))
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False]
    assert TERN in runtime.files.read(DAILY)
    provider.assert_done()


def test_the_guard_can_be_switched_off_for_a_weak_model():
    assert "junk_notes" not in make_profile("weak", {"junk_notes": False}).guards
    assert "junk_notes" in make_profile("weak").guards


def test_a_flushs_junk_note_is_refused_and_its_second_try_written(tmp_path):
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    provider = ScriptedProvider()
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    provider.add("Sure.")
    list(session.run_turn(TOLD))
    talk_until_flush(session, provider, say=lambda i: f"Here is part {i}: {filler(200, i)}")
    provider.add(junk_write(), junk_write("- NAS: tern, Debian 12"), "NO_REPLY", "Fine.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    flush = [r for r in provider.requests if is_flush(r)]
    refusal = flush[1].messages[-1]
    assert refusal.role == "toolResult" and refusal.is_error
    assert refusal.text.startswith("not written: this is mostly timestamps, not a note")
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    log = runtime.files.read(DAILY)
    assert "- NAS: tern, Debian 12" in log and "00:00:00" not in log
    provider.assert_done()


def test_a_note_may_draw_on_everything_the_model_was_shown():
    view = TurnView(text="What is the plumber's number?", instructions="Today is 2026-11-27.",
                    background="MEMORY.md: Gareth Lyle, 07700 900871\n"
                               "Summary: Noor lives at 22 Birch Lane",
                    messages=[Message.assistant("", [call := tool("memory_get",
                                                                  path="memory/x.md")]),
                              Message.tool_result(call, "- The code is 5826.")])
    shown = view.shown_text()
    for note in ("- Gareth: 07700 900871", "- Noor lives at 22 Birch Lane", "- Code 5826",
                 "- 2026-11-27: asked for the plumber's number (memory/x.md)"):
        assert unfounded(note, shown) is None, note
    assert unfounded("- The plumber Ivo Kranz charges 90 pounds an hour, phone 07700 111222",
                     shown) is not None
    # a date written another way beside words that were said is left alone
    assert unfounded("- Gareth Lyle, the plumber: number 07700 900871 since 2026-12-13",
                     shown) is None


IDENTITY = (Path(__file__).parents[2] / "clawd" / "workspace_template" / "IDENTITY.md"
            ).read_text()
IDENTITY_COPY = ("Name: Priya\nNature: a chat assistant in the terminal, with a workspace of "
                 "Markdown files as its memory\nVibe: calm and precise, dry humour, upbeat — "
                 "whatever fits\nSignature emoji: 😊")
OLD_LOG = "memory/2026-03-02.md"


@pytest.mark.parametrize("content, said, source", [
    # IDENTITY.md's template lines, a name put in, written to the daily log (a 1.5B model)
    (IDENTITY_COPY, "Hi! I'm Priya. I live in Leeds and I work night shifts as a nurse.",
     "IDENTITY.md"),
    # an old log's line written again while answering a question: a stale fact re-dated
    ("- My line manager is Hannah; we have a one-to-one on Fridays.", "Who is my line manager?",
     OLD_LOG),
    ("## Facts\n- Gareth Lyle, plumber, 07700 900871.\n- Asked for the plumber's number.",
     "What is the plumber's phone number?", "MEMORY.md"),
    # the user says it again: the user's words, a note
    ("- My line manager is Hannah; we have a one-to-one on Fridays.",
     "Remember: my line manager is Hannah; we have a one-to-one on Fridays.", None),
    # new words beside a copied line: half new, a note
    ("- Hannah moved to Berlin.\n- Tobias is my line manager from Monday on.\n"
     "- My line manager is Hannah; we have a one-to-one on Fridays.", "news!", None),
    # short lines are never judged copies
    ("- Name: Priya\n- Leeds", "hi", None),
    # the file written is no source: an edit keeps its lines
    ("- Maya's recital is on 17 April.\n- Booked seats in row C.", "book row C", None),
])
def test_a_note_copied_from_a_file_the_model_was_shown_says_which(content, said, source):
    files = {"IDENTITY.md": IDENTITY,
             "MEMORY.md": "# Memory\n\n- Gareth Lyle, plumber, 07700 900871.\n",
             OLD_LOG: "# 2026-03-02\n\n- My line manager is Hannah; we have a one-to-one on "
                      "Fridays.\n",
             DAILY: "- Maya's recital is on 17 April.\n"}
    assert copied(content, files, said, target=DAILY) == source


def test_a_copied_note_is_refused_and_the_turn_answers(tmp_path):
    provider = ScriptedProvider([junk_write(IDENTITY_COPY), "Nice to meet you, Priya!"])
    runtime, session = session_with(tmp_path, provider, "weak")
    runtime.files.write("IDENTITY.md", IDENTITY)
    events = list(session.run_turn("Hi! I'm Priya. I live in Leeds and I work night shifts."))
    results = [e for e in events if isinstance(e, ToolFinished)]
    assert [r.is_error for r in results] == [True]
    assert results[0].text.startswith("not written: IDENTITY.md already holds these lines")
    assert results[0].text.endswith("Answer the user now.")
    assert provider.requests[1].tool_choice == "none"  # nothing new to write: an answer
    assert runtime.files.stat(DAILY) is None
    assert events[-1].text == "Nice to meet you, Priya!"
    provider.assert_done()



@pytest.mark.parametrize("said, note, kept", [
    # the model's advice, saved as if the user had said it
    ("I've been feeling stressed at work lately.",
     "- Remember to take a walk daily and drink plenty of water.", False),
    ("I work long hours these weeks.", "- Try to sleep eight hours.\n- Take breaks often.",
     False),
    # the user's own to-do, and a plain fact: notes
    ("Remind me to call Ines on Friday.", "- Remember to call Ines on Friday.", True),
    ("My sister Ines lives in Porto.", "- Ines (sister) lives in Porto.", True),
])
def test_advice_for_the_user_is_no_note_about_them(tmp_path, said, note, kept):
    provider = ScriptedProvider([junk_write(note), "Take care."])
    runtime, session = session_with(tmp_path, provider, "weak")
    events = list(session.run_turn(said))
    [result] = [e for e in events if isinstance(e, ToolFinished)]
    log = runtime.files.read(DAILY)
    if kept:
        assert not result.is_error and note in log
    else:
        assert result.is_error and result.text.startswith(
            "not written: this is advice for the user, not something they told you")
        assert log is None or note not in log
        assert provider.requests[1].tool_choice == "none"  # the answer, in words
    provider.assert_done()


def _refused(call, view: TurnView):
    return JunkNotes().refuse(call, view)


def test_a_tools_error_or_answer_copied_as_a_note_is_refused():
    """A 0.5B model wrote the write tool's error, then the edit tool's answer, into a daily
    log as notes (``scripts/bench_guards.py``): a tool's output is never a note."""
    error = Message.tool_result(tool("write", path="memory/2026-11-20.md", content="x"),
                                "error: memory/2026-11-20.md is a daily log and is "
                                "append-only: to add to it, call write with append: true",
                                is_error=True)
    edited = Message.tool_result(tool("edit", path="memory/2026-11-27.md"),
                                 "edited memory/2026-11-27.md")
    view = TurnView(text="Note that I switched my phone plan to Vodafone.",
                    messages=[Message.user("Note that I switched my phone plan to Vodafone."),
                              error, edited])
    for content in ("ERROR: error: memory/2026-11-20.md is a daily log and is append-only: "
                    "to add to it, call write with append: true", "edited memory/2026-11-27.md"):
        refusal = _refused(tool("write", path="memory/2026-11-28.md", content=content,
                                append=True), view)
        assert refusal is not None and "a tool's output" in refusal.text and refusal.final
    # what the user told is written
    assert _refused(tool("write", path="memory/2026-11-28.md", append=True,
                         content="- Switched my phone plan to Vodafone."), view) is None


def test_a_line_read_from_a_file_may_be_kept():
    """"Read notes.txt and keep the admin port": the note copies a line a read returned."""
    read = Message.tool_result(tool("read", path="notes.txt"),
                               "Router admin port: 8443\nGuest wifi: off")
    text = "Read notes.txt and keep the router admin port in your notes."
    view = TurnView(text=text, messages=[Message.user(text), read])
    assert _refused(tool("write", path="memory/2026-11-28.md", append=True,
                         content="- Router admin port: 8443"), view) is None


def test_the_daily_log_names_pattern_is_no_file():
    """memory/YYYY-MM-DD.md, as the instructions name a daily log, copied as the path."""
    view = TurnView(text="Merk dir bitte: mein Zug fährt um 7:40.",
                    daily_log="memory/2026-11-28.md")
    refusal = _refused(tool("write", path="memory/YYYY-MM-DD.md", content="Zug um 7:40"),
                       view)
    assert refusal is not None and "memory/2026-11-28.md" in refusal.text
    assert _refused(tool("edit", path="memory/YYYY-MM-DD.md", oldText="a", newText="b"),
                    view) is not None


def test_an_edit_that_adds_no_word_is_no_note():
    """A full stop put at a note's end is not judged as a note (it was refused as "an
    empty line")."""
    edit = tool("edit", path="memory/2026-11-27.md", oldText="Switched my plan to Vodafone",
                newText="Switched my plan to Vodafone.")
    assert written_note(edit) is None
    assert _refused(edit, TurnView(text="Note that I switched my plan to Vodafone.")) is None
