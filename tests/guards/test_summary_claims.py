"""``founded_summary``: a compaction summary's lines that claim what the history never said
are left out (the weak profile's ``summary_claims``); the loop's use of it is tested in
``tests/loop/test_compaction_loop.py``."""

from __future__ import annotations

from clawd.guards.junk_notes import founded_summary

HISTORY = ("user: My budget for the kitchen renovation is 8,500 euros.\n"
           "user: Actually the budget went up to 9,000 because of the sink.\n"
           "user: The fitter, Rui, starts on 3 February.")


def test_a_number_or_name_nothing_said_is_left_out():
    summary = ("## Budget\n- The budget is 9,000 euros, the sink included.\n"
               "- The fitter, Rui, starts on 7 February.\n- The tiles were chosen by Marta.")
    kept, dropped = founded_summary(summary, HISTORY)
    assert dropped == ["- The fitter, Rui, starts on 7 February.",
                       "- The tiles were chosen by Marta."]
    assert "9,000 euros" in kept and founded_summary("- It costs 9000 euros.", HISTORY)[1] == []


def test_a_number_is_not_found_inside_another():
    """"5" is not said by "8,500" (the history without its thousands separators once held it
    as "8500", and a substring was taken for the number)."""
    assert founded_summary("- The fitter starts on 5 February.", HISTORY)[1] == [
        "- The fitter starts on 5 February."]


def test_a_numbered_list_s_marks_are_not_claims():
    """A 0.5B model numbered its lines ("4. The sink included."): "4" is the list's, not a
    number the summary claims."""
    summary = "Changes:\n1. The budget went up to 9,000.\n4. The sink included.\n2) Rui starts."
    assert founded_summary(summary, HISTORY) == (summary, [])
    kept, dropped = founded_summary("1. The fitter starts on 4 March.", HISTORY)
    assert dropped == ["1. The fitter starts on 4 March."]
