"""A request to remember is kept whatever the model does (the weak profile's
``request_words``): how a request is told from a mention of the word, whether the turn's
notes hold it, and the loop keeping it."""

from __future__ import annotations

import pytest

from clawd.context.requests import keep_requests, request_kept, to_keep
from clawd.core.events import Notice
from clawd.guards.profile import make_profile
from clawd.loop.runtime import ModelHandle, fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")


@pytest.mark.parametrize("message", [
    "Also remember: I'm allergic to peanuts.",
    "Please remember that my sister's name is Ines.",
    "Remember this. My locker code is 4471.",
    "Note that the router's admin port is 8443.",
    "Don't forget my budget is 2400 euros.",
    "Keep in mind that I'm vegetarian.",
    "Write this down: the NAS is called tern.",
    "Can you remember that Priya works as a nurse?",
    "Could you please note that the deploy is on Friday?",
    "I want you to remember that I prefer tabs over spaces.",
    "Add to your notes that the meeting moved to Thursday.",
    "Save this to your notes: the VPN password rotates monthly.",
    "Please store in memory that my flight lands at 14:05.",
    "ok, make a note: the dentist is on May 3",
    "Merk dir bitte, dass ich Vegetarier bin.",
    "N'oublie pas que Ines arrive le 14 mai.",
    "Recuerda que mi presupuesto es de 2400 euros.",
    "Keep the locker code in your notes: 4411.",
    "Read notes/router.txt and keep the router's admin port in your notes.",
    "Please read config/app.ini and remember the database name.",
    "Open notes/wifi.txt, then note the password hint.",
    "Can you save a note that the boiler was serviced in May?",
    "Save a note: my locker is 112.",
    "Please store a note that the spare key is with Ana.",
    "Could you save a note saying the plumber comes on Friday?",
    "Save a quick note: the gate code is 4471.",
    "I'd like you to save a note that Ana's birthday is 3 June.",
])
def test_a_request_to_remember_is_one(message):
    assert keep_requests(message) and to_keep(message)


@pytest.mark.parametrize("message", [
    "I need to remember to call Ines tomorrow.",
    "Do you remember what I said about the router?",
    "I remember when we went to Lisbon.",
    "Remember when we planned the Kyoto trip?",
    "My memory of that trip is vague.",
    "What did I note about the budget?",
    "The notes app crashed again.",
    "She keeps forgetting her keys.",
    "Save the file as report.md and run the tests.",  # a coding assistant's "save"
    "Log the request body before the retry.",
    "Record a video of the bug, please.",
    "Read the file and tell me the port.",
    "Read the logs and keep me posted.",
    "Keep going with the refactor.",
    "Check the notes and save the file.",
    "Save the note file as todo.md.",
    "Save a note template under docs/.",
    "Save a note.md file with the test output.",
    "Can you save a note I can print for the meeting?",
])
def test_a_mention_of_the_word_is_not(message):
    assert keep_requests(message) == [] and to_keep(message) == ""


def test_a_short_message_is_kept_whole_and_a_long_one_by_its_requests():
    assert keep_requests("Can you remember this?") and to_keep("Can you remember this?") == ""
    assert to_keep("Remember this.  My locker code is 4471.") == (
        "Remember this. My locker code is 4471.")
    long = ("Here is a long story about my week. " * 12 + "Please remember that the NAS is "
            "called tern. It runs Debian 12. " + "More talk follows here. " * 8)
    assert to_keep(long) == ("Please remember that the NAS is called tern. It runs Debian 12.")


def test_a_note_holds_a_request_when_it_has_its_references_and_most_words():
    request = "Also remember: I'm allergic to peanuts."
    assert request_kept(request, ["- Priya is allergic to peanuts"])
    assert not request_kept(request, ["- Priya likes tea"])
    assert not request_kept(request, [])
    assert request_kept("Remember my locker code is 4471.", ["- locker code: 4471"])
    # no number
    assert not request_kept("Remember my locker code is 4471.", ["- locker code noted"])


def session_with(tmp_path, provider, profile="weak", key=KEY, guards=None) -> Session:
    """A session under ``profile``, with ``guards`` switched on or off over it."""
    runtime = make_runtime(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    if guards:
        chosen = make_profile(profile, guards)
        runtime.models = lambda ref: ModelHandle(ref, 200_000, None, False, lambda: provider,
                                                 chosen)
    return Session.open(runtime, key)


def daily(session: Session) -> str:
    return session.rt.files.read(DAILY) or ""


def test_a_model_that_only_says_it_remembers_still_gets_the_fact_kept(tmp_path):
    """The issue's case: "I remember that Priya is allergic to peanuts." and no tool call,
    asked again, "I saved the note" and still none: the fact is on disk after the turn."""
    provider = ScriptedProvider(["I remember that Priya is allergic to peanuts.",
                                 "I saved the note that Priya is allergic to peanuts."])
    session = session_with(tmp_path, provider)
    events = list(session.run_turn("Also remember: I'm allergic to peanuts."))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[-1] == ("your words were kept in memory/2026-11-22.md, as you asked: "
                           "no note written in this turn holds them")
    log = daily(session)
    assert "## The user's words (10:00, asked to be remembered; the model wrote no note)" in log
    assert "- Also remember: I'm allergic to peanuts." in log
    provider.assert_done()


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_note_that_holds_the_request_is_not_kept_twice(tmp_path, profile):
    provider = ScriptedProvider([
        Reply("", [tool("write", path=DAILY, content="- Priya is allergic to peanuts\n",
                        append=True)]), "Noted."])
    session = session_with(tmp_path, provider, profile)
    events = list(session.run_turn("Also remember: I'm allergic to peanuts."))
    assert not any(isinstance(e, Notice) for e in events)
    assert daily(session).count("peanuts") == 1
    assert len(provider.requests) == 2  # the write and the answer: nothing more


def test_a_strong_model_makes_no_extra_request_and_its_turn_is_left_as_it_ended(tmp_path):
    """Keeping the words is the weak profile's (``request_words``): under "strong" the
    model's own answer stands."""
    provider = ScriptedProvider(["Got it, I'll keep that in mind."])
    session = session_with(tmp_path, provider, "strong")
    events = list(session.run_turn("Please remember that my sister's name is Ines."))
    assert len(provider.requests) == 1
    assert daily(session) == ""
    assert not any(isinstance(e, Notice) for e in events)


def test_a_mention_or_a_question_keeps_nothing(tmp_path):
    provider = ScriptedProvider(["Call her at noon.", "You said the router is on 8443."])
    session = session_with(tmp_path, provider)
    list(session.run_turn("I need to remember to call Ines tomorrow."))
    list(session.run_turn("Do you remember what I said about the router?"))
    assert daily(session) == ""


def test_a_group_session_keeps_nobodys_words_in_private_notes(tmp_path):
    provider = ScriptedProvider(["Sure."])
    session = session_with(tmp_path, provider, key="agent:main:group:team")
    events = list(session.run_turn("Remember that the deploy is on Friday."))
    assert daily(session) == "" and not any(isinstance(e, Notice) for e in events)


def test_a_failed_turn_still_keeps_what_was_asked(tmp_path):
    from clawd.core.errors import ProviderError

    provider = ScriptedProvider([ProviderError("Connection refused")])
    session = session_with(tmp_path, provider)
    events = list(session.run_turn("Remember my locker code is 4471."))
    assert events[-1].failed
    assert "- Remember my locker code is 4471." in daily(session)


ROUTER = "model: AX3000\nadmin_port = 8443\nssid: home-5g\nwan: dhcp\n"
ASK_FILE = "Read notes/router.txt and keep the router's admin port in your notes."


def test_a_request_to_read_a_file_and_keep_a_value_is_kept_with_the_lines_it_used(tmp_path):
    """The model read the file, answered, and wrote no note: the request is kept with the
    line of the file it is about, not the whole file."""
    provider = ScriptedProvider([Reply("", [tool("read", path="notes/router.txt")]),
                                 "The admin port is 8443."])
    session = session_with(tmp_path, provider)
    session.rt.files.write("notes/router.txt", ROUTER)
    events = list(session.run_turn(ASK_FILE))
    log = daily(session)
    assert f"- {ASK_FILE}\n  - from notes/router.txt: admin_port = 8443\n" in log
    assert "ssid" not in log and "AX3000" not in log
    assert any(isinstance(e, Notice) and e.text.startswith("your words were kept")
               for e in events)


def test_a_file_request_whose_value_the_model_noted_is_not_kept_twice(tmp_path):
    provider = ScriptedProvider([
        Reply("", [tool("read", path="notes/router.txt")]),
        Reply("", [tool("write", path=DAILY, content="- Router admin port: 8443\n",
                        append=True)]), "Noted: the admin port is 8443."])
    session = session_with(tmp_path, provider, "strong")
    session.rt.files.write("notes/router.txt", ROUTER)
    events = list(session.run_turn(ASK_FILE))
    assert not any(isinstance(e, Notice) for e in events)
    assert daily(session).count("8443") == 1


def test_a_file_request_the_model_never_read_keeps_the_request(tmp_path):
    """Under the strong profile with ``request_words`` switched on: no guard asks the model
    again (``file_answer``), and its one answer reads no file."""
    provider = ScriptedProvider(["I'm sorry, but I can't assist with that request."])
    session = session_with(tmp_path, provider, "strong", guards={"request_words": True})
    list(session.run_turn(ASK_FILE))
    assert f"- {ASK_FILE}\n" in daily(session) and "from notes/router.txt" not in daily(session)
