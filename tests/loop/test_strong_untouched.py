"""What the weak profile adds to a turn, a summary and a flush, and a strong one leaves as
the model made it: a request to remember that no note holds is kept in the user's words
(``request_words``), the user's sentences a compaction summary left out are appended to it
(``summary_words``), and a flush's answer kept as notes loses the lines the notes hold
already and "I remember" before a fact (``flush_answer``)."""

from __future__ import annotations

import pytest

from clawd.config import Compaction
from clawd.context.compaction import summarize
from clawd.context.references import HEADING
from clawd.core.events import Notice
from clawd.core.messages import Message
from clawd.guards.profile import PROFILES, make_profile
from clawd.loop.runtime import ModelHandle, fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from loopmodel import filler

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
ASKED = "Remember that my sister Ines arrives in Lisbon on May 14."
BUDGET = "By the way, my budget for the Lisbon trip is 2400 euros in total."
pytestmark = pytest.mark.usefixtures("both_storages")


def session_with(tmp_path, provider, profile: str, **kw) -> Session:
    runtime = make_runtime(tmp_path, provider, **kw)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    return Session.open(runtime, KEY)


def test_the_three_are_the_weak_profiles_and_can_be_switched_one_by_one():
    weak, strong = PROFILES["weak"], PROFILES["strong"]
    assert weak.keeps_requests and weak.appends_users_words and weak.tidies_flush_answer
    assert not (strong.keeps_requests or strong.appends_users_words
                or strong.tidies_flush_answer)
    assert make_profile("strong", {"summary_words": True}).appends_users_words
    assert not make_profile("weak", {"request_words": False}).keeps_requests


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_request_no_note_holds_is_kept_in_the_users_words_under_the_weak_profile_only(
        tmp_path, profile):
    provider = ScriptedProvider(["Lisbon is lovely in May."])
    session = session_with(tmp_path, provider, profile)
    events = list(session.run_turn(ASKED))
    provider.assert_done()  # one request either way: keeping it costs the model nothing
    notices = [e.text for e in events if isinstance(e, Notice)]
    log = session.rt.files.read(DAILY)
    if profile == "weak":
        assert f"- {ASKED}" in log and notices[-1].startswith("your words were kept")
    else:  # the turn as the model ended it
        assert log is None and notices == []


def test_a_strong_profile_with_request_words_switched_on_keeps_the_request(tmp_path):
    provider = ScriptedProvider(["Lisbon is lovely in May."])
    runtime = make_runtime(tmp_path, provider)
    profile = make_profile("strong", {"request_words": True})
    runtime.models = lambda ref: ModelHandle(ref, 200_000, None, False, lambda: provider,
                                             profile)
    list(Session.open(runtime, KEY).run_turn(ASKED))
    assert f"- {ASKED}" in runtime.files.read(DAILY)


def test_summarize_appends_the_users_words_only_when_asked():
    messages = [Message.user(BUDGET), Message.assistant("Sure, noted for the trip.")]
    written = "## Goal\n- Plan a Lisbon trip."
    for users_words, appended in ((True, True), (False, False)):
        summary = summarize(ScriptedProvider([written]), messages, previous_summary=None,
                            instructions=None, settings=Compaction(), users_words=users_words)
        assert (HEADING in summary.text) is appended
        assert summary.text.startswith(written)
        if not appended:
            assert summary.text == written


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_compaction_summary_gets_the_users_words_under_the_weak_profile_only(
        tmp_path, profile):
    provider = ScriptedProvider(default="Sure.")
    session = session_with(tmp_path, provider, profile, settings={"compaction": {
        "keepRecentTokens": 400, "memoryFlush": {"enabled": False}}})
    list(session.run_turn(BUDGET))
    for i in range(3):
        list(session.run_turn(f"Tell me about day {i}. {filler(300, i)}"))
    provider.add("## Goal\n- Plan a trip.")
    list(session.compact())
    summary = session.history.summary
    if profile == "weak":
        assert f"- {BUDGET}" in summary
    else:  # the summary as the model wrote it
        assert summary == "## Goal\n- Plan a trip."


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_flush_answer_is_tidied_under_the_weak_profile_only(tmp_path, profile):
    answer = "- Lives in Porto.\n- I remember Sam is vegetarian.\n- Dentist: Dr. Sousa."
    provider = ScriptedProvider(["Nice.", answer])
    session = session_with(tmp_path, provider, profile)
    session.rt.files.write("MEMORY.md", "- Lives in Porto\n")
    list(session.run_turn("I live in Porto. My dentist is Dr. Sousa and Sam is vegetarian."))
    list(session.flush())
    provider.assert_done()  # the answer is neither blank nor bare: not asked again
    log = session.rt.files.read(DAILY)
    if profile == "weak":  # MEMORY.md's line left out, the fact without "I remember"
        assert "- Sam is vegetarian.\n- Dentist: Dr. Sousa." in log
        assert "Lives in Porto" not in log and "I remember" not in log
    else:  # the answer as the model wrote it
        assert answer in log


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_bare_acknowledgement_is_no_note_for_any_profile(tmp_path, profile):
    """"Done." from a flush that wrote nothing is kept nowhere, whatever the model: an
    acknowledgement is no fact (the weak profile asks once more for the facts first)."""
    provider = ScriptedProvider(["Nice.", "Done.", "Done."])
    session = session_with(tmp_path, provider, profile)
    list(session.run_turn("I live in Porto."))
    list(session.flush())
    try:
        log = session.rt.files.read(DAILY) or ""
    except OSError:
        log = ""
    assert "Done" not in log
