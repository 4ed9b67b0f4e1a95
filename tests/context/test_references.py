"""A compaction summary never loses the user's exact references.

The 1.5B model summarised "my budget for the Lisbon trip is 2400 euros in total" away; the
user's sentences holding numbers, names or identifiers the summary leaves out are now
appended to it word for word.
"""

from __future__ import annotations

import pytest

from clawd.config import Compaction
from clawd.context.compaction import summarize
from clawd.context.references import HEADING, references, users_words, with_users_words
from clawd.core.messages import Message
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from loopmodel import filler

pytestmark = pytest.mark.usefixtures("both_storages")

BUDGET = "By the way, my budget for the Lisbon trip is 2400 euros in total."
INES = "Note that my sister Ines arrives in Lisbon on May 14."


@pytest.mark.parametrize("sentence, exact, names", [
    (BUDGET, {"2400"}, {"Lisbon"}),
    (INES, {"14"}, {"Ines", "Lisbon", "May"}),
    ("The order code is ZX-4471 and the ticket OPS-1182.", {"ZX-4471", "OPS-1182"}, set()),
    ("See src/app.py and https://example.com/a?b=1 first.",
     {"src/app.py", "https://example.com/a?b=1"}, set()),
    ("Set MY_VAR to 3 in config.json at 10:30 on 2026-11-24, version v2.3.1.",
     {"MY_VAR", "3", "config.json", "10:30", "2026-11-24", "v2.3.1"}, set()),
    ("我的订单号是 ZX-4471。", {"ZX-4471"}, set()),
    ("Please suggest a plan for the week.", set(), set()),  # nothing exact to lose
])
def test_the_exact_references_of_a_sentence(sentence, exact, names):
    assert references(sentence) == (exact, names)


def chat(*texts: str) -> list[Message]:
    out = []
    for text in texts:
        out += [Message.user(text), Message.assistant("Sure, noted for the trip.")]
    return out


def test_a_sentence_whose_reference_the_summary_dropped_is_kept_word_for_word():
    summary = "## Goal\n- Plan a Lisbon trip; Ines arrives on May 14."
    kept = with_users_words(summary, chat(BUDGET, INES, "Suggest an itinerary."))
    assert kept == (f"{summary}\n\n{HEADING}\nSentences of the user's with numbers, names or "
                    f"identifiers the summary above leaves out, word for word:\n- {BUDGET}")
    # nothing missing: the summary is unchanged
    whole = summary + " The budget is 2400 euros."
    assert with_users_words(whole, chat(BUDGET, INES)) == whole


def test_only_the_users_own_sentences_count():
    flush = Message.user("Write notes about ZX-4471 to memory/2026-11-24.md", flush=True)
    messages = [Message.assistant("Your order ZX-4471 ships on Friday."), flush]
    assert users_words("## Goal\n- orders", messages) == []


def test_short_messages_and_more_references_come_first_within_the_budget():
    pasted = " ".join(f"Museum {i} in Belem opens at {i}:00 on Tuesday." for i in range(1, 40))
    messages = chat(pasted, BUDGET, "My passport number is X1234567 and it expires in 2031.")
    kept = users_words("## Goal\n- a trip", messages, max_chars=130)
    assert kept == [BUDGET, "My passport number is X1234567 and it expires in 2031."]
    assert len(users_words("## Goal\n- a trip", messages, max_chars=1000)) > 2  # then pasted


def test_words_kept_by_an_earlier_summary_are_carried_over():
    first = with_users_words("## Goal\n- a trip", chat(BUDGET))
    later = chat("Suggest a museum for Monday.")
    # the next summary folds in the first but drops the budget again
    second = with_users_words("## Goal\n- a trip with museums", later, previous=first)
    assert f"- {BUDGET}" in second and second.count(HEADING) == 1


def test_a_compaction_keeps_what_the_model_left_out(tmp_path):
    provider = ScriptedProvider(["## Goal\n- Plan a Lisbon trip."])
    summary = summarize(provider, chat(BUDGET, INES), previous_summary=None,
                        instructions=None, settings=Compaction())
    assert summary.text.startswith("## Goal\n- Plan a Lisbon trip.\n\n" + HEADING)
    assert f"- {BUDGET}" in summary.text and f"- {INES}" in summary.text


def test_the_session_sends_the_kept_words_after_compacting(tmp_path):
    provider = ScriptedProvider(default="Sure.")
    runtime = make_runtime(tmp_path, provider,
                           settings={"compaction": {"keepRecentTokens": 400,
                                                    "memoryFlush": {"enabled": False}}})
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn(BUDGET))
    for i in range(3):
        list(session.run_turn(f"Tell me about day {i}. {filler(300, i)}"))
    provider.add("## Goal\n- Plan a trip.")
    list(session.compact())
    assert f"- {BUDGET}" in session.history.summary
    list(session.run_turn("What is my budget?"))
    first = provider.requests[-1].messages[0]
    assert "## Goal\n- Plan a trip." in first.text and f"- {BUDGET}" in first.text
