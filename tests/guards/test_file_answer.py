"""A request to read a file is answered from the file: an answer made before any read is
dropped and asked again with the read to make, one that ignores what the read returned is
asked again once."""

from __future__ import annotations

import pytest

from clawd.core.events import Notice
from clawd.guards.reading import asked_files, asked_lines, uses
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime

LEASE = "Lease agreement\nTenant: Sam Moreira\nLandlord: Marta Okafor\nRent: 850 EUR\n"
ASKED = "Read docs/lease.txt and tell me who my landlord is."


@pytest.mark.parametrize("said, paths", [
    (ASKED, ["docs/lease.txt"]),
    ("What does notes/wifi.txt say about the router?", ["notes/wifi.txt"]),
    ("Open lease.md and summarise it.", ["lease.md"]),
    ("I saved the lease in docs/lease.txt.", []),  # a statement asks nothing
    ("What is 3.14 times 2?", []),
    ("Tell me who my landlord is.", []),
    ("Store alpha in notes.md.", []),  # a write, not a question about the file
])
def test_the_files_a_message_asks_about(said, paths):
    assert asked_files(said) == paths


@pytest.mark.parametrize("answer, used", [
    ("Your landlord is Marta Okafor.", True),
    ("The rent is 850 EUR.", True),
    ("It looks like you have the correct information.", False),
    ("Your landlord is the person named in docs/lease.txt.", False),
])
def test_an_answer_uses_the_file_when_it_holds_its_names_numbers_or_words(answer, used):
    assert uses(answer, LEASE, ASKED) is used


def session(tmp_path, provider, profile="weak"):
    runtime = make_runtime(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    runtime.files.write("docs/lease.txt", LEASE)
    return runtime, Session.open(runtime, KEY)


KEY = "agent:main:main"
READ = Reply("", [tool("read", path="docs/lease.txt")])


def test_an_answer_before_the_read_is_dropped_and_the_read_asked_for(tmp_path):
    provider = ScriptedProvider(["Your landlord is John Doe.", READ,
                                 "Your landlord is Marta Okafor."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    assert events[-1].text == "Your landlord is Marta Okafor."
    asked = provider.requests[1].messages[-1].text
    assert 'Call `read` with `path` "docs/lease.txt" now' in asked
    assert all("John Doe" not in m.text for m in s.history.messages)  # left the history
    assert any(isinstance(e, Notice) and "before docs/lease.txt was read" in e.text
               for e in events)


def test_an_answer_that_ignores_the_read_is_asked_again_once(tmp_path):
    provider = ScriptedProvider([READ, "It looks like you have the correct information.",
                                 "Your landlord is Marta Okafor, rent 850 EUR."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    assert events[-1].text == "Your landlord is Marta Okafor, rent 850 EUR."
    assert "does not use what it returned" in provider.requests[2].messages[-1].text


def test_an_answer_from_the_file_is_taken_and_a_strong_model_is_never_asked(tmp_path):
    for profile, replies in (("weak", [READ, "Marta Okafor."]),
                             ("strong", ["Your landlord is John Doe."])):
        provider = ScriptedProvider(replies)
        runtime, s = session(tmp_path / profile, provider, profile)
        events = list(s.run_turn(ASKED))
        assert events[-1].text == replies[-1]
        provider.assert_done()


def test_a_file_that_is_not_there_is_answered_as_it_is(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("read", path="docs/nothing.txt")]),
                                 "There is no docs/nothing.txt."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn("Read docs/nothing.txt and tell me what it says."))
    assert events[-1].text == "There is no docs/nothing.txt."
    provider.assert_done()


def test_a_file_in_the_context_needs_no_read(tmp_path):
    provider = ScriptedProvider(["AGENTS.md says to write things down."])
    runtime, s = session(tmp_path, provider)
    runtime.files.write("AGENTS.md", "# AGENTS.md\n\nWrite things down.\n")
    events = list(s.run_turn("What does AGENTS.md say about remembering things?"))
    assert events[-1].text == "AGENTS.md says to write things down."
    provider.assert_done()


def test_a_second_answer_that_still_ignores_the_file_ends_with_its_lines(tmp_path):
    """A 1.5B model asked again answered in JSON with a name the file does not hold: the
    answer stands, and the notice after it quotes the file's line the message asks about."""
    invented = '{"answer": "Your landlord is John Doe", "source": "docs/lease.txt"}'
    provider = ScriptedProvider([READ, "It looks like you have the correct information.",
                                 invented])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[-1] == ("the answer does not use what docs/lease.txt holds; it reads: "
                           "Landlord: Marta Okafor")
    provider.assert_done()


def test_a_second_answer_from_the_file_gets_no_notice(tmp_path):
    provider = ScriptedProvider([READ, "It looks like you have the correct information.",
                                 "Marta Okafor."])
    runtime, s = session(tmp_path, provider)
    events = list(s.run_turn(ASKED))
    assert not [e for e in events if isinstance(e, Notice) and "it reads" in e.text]


def test_the_lines_quoted_are_those_the_message_asks_about_else_the_first():
    assert asked_lines(LEASE, "How much is the rent?") == "Rent: 850 EUR"
    assert asked_lines(LEASE, "Summarise it.") == \
        "Lease agreement / Tenant: Sam Moreira / Landlord: Marta Okafor"


def test_a_turn_that_read_the_file_and_answered_nothing_ends_with_its_lines(tmp_path):
    """A 0.5B model read the lease, then answered nothing, twice."""
    provider = ScriptedProvider([READ, "", ""])
    runtime, s = session(tmp_path, provider)
    notices = [e.text for e in s.run_turn(ASKED) if isinstance(e, Notice)]
    assert notices[-2].startswith("the model returned an empty reply twice")
    assert notices[-1] == "what this turn did: docs/lease.txt reads: Landlord: Marta Okafor"


def test_a_file_the_model_never_read_though_asked_is_read_and_quoted_by_clawd(tmp_path):
    """A 1.5B model answered "I will read docs/lease.txt and provide you with …" before any
    read, and again when asked for the read."""
    provider = ScriptedProvider(["I will read docs/lease.txt and tell you.",
                                 "I will read docs/lease.txt and tell you."])
    runtime, s = session(tmp_path, provider)
    notices = [e.text for e in s.run_turn(ASKED) if isinstance(e, Notice)]
    assert notices[-1] == ("the model did not read docs/lease.txt, so clawd did; it reads: "
                           "Landlord: Marta Okafor")
    provider.assert_done()


def test_a_file_that_is_not_there_is_said_so_and_a_strong_model_is_left_alone(tmp_path):
    provider = ScriptedProvider(["It says hello.", "It says hello."])
    runtime, s = session(tmp_path, provider)
    said = "Read docs/none.txt and tell me what it says."
    notices = [e.text for e in s.run_turn(said) if isinstance(e, Notice)]
    assert notices[-1].startswith("the model did not read docs/none.txt: ")
    provider = ScriptedProvider(["Your landlord is John Doe."])
    runtime, s = session(tmp_path / "strong", provider, "strong")
    assert not [e for e in s.run_turn(ASKED) if isinstance(e, Notice)]
