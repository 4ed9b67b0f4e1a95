"""A model that may not curate MEMORY.md (the weak profile) still gets the person's own
facts there when a private session ends: in their words, dated, under ``## About the user``,
once; a model that curates it (strong) is left to do so."""

from __future__ import annotations

from clawd.core.events import Notice
from clawd.frontends.commands import Chat
from clawd.loop.keeping import promoted, with_lines_under
from clawd.loop.runtime import fixed_models
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime

TOLD = ["Hi! I'm Sam. I live in Porto, in the Bonfim neighbourhood.",
        "My sister Rita's birthday is on 12 March.",
        "How do I reverse a list in Python?",
        "Write a haiku about rain."]


def chat_and_end(tmp_path, profile):
    provider = ScriptedProvider(default="Noted.")
    runtime = make_runtime(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    chat = Chat.open(runtime, "agent:main:main")
    for text in TOLD:
        list(chat.handle(text))
    return runtime, list(chat.handle("/new"))


def test_the_facts_told_reach_memory_md_in_the_persons_words(tmp_path):
    runtime, events = chat_and_end(tmp_path, "weak")
    memory = runtime.files.read("MEMORY.md")
    assert memory == ("## About the user\n\n- I'm Sam. (2026-11-22)\n"
                      "- I live in Porto, in the Bonfim neighbourhood. (2026-11-22)\n"
                      "- My sister Rita's birthday is on 12 March. (2026-11-22)\n")
    assert any(isinstance(e, Notice) and "3 facts you told were added to MEMORY.md" in e.text
               for e in events)


def test_a_model_that_curates_memory_is_left_to_it(tmp_path):
    runtime, _ = chat_and_end(tmp_path, "strong")
    assert runtime.files.read("MEMORY.md") is None


def test_a_fact_memory_md_holds_is_not_added_again(tmp_path):
    from datetime import date

    from clawd.core.messages import Message
    memory = "# MEMORY.md\n\n## About the user\n\n- Lives in Porto (Bonfim).\n"
    lines = promoted(memory, [Message.user("I live in Porto, in Bonfim."),
                              Message.user("I have a cat called Miso.")], date(2026, 3, 2))
    assert lines == ["- I have a cat called Miso. (2026-03-02)"]


def test_lines_go_under_their_heading_before_the_next_one():
    memory = ("# MEMORY.md\n\n## About the user\n\n- (preferences)\n\n## People\n\n- x\n\n"
              "## Replaced\n\n- old\n")
    assert with_lines_under(memory, "About the user", ["- new"]) == (
        "# MEMORY.md\n\n## About the user\n\n- (preferences)\n- new\n\n## People\n\n- x\n\n"
        "## Replaced\n\n- old\n")
    assert with_lines_under("# M\n\n## Replaced\n\n- old\n", "About the user", ["- new"]) == (
        "# M\n\n## About the user\n\n- new\n\n## Replaced\n\n- old\n")


def test_a_fact_corrected_later_in_the_session_is_not_promoted():
    """Read on a real 1.5B run: the old vet reached MEMORY.md beside its correction, and
    MEMORY.md goes into the context unmarked."""
    from datetime import date

    from clawd.core.messages import Message
    told = [Message.user("My cat is called Miso and her vet is Dr. Almeida."),
            Message.user("Miso's vet is now Dr. Costa, Dr. Almeida retired.")]
    assert promoted("", told, date(2026, 11, 28)) == [
        "- Miso's vet is now Dr. Costa, Dr. Almeida retired. (2026-11-28)"]
