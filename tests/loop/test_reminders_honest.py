"""Until clawd can schedule, a reminder asked for is answered honestly: the model is told in
that turn that nothing can notify at a time, the request is kept in today's log, a notice
says so, and a weak model's ``exec`` "reminder" is not run."""

from __future__ import annotations

import pytest

from clawd.context.requests import asks_reminder
from clawd.core.events import Notice, ToolFinished
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime

KEY = "agent:main:main"
TODAY = "memory/2026-11-22.md"
ASKED = "Remind me tomorrow at 9 to call the landlord."


@pytest.mark.parametrize("said, asks", [
    (ASKED, True),
    ("Can you remind me on Friday at 6pm to water the plants?", True),
    ("Remind me in 2 hours to restring my bass.", True),
    ("Please remind me next Monday to renew my bike insurance.", True),
    ("Set a reminder for the dentist.", True),
    ("Ping me in an hour.", True),
    ("Remind me what we decided about the API.", False),
    ("Remind me who my landlord is.", False),
    ("Can you remind me when my sister arrives?", False),
    ("Write a function that sends a reminder email.", False),
    ("Call me Sam.", False),
])
def test_a_reminder_is_told_from_a_question_about_the_past(said, asks):
    assert asks_reminder(said) is asks


def session(tmp_path, provider, profile="weak"):
    runtime = make_runtime(tmp_path, provider, allow_exec=True)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    return runtime, Session.open(runtime, KEY)


def test_the_model_is_told_in_that_turn_only_and_the_request_is_kept(tmp_path):
    provider = ScriptedProvider(["I can't remind you at a time, sorry.", "Sure."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    first = provider.requests[0].messages[-1].text
    assert first.startswith("[From clawd, not the user: nothing can remind the user at a "
                            "later time") and first.endswith(ASKED)
    # a weak model copies what it is told: it is given the sentence to say, to the user
    assert "\"I can't remind you at a set time: clawd has no reminders yet" in first
    assert runtime.files.read(TODAY) == (
        "# 2026-11-22\n\n## Reminders asked for (10:00, asked for a reminder: clawd cannot "
        f"notify at a time yet)\n\n- {ASKED}\n")
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == ["clawd cannot notify you at a set time yet: nothing will remind you; "
                       f"the request is kept in {TODAY}"]
    list(s.run_turn("Thanks. What is 2 + 2?"))
    assert all("From clawd" not in m.text for m in provider.requests[1].messages)
    assert s.history.messages[0].text == ASKED  # the transcript keeps the words as typed


def test_a_weak_models_exec_reminder_is_not_run(tmp_path):
    fake = Reply("", [tool("exec", command="echo 'Call the landlord at 9'")])
    provider = ScriptedProvider([fake, "I cannot remind you at a time."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    [done] = [e for e in events if isinstance(e, ToolFinished)]
    assert done.is_error and done.text.startswith("not run: a command run now reminds nobody")
    assert provider.requests[1].tool_choice == "none"


def test_exec_runs_in_a_turn_that_asks_for_no_reminder(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("exec", command="echo hi")]), "hi"])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn("Run echo hi for me."))
    [done] = [e for e in events if isinstance(e, ToolFinished)]
    assert not done.is_error and "hi" in done.text
