"""The flush fallback keeps facts, not requests: which sentences are facts, how a correction
is kept, and a weak model's flush that answers NO_REPLY twice, end to end."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from clawd.context.facts import Correction, as_note, correction, fact_text, facts, kind
from clawd.context.flush import unsaved_words
from clawd.core.events import Flushed
from clawd.core.messages import Message
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.workspace import DiskFiles

from conftest import make_runtime
from loopmodel import filler, is_flush, talk_until_flush

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")
DATA = Path(__file__).parents[1] / "data" / "fact_sentences.jsonl"


@pytest.mark.parametrize("sentence", [
    "I'm allergic to peanuts.", "I'm vegetarian.", "My sister is a nurse.",
    "my daughter plays the violin", "We decided to skip the conference this year.",
    "I prefer window seats.", "Moved to Porto last week.", "Going to Kyoto in April.",
    "My budget for the Lisbon trip is 2400 euros in total.", "Priya is allergic to shellfish.",
    "I can never remember my locker code, it's 4312.", "Had the best ramen in Shibuya.",
    "Did a 10k run this morning, my first one.", "When I was a kid we lived in Braga.",
    "Thanks, Ines is my sister.", "My neighbours help me with the garden.",
    "Work starts at 9 on Mondays.", "Plan is to leave at 8.",  # a noun first, not an order
])
def test_a_plain_statement_is_a_fact_with_or_without_a_number_or_a_name(sentence):
    assert kind(sentence) == "fact"
    assert fact_text(sentence) == sentence


@pytest.mark.parametrize("sentence", [
    "Suggest a 3-day itinerary for Kyoto.",
    "Read notes/router.txt and keep the router's admin port in your notes.",
    "Please summarise the article.", "Book a table for two at 8.", "Don't book the hotel yet.",
    "Can you check whether the museum is open on Mondays?",
    "could you recommend a vegetarian restaurant near Alfama",  # no '?'
    "what's the weather in Porto tomorrow", "how do I reset my router",
    "is the museum open on mondays", "Any idea why my tests fail on CI",
    "Let's go over the budget again.", "Let me know when the build finishes.",
    "I'd like you to compare the two laptops.", "I need a packing list for Iceland.",
    "I was wondering whether you could look at my CV.", "Remember to buy milk.",
    "Do you remember what my budget was?",
])
def test_a_sentence_that_asks_is_never_a_fact(sentence):
    assert kind(sentence) == "request"
    assert fact_text(sentence) is None


@pytest.mark.parametrize("sentence", [
    "thanks!", "ok cool", "Good morning!", "Sounds good to me.", "That makes sense.",
    "Never mind.", "This is a test.", "Hello, **this** is a test of the `REPL`",
    "I have a question about my tax return.", "You're very helpful.", "hmm",
])
def test_small_talk_is_neither(sentence):
    assert kind(sentence) == "other"


@pytest.mark.parametrize("sentence, kept", [
    ("Also remember: I'm allergic to peanuts.", "I'm allergic to peanuts."),
    ("Please note that I'm lactose intolerant.", "I'm lactose intolerant."),
    ("Can you remember that my locker is 42?", "my locker is 42"),
    ("Don't forget, my sister Ines is vegan.", "my sister Ines is vegan."),
    ("Can you save a note that the boiler was serviced in May?",
     "the boiler was serviced in May"),
    ("Save a quick note: the gate code is 4471.", "the gate code is 4471."),
    ("Could you save a note saying the plumber comes on Friday?",
     "the plumber comes on Friday"),
    ("I'd like you to remember that Ana's birthday is 3 June.", "Ana's birthday is 3 June."),
])
def test_a_request_to_keep_a_statement_keeps_the_statement(sentence, kept):
    assert kind(sentence) == "fact"
    assert fact_text(sentence) == kept


@pytest.mark.parametrize("sentence, new, old", [
    ("My server is called wren now, not tern.", "wren", "tern"),
    ("Actually, it's Maria, not Marta.", "Maria", "Marta"),
    ("I moved from Berlin to Porto.", "Porto", "Berlin"),
    ("We switched from Vodafone to MEO last month.", "MEO", "Vodafone"),
    ("Correction: my budget is 3000 euros, not 2400.", "3000 euros", "2400"),
    ("I changed my mind: we'll take the train instead of flying.", "the train", "flying"),
    ("Actually my sister's name is Ines.", "Ines", None),
])
def test_a_correction_has_its_new_and_old_value(sentence, new, old):
    assert correction(sentence) == Correction(new, old)


@pytest.mark.parametrize("sentence", [
    "I fly from Porto to Lisbon on Friday.", "My sister is a nurse.",
    "It's not far from the station.",
])
def test_a_statement_that_replaces_nothing_is_no_correction(sentence):
    assert correction(sentence) is None
    assert as_note(sentence) == sentence


def test_a_correction_is_kept_with_the_value_it_replaces():
    assert as_note("My server is called wren now, not tern.") == (
        "My server is called wren now, not tern. (correction: wren, replacing tern)")
    assert as_note("Actually my sister's name is Ines.") == (
        "Actually my sister's name is Ines. (correction: Ines, replacing what was said "
        "before)")


def test_the_facts_of_a_message_leave_its_requests_out():
    message = ("Thanks! I'm allergic to peanuts. Suggest a 3-day itinerary for Kyoto. "
               "Can you keep it cheap? My budget is 900 euros.")
    assert facts(message) == ["I'm allergic to peanuts.", "My budget is 900 euros."]


def test_a_title_before_a_name_does_not_end_the_sentence():
    """The fallback once kept "My vet is Dr." and lost the name."""
    assert facts("My vet is Dr. Almeida. Suggest a walk.") == ["My vet is Dr. Almeida."]
    assert facts("Our landlord is Mr. Duarte and he lives upstairs.") == [
        "Our landlord is Mr. Duarte and he lives upstairs."]


def test_the_labelled_sentences_are_well_formed():
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 40
    assert {r["label"] for r in rows} == {"fact", "request", "other"}
    assert all(r["label"] == "fact" for r in rows if "new" in r)
    assert all(set(r) <= {"sentence", "label", "new", "old"} for r in rows)


def test_unsaved_words_keep_facts_not_requests_and_not_what_a_note_holds(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-11-22.md").write_text(
        "# 2026-11-22\n\n- Ines lands at 14:05 on Friday\n- the NAS is called tern\n")
    conversation = [
        Message.user("Suggest a 3-day itinerary for Kyoto."), Message.assistant("Day 1: …"),
        Message.user("Also remember: I'm allergic to peanuts. Ines lands at 14:05 on Friday."),
        Message.assistant("Noted."),
        Message.user("Read notes/router.txt and keep the router's admin port in your notes."),
        Message.user("My server is called wren now, not tern. What's its IP again"),
        Message.user("My sister is a nurse."),
    ]
    assert unsaved_words(DiskFiles(tmp_path), conversation, date(2026, 11, 22)) == (
        "- I'm allergic to peanuts.\n"
        "- My server is called wren now, not tern. (correction: wren, replacing tern)\n"
        "- My sister is a nurse.")


def test_a_flush_that_answers_no_reply_twice_keeps_the_facts_not_the_requests(tmp_path):
    """The 1.5B model's flush answered NO_REPLY twice; the fallback saved "Suggest a 3-day
    itinerary for Kyoto." and left out "I'm allergic to peanuts" (no number, no name)."""
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    provider = ScriptedProvider()
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    for said in ("Suggest a 3-day itinerary for Kyoto.", "I'm allergic to peanuts.",
                 "Read notes/router.txt and keep the router's admin port in your notes.",
                 "My sister is a nurse, and my server is called wren now, not tern."):
        provider.add("Sure.")
        list(session.run_turn(said))
    # long pasted turns (not the user's own sentences) up to the flush point
    talk_until_flush(session, provider, say=lambda i: f"Here is part {i}: {filler(200, i)}")
    provider.add("NO_REPLY", "NO_REPLY", "Fine.")
    events = list(session.run_turn(f"one more {filler(400)}"))
    assert len([r for r in provider.requests if is_flush(r)]) == 2  # asked again once
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[DAILY])]
    log = runtime.files.read(DAILY)
    # the request to read and keep was kept at the end of its own turn, as asked, and so
    # was the correction, when it was told
    assert "## The user's words" in log and "- Read notes/router.txt" in log
    assert ("## Corrections (10:00, the user's correction)\n\n- My sister is a nurse, and "
            "my server is called wren now, not tern.\n") in log
    fallback = log.split("## Flush notes (", 1)[1]
    assert fallback.startswith("10:00, the user's own words: the model saved no notes)")
    assert "- I'm allergic to peanuts." in fallback
    assert "wren" not in fallback  # kept once
    assert "Kyoto" not in fallback and "router" not in fallback
    assert "Here is part" not in fallback
    provider.assert_done()
