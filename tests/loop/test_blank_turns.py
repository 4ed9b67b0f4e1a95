"""A user turn always ends with something visible; the flush turn stays silent.

Blank answers (empty, or ``NO_REPLY``) to a user message are asked again once with a nudge
that leaves the blank answer out of the request; a second blank answer ends the turn with a
notice, in every front end. The flush turn's tool calls are never shown, and a flush that
answers in words instead of writing a file has those words kept in today's daily log.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import clawd
from clawd.context.replytext import copies, dumps_notes, recall_start, repeats_answer
from clawd.core.events import Flushed, Notice, TextDelta, ToolFinished, ToolStarted
from clawd.frontends import cli
from clawd.frontends.render import Renderer
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime, transcript_entries, transcript_lines
from fakeserver import openai_stream
from loopmodel import filler, talk_until_flush

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")


def entries(session: Session) -> list[dict]:
    return transcript_entries(session)


@pytest.mark.parametrize("blank", ["", "  \n", "NO_REPLY", "NO_REPLY - nothing to add"])
def test_a_blank_answer_is_asked_again_once_without_it_in_the_request(tmp_path, blank):
    provider = ScriptedProvider([blank, "Your budget is 2400 euros."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("Hi, my budget is 2400 euros"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        "Your budget is 2400 euros."
    assert events[-1].text == "Your budget is 2400 euros."
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "asking the model again: the reply was empty"]
    first, second = provider.requests
    # asked again after the history, the user's message repeated: a 1.5B model answered
    # 0 of 6 such requests with a note in the system prompt, 6 of 6 this way; and the
    # system prompt stays the cached prefix
    assert second.system == first.system
    assert first.tool_choice == "auto" and second.tool_choice == "none"  # words this time
    assert [m.role for m in second.messages] == ["user", "user"]  # the blank one not sent
    what = "NO_REPLY" if blank.startswith("NO_REPLY") else "empty"
    assert second.messages[-1].text == (f"Your last answer was {what}, so I saw nothing. "
                                        f"Answer my message now, in words: Hi, my budget is "
                                        f"2400 euros")
    # on disk: the blank answer is kept, marked, and stays out of the reloaded history
    on_disk = entries(session)
    assert [e.get("retried", False) for e in on_disk] == [False, True, False]
    again = Session.open(session.rt, KEY)
    assert [m.text for m in again.history.messages] == [
        "Hi, my budget is 2400 euros", "Your budget is 2400 euros."]


def test_an_answer_that_only_repeats_the_message_is_asked_again(tmp_path):
    """Run 20: told "By the way, my budget ...", the 1.5B model answered with that sentence,
    and with the echo in its history it echoed the next statement too."""
    said = "By the way, my budget for the Lisbon trip is 2400 euros in total."
    note = tool("write", path=DAILY, content="- budget: 2400 euros", append=True)
    provider = ScriptedProvider([said, Reply("", [note]), "Noted: 2400 euros in total."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn(said))
    out = io.StringIO()
    renderer = Renderer(out, color=False)
    for event in events:
        renderer.event(event)
    assert out.getvalue() == (f"{said}\n· asking the model again: the reply only repeated "
                              f"your message\n"
                              f"· write path='{DAILY}' append=True\n"
                              f"Noted: 2400 euros in total.\n")  # the echo was shown
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "user"]  # the echo not sent back
    assert second.messages[-1].text == (
        "That was my own message copied back. Respond to what I told you now, in one or two "
        "sentences of your own (and save it as a note if it is worth keeping).")
    assert second.tool_choice == "auto"  # the note may be written now
    assert [e.get("retried", False) for e in entries(session)] == [False, True, False, False,
                                                                  False]
    assert [m.text for m in Session.open(session.rt, KEY).history.messages][-1] == \
        "Noted: 2400 euros in total."
    provider.assert_done()


@pytest.mark.parametrize("reply", ["Hello!", "Lisbon is lovely in May: my budget for the "
                                              "trip is 2400 euros, you said. Anything else?"])
def test_a_short_echo_or_a_quote_is_an_answer(tmp_path, reply):
    message = "Hello" if reply == "Hello!" else "My budget for the trip is 2400 euros."
    provider = ScriptedProvider([reply])
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn(message))
    assert events[-1].text == reply
    provider.assert_done()


def test_an_echo_answering_the_request_for_a_blank_answer_is_asked_again(tmp_path):
    """The 1.5B model answered "Hi! I'm Priya. …" with nothing, then, asked again with the
    message repeated, with the message itself."""
    said = "Hi! I'm Priya. I live in Leeds and I work night shifts as a nurse."
    provider = ScriptedProvider(["", said, "Hello Priya! Night shifts must be tiring."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn(said))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        f"{said}Hello Priya! Night shifts must be tiring.")
    assert provider.requests[2].messages[-1].text.startswith("That was my own message copied")
    assert [m.text for m in Session.open(session.rt, KEY).history.messages] == [
        said, "Hello Priya! Night shifts must be tiring."]
    provider.assert_done()


AGENTS = Path(clawd.__file__).parent / "workspace_template" / "AGENTS.md"
COPIED = ("To keep this durable, write it down now, in the right file, and say where. Never "
          "promise to keep something \"in your head\": there is no head between sessions.")


def test_an_answer_copying_the_instructions_is_asked_again(tmp_path):
    """Told to remember the school play, the 1.5B model answered with AGENTS.md's rule about
    "remember this", and with it in its history did so again at the next statement."""
    said = "Remember that my daughter Mira's school play is on 12 December at 6pm."
    note = tool("write", path=DAILY, content="- Mira's school play: 12 December, 6pm",
                append=True)
    provider = ScriptedProvider([COPIED, Reply("", [note]), "Saved to today's log."])
    runtime = make_runtime(tmp_path, provider)
    runtime.files.write("AGENTS.md", AGENTS.read_text())
    session = Session.open(runtime, KEY)
    events = list(session.run_turn(said))
    assert provider.requests[1].messages[-1].text.startswith(
        "Your last answer only repeated the instructions you were given")
    assert provider.requests[1].tool_choice == "auto"
    assert [m.text for m in Session.open(runtime, KEY).history.messages][-1] == \
        "Saved to today's log."
    assert COPIED not in [m.text for m in Session.open(runtime, KEY).history.messages]
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "asking the model again: the reply copied the instructions"]
    provider.assert_done()


@pytest.mark.parametrize("said", ["What does AGENTS.md say about remembering things?",
                                  "What are your rules for remembering things?"])
def test_a_quote_of_the_instructions_asked_for_is_an_answer(tmp_path, said):
    provider = ScriptedProvider([COPIED])
    runtime = make_runtime(tmp_path, provider)
    runtime.files.write("AGENTS.md", AGENTS.read_text())
    events = list(Session.open(runtime, KEY).run_turn(said))
    assert events[-1].text == COPIED
    provider.assert_done()


@pytest.mark.parametrize("reply, copied", [
    (COPIED, True),
    ("Never promise to keep something in your head.", False),  # too short to tell
    ("Your dentist appointment moved to Tuesday 2 December at 9:30, so write it down now in "
     "your calendar.", False),
])
def test_copies_tells_a_copied_rule_from_an_answer(reply, copied):
    assert copies(reply, AGENTS.read_text(), "Actually the play moved.") is copied


def test_an_echo_then_nothing_ends_with_one_notice(tmp_path):
    said = "By the way, my sister Ines arrives in Lisbon on May 14."
    provider = ScriptedProvider([said, ""])
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn(said))
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "asking the model again: the reply only repeated your message",
        "the model returned an empty reply; nothing to show"]
    provider.assert_done()


@pytest.mark.parametrize("blank, said", [("", "the model returned an empty reply twice"),
                                         ("NO_REPLY", "the model replied NO_REPLY twice")])
def test_two_blank_answers_end_the_turn_with_a_notice(tmp_path, blank, said):
    provider = ScriptedProvider([blank, blank])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("suggest an itinerary"))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[0] == "asking the model again: the reply was empty"  # while it waits
    assert len(notices) == 2 and notices[1].startswith(said)
    assert events[-1].text == ""
    provider.assert_done()


def test_a_blank_final_answer_after_tools_is_asked_again(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("read", path="notes.md")]), "",
                                 "notes.md does not exist."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("what is in notes.md?"))
    assert events[-1].text == "notes.md does not exist."
    assert [m.role for m in provider.requests[2].messages] == ["user", "assistant",
                                                               "toolResult", "user"]
    assert provider.requests[2].messages[-1].text.endswith("in words: what is in notes.md?")
    # the request to answer is never kept
    assert [m.role for m in session.history.messages] == ["user", "assistant", "toolResult",
                                                          "assistant"]


@pytest.mark.slow  # the command line end to end
@pytest.mark.parametrize("flags", [["-m", "hello"], ["--script", "-"], ["--json", "-m", "hello"]])
def test_every_front_end_shows_the_notice(local_config, local_server, capsys, monkeypatch,
                                          flags):
    server = local_server
    server.default("POST", "/v1/chat/completions", lambda r: openai_stream(""))
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    code = cli.main(["chat", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(server.requests) == 2  # asked again once
    if "--json" in flags:
        events = [json.loads(line) for line in out.splitlines()]
        assert {"type": "notice", "text": "the model returned an empty reply twice (asked "
                "again once); nothing to show"} in events
    else:
        assert "· the model returned an empty reply twice" in err
    first, second = (r.json() for r in server.requests)
    assert "tool_choice" not in first and second["tool_choice"] == "none"


# --- the flush stays silent -----------------------------------------------------------------

def near_flush(tmp_path, provider):
    """A session just short of its flush point, in which the user gave their budget."""
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    talk_until_flush(session, provider,
                     say=lambda i: f"Turn {i}. My budget is 2400 euros. The trip is to Lisbon in "
                                   f"May; Ines arrives on May 14. {filler(200, i)}")
    return runtime, session


def test_the_flush_shows_no_tool_lines_only_the_files_written(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    provider.add(Reply("", [tool("read", path=DAILY),
                            tool("write", path=DAILY, content="- budget 2400\n", append=True)]),
                 "NO_REPLY", "Sure.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    assert not [e for e in events if isinstance(e, (ToolStarted, ToolFinished))]
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    out = io.StringIO()
    renderer = Renderer(out, color=False)
    for event in events:
        renderer.event(event)
    assert out.getvalue() == f"· memory flush: {DAILY}\nSure.\n"
    assert runtime.files.read(DAILY) == "- budget 2400\n"


def test_a_flush_that_answers_in_words_keeps_them_in_the_daily_log(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    runtime.files.write(DAILY, "# 2026-11-22\n\n- earlier note")
    provider.add("- The user's budget is 2400 euros.\n- Trip: Lisbon in May.", "Sure.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    assert runtime.files.read(DAILY) == (
        "# 2026-11-22\n\n- earlier note\n\n## Flush notes (10:00, written from the model's "
        "reply)\n\n- The user's budget is 2400 euros.\n- Trip: Lisbon in May.\n")
    assert events[-1].text == "Sure."


def test_flush_notes_copied_from_older_notes_are_not_saved_again_as_todays(tmp_path):
    """The 1.5B model answered the flush with lines of the recall block and MEMORY.md
    among its new ones; saved under today's date, an old fact reads as news (and a struck
    through one, replaced since, as the current value)."""
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    runtime.files.write(
        "memory/2026-11-10.md",
        "# 2026-11-10\n\n- Asked for a soup recipe.\n- The build server is osprey.\n")
    runtime.files.write("MEMORY.md", "## Facts\n\n* The build server was renamed to "
                                     "**condor**.\n")
    provider.add("- asked for a soup recipe\n"
                 "- I remember that the build server was renamed to condor.\n"
                 "- ~~The build server is osprey.~~ [replaced on 2026-11-20 by: The build "
                 "server was renamed to condor.]\n"
                 "- The user's budget is 2400 euros.", "Sure.")
    list(session.run_turn(f"one more {filler(400)}"))
    log = runtime.files.read(DAILY)
    assert log.endswith("reply)\n\n- The user's budget is 2400 euros.\n"), log
    assert "soup" not in log and "osprey" not in log and "condor" not in log


def test_a_flush_answer_made_only_of_older_notes_saves_nothing(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    runtime.files.write("memory/2026-11-10.md", "# 2026-11-10\n\n- Asked for a soup recipe.\n")
    provider.add("- Asked for a soup recipe.", "Sure.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[])]
    assert runtime.files.stat(DAILY) is None


def test_flush_notes_caught_in_a_loop_are_saved_once(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    loop = "\n".join(["- Budget: 2400 euros", "- Ines: May 14"]
                     + ["- Trip: Lisbon in May", "- Budget: for the trip"] * 30)
    provider.add(loop, "Sure.")
    list(session.run_turn(f"one more {filler(400)}"))
    assert runtime.files.read(DAILY).endswith(
        "reply)\n\n- Budget: 2400 euros\n- Ines: May 14\n- Trip: Lisbon in May\n"
        "- Budget: for the trip\n")


def test_a_flush_writing_the_same_note_again_ends(tmp_path):
    note = {"path": DAILY, "content": "- Budget: 2400 euros\n", "append": True}
    flush_requests = []

    def model(request):  # the flush writes its note for as long as it is asked
        if "nearing compaction" in "".join(request.system):
            flush_requests.append(request)
            return Reply("", [tool("write", **note)])
        return "Sure."

    runtime, session = near_flush(tmp_path, ScriptedProvider(default=model))
    events = list(session.run_turn(f"one more {filler(400)}"))
    assert runtime.files.read(DAILY).count("2400") == 1
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    # written once; the same write again is answered without running, and a third one,
    # after the request asked for words, ends the flush
    assert len(flush_requests) == 3 and flush_requests[2].tool_choice == "none"
    assert events[-1].text == "Sure."
    lines = transcript_lines(session)
    results = [e for e in lines if e.get("role") == "toolResult"]
    assert len(results) == 2  # every call has its result; the repeat's says it was done
    assert results[1]["content"][0]["text"].startswith("already done")


@pytest.mark.parametrize("silent", ["NO_REPLY", "```\nNO_REPLY\n"])  # a coder model fences it
@pytest.mark.parametrize("second, saved", [
    ("- Ines arrives in Lisbon on May 14.", "- Ines arrives in Lisbon on May 14."),
    ("Here they are:\n\n- budget 2400 euros\n* Ines: May 14\nThat is all.",
     "- budget 2400 euros\n* Ines: May 14"),  # only the list lines
    ("The user told me nothing worth keeping.", None),  # words without a list: not notes
    ("NO_REPLY", None),
    ("- No additional notes to store.", None),  # a list line saying there is nothing
    ("- Nothing new.\n- Ines: May 14", "- Ines: May 14"),
])
def test_a_silent_flush_of_a_conversation_that_noted_nothing_is_asked_once(
        tmp_path, silent, second, saved):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    provider.add(silent, second, "Sure.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    asked = [r.messages[-1] for r in provider.requests if r.messages[-1].flush]
    assert len(asked) == 2 and asked[1].text.startswith("Nothing has been saved from this "
                                                        "conversation yet. List every fact")
    assert "NO_REPLY" not in asked[1].text  # no way out offered: a weak model takes it
    assert events[-1].text == "Sure."
    log = runtime.files.read(DAILY)
    if saved is None:
        assert log is None
        assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[])]
    else:
        assert log.endswith(f"reply)\n\n{saved}\n")
    provider.assert_done()


@pytest.mark.parametrize("case, asked", [
    ("noted last", 1),  # the notes are up to date: NO_REPLY is taken at its word
    ("talked after the note", 2),
    ("the note failed", 2),
])
def test_a_silent_flush_is_asked_again_when_the_user_spoke_after_the_last_note(
        tmp_path, case, asked):
    provider = ScriptedProvider()
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    note = (tool("edit", path=DAILY, oldText="a", newText="b") if case == "the note failed"
            else tool("write", path=DAILY, content="- budget 2400\n", append=True))

    def note_turn():
        provider.add(Reply("", [note]), "Noted.")
        list(session.run_turn("My budget is 2400 euros."))

    if case == "talked after the note":
        note_turn()
    talk_until_flush(session, provider, margin=600)
    if case != "talked after the note":
        note_turn()
    provider.add("NO_REPLY", *(["- budget 2400"] if asked == 2 else []), "Sure.")
    events = list(session.run_turn(f"one more {filler(500)}"))
    assert [e for e in events if isinstance(e, Flushed)]
    flushes = [r for r in provider.requests if r.messages[-1].flush]
    assert len(flushes) == asked
    if case == "talked after the note":  # the second request says what is missing
        assert flushes[1].messages[-1].text.startswith(
            "What the user said after your last note has not been saved.")
    if case == "the note failed":
        assert flushes[1].messages[-1].text.startswith("Nothing has been saved")
    assert events[-1].text == "Sure."
    provider.assert_done()


def test_a_flush_after_a_compaction_does_not_say_nothing_was_saved(tmp_path):
    """The note-writing turn was compacted away; the notes are still on disk (run 14)."""
    provider = ScriptedProvider()
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 400,
            "memoryFlush": {"softThresholdTokens": 1000}}
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    provider.add(Reply("", [tool("write", path=DAILY, content="- budget 2400\n",
                                 append=True)]), "Noted.")
    list(session.run_turn("My budget is 2400 euros."))
    for i in range(3):
        provider.add("Sure.")
        list(session.run_turn(f"Tell me about day {i}. {filler(200, i)}"))
    provider.add(Reply("", [tool("write", path=DAILY, content="- Asked about day 0 to day 2\n",
                                 append=True)]), "NO_REPLY", "## Goal\n- Plan a trip.")
    list(session.compact())  # the cycle's flush first, then the summary
    assert session.history.summary and not any(
        m.tool_calls for m in session.history.messages)  # the note is out of view
    talk_until_flush(session, provider,
                     say=lambda i: f"Turn {i}. Ines arrives on May 14. {filler(200, i)}")
    provider.add("NO_REPLY", "- Ines: May 14", "Sure.")
    list(session.run_turn(f"one more {filler(400)}"))
    asked = [r.messages[-1] for r in provider.requests if r.messages[-1].flush]
    assert asked[-1].text.startswith("What the user said since the conversation was last "
                                     "summarised has not been saved.")
    assert runtime.files.read(DAILY).endswith("- Ines: May 14\n")
    provider.assert_done()


@pytest.mark.parametrize("second, saved", [
    ("- Ines arrives in Lisbon on May 14.", "- Ines arrives in Lisbon on May 14."),
    ("NO_REPLY", None),
    ("Done!", None),  # a second bare acknowledgement is not saved either
])
def test_a_flush_that_only_says_done_is_asked_once_for_the_notes(tmp_path, second, saved):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    provider.add("Done", second, "Sure.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    asked = [r.messages[-1] for r in provider.requests if r.messages[-1].flush]
    assert len(asked) == 2 and 'You replied "Done" but no note was written' in asked[1].text
    assert events[-1].text == "Sure."
    log = runtime.files.read(DAILY)
    if saved is None:
        assert log is None or "Done" not in log
    else:
        assert log.endswith(f"reply)\n\n{saved}\n")
    provider.assert_done()


def test_acknowledgements_are_told_from_notes():
    from clawd.context.flush import is_acknowledgement

    for ack in ("Done", "Done.", "OK, noted!", "**Saved.**", "Nothing to store", "Got it"):
        assert is_acknowledgement(ack), ack
    for note in ("- budget 2400", "Budget: 2400 euros", "Ines arrives May 14", "", "NO_REPLY",
                 "Done: the hotel is booked"):
        assert not is_acknowledgement(note), note


@pytest.mark.parametrize("logged", [False, True])
def test_a_flush_that_saves_nothing_twice_keeps_the_users_own_words(tmp_path, logged):
    """Asked twice, the 1.5B model answered NO_REPLY twice and the budget was lost: the
    user's short sentences with references no note holds are saved instead."""
    provider = ScriptedProvider(default=lambda r: "NO_REPLY" if r.messages[-1].flush
                                else "Sure.")
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    if logged:  # the budget is already in today's log
        runtime.files.write(DAILY, "# 2026-11-22\n\n- Lisbon budget: 2400 euros\n")
    session = Session.open(runtime, KEY)
    said = ["By the way, my budget for the Lisbon trip is 2400 euros in total.",
            "My sister Ines arrives in Lisbon on May 14.", "Thanks!"]
    events = [e for text in said for e in session.run_turn(text)]
    for i in range(60):  # pasted material until the flush runs
        if any(isinstance(e, Flushed) for e in events):
            break
        events += session.run_turn(f"Turn {i}. FACT-{i:03d} {filler(200, i)}")
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    asked = [r for r in provider.requests if r.messages[-1].flush]
    assert [r.messages[-1].text[:20] for r in asked[:2]] == [
        "Write any lasting no", "Nothing has been sav"]
    log = runtime.files.read(DAILY)
    words = log.split("## Flush notes (", 1)[1]
    assert words.split(", ", 1)[1].startswith(
        "the user's own words: the model saved no notes)\n\n- ")
    assert ("By the way, my budget" in words) is not logged
    assert "- My sister Ines arrives in Lisbon on May 14." in words
    assert "Thanks" not in words and "FACT-" not in words  # no references; pasted


DUMP = ("From memory/2026-11-27.md#L1-L4 (lines 1-4):\n# 2026-11-27\n"
        "- Tomas lives in Ghent.\n- Tomas has a cat named Pixel.\n"
        "**user** (2026-11-27 13:34):\nWhere do I live?\n**assistant** (2026-11-27 13:34):\n"
        "You live in Ghent.")


def test_an_answer_copying_the_recalled_notes_is_never_shown_and_asked_again(tmp_path):
    """Asked where they live and what the cat is called, the 1.5B model answered with the
    recalled-notes block, headers and all, and wrote more of the conversation after it."""
    said = "Where do I live, and what is my cat called?"
    provider = ScriptedProvider([DUMP, "You live in Ghent, and your cat is Pixel."])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn(said))
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "You live in Ghent, and your cat is Pixel."
    ask = provider.requests[1].messages[-1].text
    assert ask.startswith("Your last answer copied the notes found in memory, headers and "
                          "all; it did not answer me.") and ask.endswith(said)
    assert [m.text for m in Session.open(runtime, KEY).history.messages] == [
        said, "You live in Ghent, and your cat is Pixel."]
    assert [e.get("retried", False) for e in entries(session)] == [False, True, False]
    provider.assert_done()


class Counted(ScriptedProvider):
    """A scripted model that counts the pieces of each reply it was read to."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.read: list[int] = []

    def stream(self, request):
        self.read.append(0)
        for event in super().stream(request):
            if isinstance(event, TextDelta):
                self.read[-1] += 1
            yield event


def test_a_copy_of_the_notes_is_not_read_to_its_end(tmp_path):
    """The first reply of a script copied the notes over and over: 2,800 tokens decoded,
    nine minutes with nothing shown. Once a header line of the notes is in, the answer will
    be asked again whatever follows: the stream is closed (the server stops generating)."""
    runaway = DUMP + ("\n" + DUMP) * 200
    provider = Counted([runaway, "You live in Ghent."], chunk_size=16)
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn("Where do I live?"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "You live in Ghent."
    assert provider.read[0] <= 5 < len(runaway) // 16  # read to its first line break or so
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "asking the model again: the reply copied the recalled notes"]
    provider.assert_done()


def test_a_copy_of_the_notes_holding_a_claim_is_asked_as_a_copy(tmp_path):
    said = "I also have a cat called Pixel who only eats wet food."
    dump = DUMP + "\nI remember that your cat Pixel only eats wet food."
    provider = ScriptedProvider([dump, "Pixel sounds lovely."])
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn(said))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Pixel sounds lovely."
    assert provider.requests[1].messages[-1].text.startswith("Your last answer copied the notes")
    provider.assert_done()


def test_a_strong_models_answer_starting_like_the_notes_is_shown_whole(tmp_path):
    provider = ScriptedProvider([DUMP])
    runtime = make_runtime(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile="strong")
    events = list(Session.open(runtime, KEY).run_turn("Where do I live?"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == DUMP
    provider.assert_done()


def test_the_recall_blocks_own_lines_are_what_dumps_notes_finds():
    from clawd.core.templates import render
    from clawd.loop.recall import Hit

    hits = [Hit("memory/2026-11-02.md", 1, 4, 0.6, "- Ines lives in Porto"),
            Hit("MEMORY.md", 7, 7, 0.5, "- Budget: 2400 euros")]
    block = render("recall.md.j2", hits=hits, cite=False, message="Where does Ines live?")
    assert dumps_notes(block)
    for line in block.splitlines():  # each header line is held back while it streams
        if line.startswith(("From ", "[Found")):
            assert all(recall_start(line[:n]) for n in range(1, len(line) + 1)), line
    assert not dumps_notes("Ines lives in Porto (memory/2026-11-02.md#L3).")
    assert not recall_start("From what you told me, Ines lives in Porto.")
    # a saved conversation's line, as the /new file holds them (a 1.5B model began so)
    saved = "**assistant** (2026-11-27 15:08):\nI remember that your car's MOT is due."
    assert dumps_notes(saved)
    assert all(recall_start(saved[:n].lstrip("*")) for n in range(1, 34))
    assert not recall_start("As you said, the MOT is due on 9 January.")


STUCK = ("To keep this information, I will write it down in `memory/2026-11-22.md` with "
         "`write` and `append: true`. Here's the command:")


def test_an_answer_repeating_the_one_before_to_another_message_is_never_shown(tmp_path):
    """After one such answer, the 1.5B model gave the same one to each of the next fourteen
    messages; with no write in those turns each was also a claim, and was asked for the
    write rather than for an answer."""
    write = Reply("", [tool("write", path=DAILY, content="- Budget: 2400 euros", append=True)])
    provider = ScriptedProvider([write, STUCK, STUCK, "Belém, Alfama and Chiado."])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    list(session.run_turn("My budget for the Lisbon trip is 2400 euros."))
    events = list(session.run_turn("Which neighbourhoods are best for an evening walk?"))
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "Belém, Alfama and Chiado."
    ask = provider.requests[3].messages[-1].text
    assert ask.startswith("Your last answer was your answer to my message before, word for "
                          "word") and ask.endswith("best for an evening walk?")
    assert [m.text for m in Session.open(runtime, KEY).history.messages].count(STUCK) == 1
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "asking the model again: the reply repeated the answer before"]
    provider.assert_done()


def test_the_same_question_may_get_the_same_answer(tmp_path):
    answer = "Lisbon's tram 28 runs from Martim Moniz to Campo de Ourique every ten minutes."
    provider = ScriptedProvider([answer, answer])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("How does tram 28 work?"))
    events = list(session.run_turn("How does tram 28 work?"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer
    provider.assert_done()


def test_repeats_answer_compares_with_the_turn_before():
    from clawd.core.messages import Message
    history = [Message.user("hi"), Message.assistant(STUCK), Message.user("Which dishes?")]
    assert repeats_answer(STUCK, "Which dishes?", history)
    assert not repeats_answer("Try bacalhau, caldo verde and pastéis de nata.",
                              "Which dishes?", history)
    assert not repeats_answer("Sure.", "Which dishes?",
                              [Message.user("a"), Message.assistant("Sure."), Message.user("b")])
    assert not repeats_answer(STUCK, "Which dishes?", history[-1:])  # no answer before


@pytest.mark.parametrize("reply, echo", [
    # the statement a request to keep asked to keep, said back with nothing of its own (a
    # 1.5B model, labelled replies of scripts/bench_guards.py)
    ("The gym is open until 22:00.", True),
    ("My gym is open until 22:00", True),
    # saying it was kept, or answering around it, is an answer
    ("Noted: your gym is open until 22:00.", False),
    ("Got it, I'll plan the evening runs around the gym closing at 22:00.", False),
])
def test_the_kept_statement_said_back_is_an_echo(reply, echo):
    from clawd.guards.answers import restates

    assert restates(reply, "Please remember that my gym is open until 22:00.") is echo


def test_a_restated_request_is_asked_again(tmp_path):
    said = "Please remember that my library card expires in June."
    note = tool("write", path=DAILY, content="- library card expires in June", append=True)
    provider = ScriptedProvider([Reply("", [note]), "My library card expires in June.",
                                 "Noted: your library card expires in June."])
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn(said))
    assert events[-1].text == "Noted: your library card expires in June."
    assert any(isinstance(e, Notice) and "only repeated your message" in e.text
               for e in events)
    provider.assert_done()
