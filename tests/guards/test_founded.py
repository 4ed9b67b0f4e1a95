"""Notes say only what was said: a guess is left out, a filled template is refused whole."""

from __future__ import annotations

import pytest

from clawd.core.messages import Message, ToolCall
from clawd.guards.base import TurnView
from clawd.guards.founded import FoundedNotes, added_lines, founded_note, told_or_returned

SAID = ("Hi! I'm Sam. I live in Porto, in the Bonfim neighbourhood.\n"
        "My cat is called Miso and her vet is Dr. Almeida at Clinica Boavista.\n"
        "My sister Rita's birthday is on 12 March. I prefer short answers with bullet "
        "points.\nHow do I reverse a list in Python?")


@pytest.mark.parametrize("line", [
    "- Sam lives in Porto (Bonfim).",
    "- Cat Miso; vet Dr. Almeida at Clinica Boavista.",
    "- Sister Rita's birthday: 12 March.",
    "- Prefers short answers with bullet points.",
    "- **Name**: Sam",
    "- How they like answers (short / detailed, bullet points / prose): short, bullet points",
])
def test_a_line_of_what_was_said_is_kept(line):
    assert founded_note(line, SAID) == (line, [])


@pytest.mark.parametrize("line", [
    "- The user's cat Miso is 4 years old.",          # a number nobody said
    "- Sam works as a teacher at the local school.",  # mostly words nobody said
    "- Miso's vet is Dr. Costa.",                     # a name nobody said
    "- Time zone: UTC",
])
def test_a_line_nobody_said_is_left_out(line):
    kept, dropped = founded_note(f"- Sam lives in Porto.\n{line}", SAID)
    assert kept == "- Sam lives in Porto." and dropped == [line]


def test_a_template_filled_with_guesses_is_left_out_whole():
    """The 1.5B flush filled USER.md's labels: every line goes, the name's too."""
    note = ("- **Pronouns**: Sam\n- **Time zone**: UTC\n- **Languages**: Python\n"
            "- **Role / what they do**: Developer\n"
            "- **Tools and stack they use**: Python, Flask, PostgreSQL, Git, VSCode")
    kept, dropped = founded_note(note, SAID)
    assert kept == "" and len(dropped) == 5


def test_a_template_label_filled_with_what_was_said_is_kept():
    note = "- Name: Sam\n- What to call them: Sam\n- Pronouns:\n- Time zone: (their zone)"
    assert founded_note(note, SAID) == (note, [])


def test_a_blank_filled_with_a_word_of_no_meaning_is_a_guess():
    kept, dropped = founded_note("- Name: Sam\n- Pronouns: They", SAID)
    assert kept == "" and dropped == ["- Name: Sam", "- Pronouns: They"]


def test_what_a_tool_returned_founds_a_note_and_the_models_own_words_do_not():
    messages = [Message.user("Read docs/lease.txt and tell me who my landlord is."),
                Message.assistant("Your landlord is probably Mr. Duarte."),
                Message.tool_result(ToolCall("c1", "read", {"path": "docs/lease.txt"}),
                                    "Landlord: Marta Okafor\nRent: 850 EUR")]
    said = told_or_returned(messages)
    assert founded_note("- Landlord: Marta Okafor, rent 850 EUR", said)[1] == []
    assert founded_note("- Landlord: Mr. Duarte", said)[1] == ["- Landlord: Mr. Duarte"]


def test_the_flush_request_is_not_something_the_person_said():
    messages = [Message.user("Store durable memories in memory/2026-03-02.md now.",
                             flush=True)]
    assert told_or_returned(messages) == ""


def test_an_edit_adds_only_its_new_lines():
    call = ToolCall("c1", "edit", {"path": "USER.md", "oldText": "- Name:\n- Pronouns:",
                                   "newText": "- Name:\n- Pronouns: she/her"})
    assert added_lines(call) == "- Pronouns: she/her"
    assert added_lines(ToolCall("c2", "write", {"path": "notes/x.md", "content": "x"})) is None


def test_the_guard_refuses_a_guessed_profile_then_asks_for_words():
    guard = FoundedNotes()
    turn = TurnView(text="Hi! I'm Sam. I live in Porto.")
    call = ToolCall("c1", "write", {"path": "memory/2026-03-02.md",
                                    "content": "- Name: Sam\n- Time zone: UTC\n"
                                               "- Languages: English"})
    first = guard.refuse(call, turn)
    assert first is not None and not first.final and "UTC" in first.text
    turn.refused = 1
    again = guard.refuse(call, turn)
    assert again is not None and again.final
    fine = ToolCall("c2", "write", {"path": "memory/2026-03-02.md",
                                    "content": "- Sam lives in Porto."})
    assert guard.refuse(fine, turn) is None


def test_the_guard_refuses_a_note_of_a_value_the_person_corrected_since():
    guard = FoundedNotes()
    turn = TurnView(text="Please save what I told you.", messages=[
        Message.user(SAID),
        Message.assistant("Noted."),
        Message.user("Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired.")])
    old = ToolCall("c1", "write", {"path": "memory/2026-03-02.md", "content":
                                   "- Miso's vet: Dr. Almeida\n- Sister Rita: 12 March"})
    refused = guard.refuse(old, turn)
    assert refused is not None and "since corrected" in refused.text
    assert '"- Miso\'s vet: Dr. Almeida"' in refused.text and "Rita" not in refused.text
    new = ToolCall("c2", "write", {"path": "memory/2026-03-02.md", "content":
                                   "- Miso's vet is now Dr. Xavier Costa\n- Sister Rita: 12 March"})
    assert guard.refuse(new, turn) is None
