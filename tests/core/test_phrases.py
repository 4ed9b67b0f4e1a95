"""The shared phrase lists: one list of fillers and of other languages' requests to keep,
read the same by the request detector and the fact selector."""

from __future__ import annotations

import pytest

from clawd.context.facts import kept_statement
from clawd.context.requests import keep_requests
from clawd.core import phrases


@pytest.mark.parametrize("lead", ["", "Please ", "Oh and also, ", "One more thing: ",
                                  "Well, ", "Um, kindly ", "So — "])
def test_fillers_before_a_request_change_nothing(lead):
    sentence = f"{lead}remember that my locker is 42."
    assert keep_requests(sentence) == [sentence]
    assert kept_statement(sentence) == "my locker is 42."


@pytest.mark.parametrize("sentence, statement", [
    ("Merk dir: mein Schließfach ist 42.", "mein Schließfach ist 42."),
    ("N'oublie pas que ma sœur arrive le 14 mai.", "ma sœur arrive le 14 mai."),
    ("Recuerda que mi hermana llega el 14 de mayo.", "mi hermana llega el 14 de mayo."),
    ("Vergiss nicht, Ines kommt am Freitag.", "Ines kommt am Freitag."),
])
def test_requests_to_keep_in_other_languages_are_read_by_both(sentence, statement):
    assert keep_requests(sentence) == [sentence]
    assert kept_statement(sentence) == statement


def test_a_filler_is_a_whole_word():
    assert phrases.LEADING_FILLERS.match("Sorry, remember").group(0) == ""
    assert phrases.LEADING_FILLERS.match("okay so remember").group(0) == "okay so "


def test_words_keep_apostrophes_straight_or_curly():
    assert phrases.words("I’m SURE it's done.") == ["i'm", "sure", "it's", "done"]
