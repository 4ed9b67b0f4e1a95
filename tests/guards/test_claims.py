"""A reply that says a note was saved when none was: asked once to write it, then told.

A weak model answered "I'll add it to memory/… with `write` and `append: true`" and made no
tool call. The turn now asks once for the write it announced (with tools), and if the model
still writes nothing, a notice tells the user that no note was written.
"""

from __future__ import annotations

import io

import pytest

from clawd.core.events import Notice, TextDelta, ToolFinished
from clawd.frontends.render import Renderer
from clawd.guards.claims import asks_to_note, note_claim
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import file_tools, make_runtime

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")


@pytest.mark.parametrize("text, claim", [
    ("Got it! I've saved your budget to memory.", "I've saved your budget to memory."),
    ("I have updated memory/2026-11-24.md. Anything else?", "I have updated memory/2026-11-24.md."),
    ("Sure. I'll add it to memory/2026-11-24.md with `write` and `append: true`.",
     "I'll add it to memory/2026-11-24.md with `write` and `append: true`."),
    ("Let me write that down.", "Let me write that down."),
    ("I'll keep that in mind!", "I'll keep that in mind!"),
    ("I'll remember that Ines arrives on May 14.", "I'll remember that Ines arrives on May 14."),
    ("I am noting this in your daily log.", "I am noting this in your daily log."),
    ("<tool_response>\nNote added: Ines arrives in Lisbon on May 14.\n</tool_response>",
     "Note added: Ines arrives in Lisbon on May 14."),
    ("It has been saved.", "It has been saved."),
    ("Saved to memory/2026-11-24.md.", "Saved to memory/2026-11-24.md."),
    ("Added to your notes!", "Added to your notes!"),
    ("The budget for the Lisbon trip has been added to memory/2026-11-24.md.",
     "The budget for the Lisbon trip has been added to memory/2026-11-24.md."),
    ("Your budget has been saved.", "Your budget has been saved."),
    # announced, then no call (a 1.5B model)
    ("I need to create the memory file for today. Let me create it now.",
     "I need to create the memory file for today."),
    ("Let me create a note in memory/2026-11-27.md.",
     "Let me create a note in memory/2026-11-27.md."),
    ("I've created today's daily log with your note.",
     "I've created today's daily log with your note."),
])
def test_claims_of_a_saved_note(text, claim):
    assert note_claim(text) == claim


@pytest.mark.parametrize("text", [
    "Your budget is 2400 euros.",
    "Noted.",  # an acknowledgement: nothing said about memory
    "I've added the Louvre to your itinerary.",  # not a note
    "I'll update the itinerary.",
    "I wrote a poem for you.",
    "I have not saved anything.",
    "I can't save files in this session.",
    "Should I save this?",
    "Would you like me to note it?",
    "If you like, I can note it.",
    "I don't have any notes about that.",
    "I'm going to suggest an itinerary.",
    "It was added to the itinerary.",
    "Added three museums to the list.",
    "That is noted.",
    "Three museums have been added to the itinerary.",
    "I remember that my sister Ines arrives in Lisbon on May 14.",  # recalling, not saving
    "I noted earlier that you like fado.",
    "I remember it well: we talked about Porto.",
    "I remember that Ines lives in Porto.",
    "I note that the museums close on Mondays.",
    "Nothing has been saved yet.",
    "No note has been added to memory.",
    "If it has been saved, you will find it in memory.",
    "I need to know the date first.",
    "I'll create a packing list for the trip.",
    "I need to create a budget spreadsheet?",
])
def test_other_replies_claim_nothing(text):
    assert note_claim(text) is None


@pytest.mark.parametrize("message, asked", [
    ("Please remember: Kestrel's backend runs on Python 3.12.", True),
    ("Remember that my budget is 2400 euros.", True),
    ("Hi! Also, please note the gate code ZX-4471.", True),
    ("Don't forget that Ines arrives on May 14.", True),
    ("Note: the deploy command is `make ship`.", True),
    ("Do you remember my budget?", False),  # a question
    ("Can you remember this?", True),  # a polite request (context.requests)
    ("My budget is 2400 euros.", False),
    ("Notes in Markdown are great.", False),
    ("I remember the museum was closed.", False),
])
def test_a_message_asking_for_a_note(message, asked):
    assert asks_to_note(message) is asked


def test_i_remember_after_a_request_to_remember_is_a_claim():
    """A 1.5B model answered "Please remember: …" with "I remember that "…"." three times
    and wrote nothing; after a question the same words recall a note (run 17)."""
    reply = 'I remember that "Kestrel\'s backend runs on Python 3.12".'
    assert note_claim(reply, asked=True) == reply
    assert note_claim(reply) is None
    assert note_claim("I note that the gate is B.", asked=True) == "I note that the gate is B."
    assert note_claim("I remember the museum was closed. Your budget is 2400.",
                      asked=True) == "I remember the museum was closed."
    assert note_claim("I don't remember that.", asked=True) is None


def test_i_remember_this_or_the_fact_restated_claims_a_note_after_a_fact_only():
    """A 1.5B model began every reply of one conversation with "I remember this.", after
    statements and requests alike, and wrote no note."""
    told = "I also have a cat called Pixel who only eats wet food."
    reply = "I remember this. I have a cat called Pixel who only eats wet food."
    assert note_claim(reply, told=told) == "I remember this."
    assert note_claim("Noted! I remember that.", told=told) == "I remember that."
    assert note_claim(reply) is None  # after a request or a question: no claim
    # what was just told, restated: kept; something else: a recollection
    assert note_claim("I remember that your cat Pixel only eats wet food.", told=told) == \
        "I remember that your cat Pixel only eats wet food."
    assert note_claim("I remember that Ines lives in Porto.", told=told) is None


def test_i_remember_after_a_request_is_asked_to_be_written(tmp_path):
    provider = ScriptedProvider([
        'I remember that "Kestrel\'s backend runs on Python 3.12".',
        Reply("", [tool("write", path=DAILY, content="- Kestrel backend: Python 3.12",
                        append=True)]),
        "Saved.",
    ])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("Please remember: Kestrel's backend runs on Python 3.12."))
    assert provider.requests[1].messages[-1].text.startswith('You told me "I remember that')
    assert "- Kestrel backend: Python 3.12" in daily(session)
    assert events[-1].text == "Saved."
    provider.assert_done()


@pytest.mark.parametrize("said, asked", [("I also have a cat called Pixel who only eats wet "
                                          "food.", True),
                                          ("Can you suggest a quick lunch to pack?", False)])
def test_i_remember_this_after_a_fact_is_asked_to_be_written(tmp_path, said, asked):
    write = Reply("", [tool("write", path=DAILY, content="- Cat Pixel eats only wet food",
                            append=True)])
    replies = ["I remember this. " + ("Pixel sounds lovely." if asked else "A wrap and fruit.")]
    provider = ScriptedProvider(replies + ([write, "Saved."] if asked else []))
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn(said))
    assert ("- Cat Pixel eats only wet food" in daily(session)) is asked
    provider.assert_done()


def daily(session: Session) -> str:
    return session.rt.files.read(DAILY) or ""


def test_an_unkept_note_is_asked_for_once_and_written(tmp_path):
    provider = ScriptedProvider([
        "Noted, I'll remember that your budget is 2400 euros.",
        Reply("", [tool("write", path=DAILY, content="- budget: 2400 euros", append=True)]),
        "Saved to today's log.",
    ])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("my budget is 2400 euros"))
    first, second, third = provider.requests
    asked = second.messages[-1]  # after the history, sent in this request only
    assert asked.role == "user" and asked.text.startswith(
        'You told me "Noted, I\'ll remember that your budget is 2400 euros.", but no file '
        'was written')
    assert DAILY in asked.text and "append: true" in asked.text
    assert second.system == first.system  # the cached prefix stays
    assert second.tool_choice == "auto"  # the write it announced can be made
    # the claim stays in the history the model and the user saw; the request does not
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert [m.role for m in third.messages] == ["user", "assistant", "assistant",
                                                "toolResult"]
    assert "- budget: 2400 euros" in daily(session)
    assert not [e for e in events if isinstance(e, Notice)]
    assert events[-1].text == "Saved to today's log."
    provider.assert_done()


def test_a_note_still_unwritten_is_reported(tmp_path):
    provider = ScriptedProvider(["I'll add it to your notes.", "Sure, it is saved."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("my sister Ines arrives on May 14"))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == ['the model said "I\'ll add it to your notes." but wrote no note']
    # the second answer, in words where a write was asked for (a 1.5B model claimed the
    # note again), is neither shown nor kept in the history (on disk, marked retried)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        "I'll add it to your notes."
    out = io.StringIO()
    renderer = Renderer(out, side=io.StringIO(), color=False)
    for event in events:
        renderer.event(event)
    assert out.getvalue() == "I'll add it to your notes.\n"
    assert daily(session) == ""
    assert [m.text for m in session.history.messages] == ["my sister Ines arrives on May 14",
                                                          "I'll add it to your notes."]
    provider.assert_done()


def test_a_write_made_when_asked_again_shows_the_answer_after_it(tmp_path):
    provider = ScriptedProvider([
        "I'll add it to your notes.",
        Reply("Saving it now.", [tool("write", path=DAILY, content="- Ines: May 14",
                                      append=True)]),
        "Saved.",
    ])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("my sister Ines arrives on May 14"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        "I'll add it to your notes.Saved."
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False]
    assert not [e for e in events if isinstance(e, Notice)]
    assert "- Ines: May 14" in daily(session)
    provider.assert_done()


def test_a_note_written_in_the_turn_is_not_asked_for(tmp_path):
    provider = ScriptedProvider([
        Reply("", [tool("write", path=DAILY, content="- budget: 2400 euros", append=True)]),
        "Noted: I saved your budget to today's log.",
    ])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("my budget is 2400 euros"))
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False]
    assert not [e for e in events if isinstance(e, Notice)]
    provider.assert_done()


def test_a_failed_write_does_not_count(tmp_path):
    provider = ScriptedProvider([
        Reply("", [tool("write", path="../outside.md", content="- budget", append=True)]),
        "I've saved it to memory.",
        Reply("", [tool("write", path=DAILY, content="- budget: 2400 euros", append=True)]),
        "Done.",
    ])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("my budget is 2400 euros"))
    assert provider.requests[2].messages[-1].text.startswith('You told me "I\'ve saved it')
    assert "- budget: 2400 euros" in daily(session)
    provider.assert_done()


def test_a_session_that_cannot_write_is_not_asked(tmp_path):
    readers = [t for t in file_tools() if t.spec.name not in ("write", "edit")]
    provider = ScriptedProvider(["I'll remember that."])
    session = Session.open(make_runtime(tmp_path, provider, tools=readers), KEY)
    events = list(session.run_turn("my budget is 2400 euros"))
    assert not [e for e in events if isinstance(e, Notice)]
    provider.assert_done()


def test_a_blank_answer_to_the_request_for_the_note_leaves_the_reply_shown(tmp_path):
    provider = ScriptedProvider(["I'll add it to your notes.", ""])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("my sister Ines arrives on May 14"))
    assert [e.text for e in events if isinstance(e, Notice)] == [
        'the model said "I\'ll add it to your notes." but wrote no note']  # not "empty reply"
    assert events[-1].text == "I'll add it to your notes."
    provider.assert_done()


def test_an_echo_that_says_the_note_was_kept_is_asked_for_the_write(tmp_path):
    """Told "Remember that my daughter Mira's school play is on 12 December at 6pm.", the
    1.5B model answered "I remember that your daughter Mira's …": asked as an echo, it said
    it did not understand; asked for the write it claimed, it has a call to make."""
    said = "Remember that my daughter Mira's school play is on 12 December at 6pm."
    provider = ScriptedProvider([
        "I remember that your daughter Mira's school play is on 12 December at 6pm.",
        Reply("", [tool("write", path=DAILY, content="- Mira's school play: 12 December, 6pm",
                        append=True)]),
        "Saved."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn(said))
    assert provider.requests[1].messages[-1].text.startswith('You told me "I remember that')
    assert "- Mira's school play: 12 December, 6pm" in daily(session)
    provider.assert_done()
