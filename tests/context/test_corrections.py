"""Which sentences change a value, and which older note lines still say the old one."""

from __future__ import annotations

import pytest

from clawd.context.corrections import changes_in, replaced

NOTES = [
    "My cat is called Miso and her vet is Dr. Almeida at Clinica Boavista.",
    "- Dr. Almeida is the veterinarian at Clinica Boavista.",
    "- Kyoto trip: October",
    "Our drummer is Kofi and we rehearse every Thursday at 8pm.",
    "My dentist is Dr. Visser and my appointment is on 3 February.",
    "- Rita's birthday is on 12 March.",
    "Ana lives in Lisbon.",
    "My phone number is 912 000 111.",
    "- Moved to Lisbon in 2020.",
]


@pytest.mark.parametrize("said, lines", [
    ("Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired. Please update your notes.",
     NOTES[:2]),
    ("Correction: the Kyoto trip moved to November, not October.", [NOTES[2]]),
    ("Our rehearsals are on Wednesdays now, not Thursdays.", [NOTES[3]]),
    ("The dentist appointment moved from 3 February to 10 February.", [NOTES[4]]),
    ("My phone number is now 913 222 333.", [NOTES[7]]),
    ("I moved from Lisbon to Porto.", [NOTES[8]]),  # never "Ana lives in Lisbon"
])
def test_a_correction_replaces_the_lines_that_say_the_old_value(said, lines):
    [found] = changes_in(said)
    assert [line for line in NOTES if replaced(found, line)] == lines


@pytest.mark.parametrize("said", [
    "What is my vet now?", "It is now 5pm.", "Now is the time to plan.",
    "My sister Rita's birthday is on 12 March.", "Write a poem about autumn now.",
    "I just moved to Utrecht with my dog Bruno.",  # a move, with nothing it replaces
    "We finally moved to Braga.",
])
def test_a_question_a_time_or_a_plain_fact_changes_nothing(said):
    assert changes_in(said) == []


def test_a_line_that_says_the_new_value_is_not_replaced():
    [found] = changes_in("Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired.")
    assert not replaced(found, "- Miso's vet is now Dr. Xavier Costa; Dr. Almeida retired.")
