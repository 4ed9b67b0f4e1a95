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
    "She now works at Bosch.", "We now meet on Thursdays.",  # whose? nothing to replace
    "Also, I work at Siemens.", "By the way, I love hiking.",
])
def test_a_question_a_time_or_a_plain_fact_changes_nothing(said):
    assert changes_in(said) == []


def test_a_line_that_says_the_new_value_is_not_replaced():
    [found] = changes_in("Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired.")
    assert not replaced(found, "- Miso's vet is now Dr. Xavier Costa; Dr. Almeida retired.")


# What a person says of someone, and what they correct later; each line is one note line.
PEOPLE = [
    "Tom lives in Bergen.",
    "Tom's birthday is on 3 May.",
    "Tom works at Equinor.",
    "My sister Ingrid lives in Tromsø.",
    "Ingrid is a nurse.",
    "Miso's vet visit is on Friday.",
    "Miso's vet is Dr. Almeida.",
    "- Team meeting: Thursdays at 10",
    "The party is at 7pm on Saturday.",
    "- My sister's name is Ingrid and she lives in Tromsø.",
]


@pytest.mark.parametrize("said, lines", [
    ("Tom moved to Oslo.", [PEOPLE[0]]),
    ("Actually, Tom moved to Oslo.", [PEOPLE[0]]),
    ("Correction: Ingrid moved to Bergen last month.", [PEOPLE[3], PEOPLE[9]]),
    ("Update: my sister Ingrid moved to Bergen.", [PEOPLE[3], PEOPLE[9]]),
    ("Miso's vet is now Dr. Xavier Costa.", [PEOPLE[6]]),
    ("The team meeting is on Fridays now.", [PEOPLE[7]]),
    ("Actually, the party is at 8pm.", [PEOPLE[8]]),
    ("Actually, Miso's vet is Dr. Costa.", [PEOPLE[6]]),
])
def test_a_change_with_no_old_value_replaces_only_what_said_that_value(said, lines):
    """With no old value named, a line is replaced when it says the same thing of the same
    subject: where someone lives for a move, the subject's value ("… is …", "…: …") for the
    rest; never another fact of that subject (Tom's birthday, where he works, the vet's
    visit). An opening ("Correction:", "Update:", "Actually,") is not part of the change."""
    [found] = changes_in(said)
    assert [line for line in PEOPLE if replaced(found, line)] == lines


@pytest.mark.parametrize("said, line, replaces", [
    ("Actually the flight leaves at 7:15.", "The flight leaves at 6:40.", True),
    ("The meeting changed to Friday.", "The meeting is on Thursday.", True),
    ("The meeting moved to Friday.", "The meeting is on Thursday.", True),
    ("The meeting moved to Friday.", "The meeting was long.", False),
    ("Tom moved to Oslo.", "Tom is in Bergen.", True),
    ("Tom moved to Oslo.", "Tom is a doctor.", False),
])
def test_what_a_line_must_say_to_be_replaced_follows_the_change(said, line, replaces):
    """A move replaces where someone is (or when a meeting is); otherwise the line gives
    the subject its value ("the flight leaves at …")."""
    [found] = changes_in(said)
    assert replaced(found, line) is replaces


FAMILY = [
    "My friend Joao lives in Braga.",
    "Joao's wife is called Marta.",
    "My son Leo studies at Porto University.",
    "Leo plays football on Saturdays.",
    "My boss Karen works at Siemens.",
    "Karen's office is on the 3rd floor.",
    "Grandma lives in Coimbra.",
    "Grandma's cat is called Tiger.",
    "The book club meets on Tuesdays.",
    "The book club's next book is Dune.",
    "Our dentist is Dr. Silva.",
    "The gym is at 7am.",
]


@pytest.mark.parametrize("said, lines", [
    ("Joao relocated to Aveiro.", [FAMILY[0]]),
    ("Also, grandma moved back to Lisbon.", [FAMILY[6]]),
    ("Leo now studies at Lisbon University.", [FAMILY[2]]),
    ("Karen works at Bosch now.", [FAMILY[4]]),
    ("By the way, the book club meets on Thursdays now.", [FAMILY[8]]),
    ("Update: our dentist is now Dr. Ramos.", [FAMILY[10]]),
    ("Oh, and the gym is at 6am now.", [FAMILY[11]]),
    ("Joao's wife moved to Faro.", []),
    ("Leo moved to the under-14 team.", []),
])
def test_a_change_in_other_words_replaces_what_said_the_old_value(said, lines):
    """"relocated", "moved back", "now lives / works / studies …", "… now" after a verb,
    and more openings ("Also,", "By the way,", "Oh, and"); a move of someone's wife or
    team replaces no line that does not say where they are."""
    assert [line for line in FAMILY if any(replaced(found, line)
                                          for found in changes_in(said))] == lines
