"""The one Markdown list-mark pattern every reader of list lines composes from."""

from __future__ import annotations

import pytest

from clawd.core import listmark
from clawd.guards.junk_notes import _body


@pytest.mark.parametrize("line, bare", [
    ("- milk", "milk"), ("  * eggs", "eggs"), ("+ tea", "tea"), ("12. step", "step"),
    ("3) item", "item"), ("-", ""), ("1234567890. no", "1234567890. no"),
    ("3.5 kg of flour", "3.5 kg of flour"), ("-5 degrees tonight", "-5 degrees tonight"),
    ("plain text", "plain text"),
])
def test_strip_takes_off_a_list_mark_and_nothing_else(line: str, bare: str) -> None:
    assert listmark.strip(line) == bare


def test_a_number_that_starts_a_note_is_not_taken_for_a_list_mark() -> None:
    # the note guard once read "3.5 kg" as the item "5 kg" and "-5 degrees" as "5 degrees"
    assert _body("3.5 kg of flour for the bread\n- -5 degrees on Friday") == [
        "3.5 kg of flour for the bread", "-5 degrees on Friday"]


def test_placeholder_is_a_template_bullet_that_only_says_what_goes_there() -> None:
    assert listmark.PLACEHOLDER.match("- (people — who they are)")
    assert listmark.PLACEHOLDER.match("  * (YYYY-MM-DD — what was decided)  ")
    assert not listmark.PLACEHOLDER.match("- Sam (my brother) is vegetarian")
    assert not listmark.PLACEHOLDER.match("(not a bullet)")
