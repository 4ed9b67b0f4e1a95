"""The parts a chunk is embedded as: sections, blank-line groups and lists, none too small,
not too many, and transcripts packed as before; and each list item as a part of its own."""

from __future__ import annotations

import re

import pytest

from clawd.memory import chunk_parts
from clawd.memory.chunk_parts import segment_chunks
from clawd.memory.chunker import TokenizedText, chunk_text


def words(text: str) -> int:
    return len(text.split())


def word_tokens(texts: list[str]) -> list[TokenizedText]:
    """Whitespace-separated words as tokens (ids: their lengths)."""
    found = [list(re.finditer(r"\S+", text)) for text in texts]
    return [TokenizedText([len(m.group()) for m in ms], [m.span() for m in ms]) for ms in found]


@pytest.fixture(autouse=True)
def sections_only(monkeypatch, request):
    """The section rule alone, unless a test asks for item parts (``items`` in its name)."""
    monkeypatch.setattr(chunk_parts, "ITEM_PARTS", "item" in request.node.name)


def texts(note: str, max_tokens: int = 96) -> list[str]:
    (chunk,) = chunk_text(note, 400, 80, words)
    (found,) = segment_chunks([chunk], max_tokens, word_tokens)
    for segment in found:  # a part's ids are those of its text
        assert segment.ids == word_tokens([segment.text])[0].ids
    return [s.text for s in found]


DAY = """# 2026-03-02

## Kitchen
- The dishwasher leaks from the door seal again, the repairman comes Friday.

## Car
- Winter tyres swapped back to summer ones at the garage on Elm Street.
"""


def test_each_section_is_a_part_under_its_heading_path():
    assert texts(DAY) == [
        "2026-03-02 > Kitchen\n- The dishwasher leaks from the door seal again, the "
        "repairman comes Friday.",
        "2026-03-02 > Car\n- Winter tyres swapped back to summer ones at the garage on Elm "
        "Street."]


def test_paragraph_groups_and_lists_are_parts():
    note = ("# Day\n\nCalled the bank about the mortgage and the fixed rate offer.\n\n"
            "Groceries for the whole week:\n- oat milk and eggs and spinach too\n"
            "- two lemons and a bag of rice\nThe basil on the balcony died but tomatoes "
            "are fine.\n")
    assert texts(note) == [
        "Day\nCalled the bank about the mortgage and the fixed rate offer.",
        # the lead-in is too small alone: it joins the list after it
        "Day\nGroceries for the whole week:\n- oat milk and eggs and spinach too\n"
        "- two lemons and a bag of rice",
        "Day\nThe basil on the balcony died but tomatoes are fine."]


def test_a_small_section_joins_the_part_before_it_with_its_heading():
    note = DAY + "\n## Mood\n- tired\n"
    found = texts(note)
    assert len(found) == 2
    assert found[1].endswith("Elm Street.\nMood\n- tired")
    # a small first section joins the part after it
    found = texts("# Day\n\n## Mood\n- tired\n\n## Car\n- Winter tyres swapped back to summer "
                  "ones at the garage today.\n")
    assert found == ["Day > Car\nMood\n- tired\n- Winter tyres swapped back to summer ones at "
                     "the garage today."]


def test_a_code_fence_is_never_split():
    note = ("# Setup\n\nInstall the tools first and then run the bootstrap script:\n\n```\n"
            "# not a heading\n\nmake bootstrap && make test && make install\n```\n")
    found = texts(note)
    assert len(found) == 2
    assert found[1] == ("Setup\n```\n# not a heading\nmake bootstrap && make test && make "
                        "install\n```")


def test_too_many_parts_are_packed_as_before():
    groups = "\n\n".join(f"Topic {i} has a line of eight words here." for i in range(12))
    note = f"# Day\n\n{groups}\n"
    found = texts(note, 40)  # 12 groups, each a part of its own if there were room
    assert 1 < len(found) <= chunk_parts.MAX_PARTS
    assert all(t.startswith("Day\n") for t in found)
    assert "Topic 0" in found[0] and "Topic 1" in found[0]


def test_a_transcript_is_packed_as_before(monkeypatch):
    lines = "\n".join(f"Speaker {i % 2}: line {i} of the talk with some words" for i in range(30))
    note = f"# Session 1\n\n{lines}\n"
    chunks = chunk_text(note, 400, 80, words)
    new = segment_chunks(chunks, 24, word_tokens)
    monkeypatch.setattr(chunk_parts, "SECTION_PARTS", False)
    old = segment_chunks(chunks, 24, word_tokens)
    assert new == old and len(new[0]) > 1


@pytest.mark.parametrize("note", ["# A\n## B\n", "# Only\n\n- one\n"])
def test_tiny_chunks_stay_one_part(note):
    assert len(texts(note)) == 1


def test_each_list_item_is_also_an_item_part_without_heading():
    note = ("# 2026-03-24\n\n## Work\n- Security audit findings: rotate the staging database "
            "credentials.\n- Offsite planning: venue shortlist is Lisbon or Porto.\n"
            "  budget 15k, two nights in late May\n- ok\n\nThe rest of the day was quiet "
            "and uneventful.\n")
    found = texts(note)
    assert found[:2] == [
        "2026-03-24 > Work\n- Security audit findings: rotate the staging database "
        "credentials.\n- Offsite planning: venue shortlist is Lisbon or Porto.\n  budget 15k, "
        "two nights in late May\n- ok",
        "2026-03-24 > Work\nThe rest of the day was quiet and uneventful."]
    # each item with its indented lines; "- ok" is too small to be a part of its own
    assert found[2:] == [
        "- Security audit findings: rotate the staging database credentials.",
        "- Offsite planning: venue shortlist is Lisbon or Porto.\n  budget 15k, two nights "
        "in late May"]


def test_item_parts_are_kept_when_a_chunk_is_packed_and_never_repeat_a_part():
    items = "\n".join(f"- Item {i} is a list line of about eight words." for i in range(12))
    groups = "\n\n".join(f"Topic {i} has a line of eight words here." for i in range(12))
    found = texts(f"# Day\n\n{items}\n\n{groups}\n", 40)
    assert sum(t.startswith("- Item ") for t in found) == 12  # packed, the items stay
    assert len(found) == len(set(found))
    # a single item that is its part already (no heading path) is not embedded twice
    assert texts("- The dishwasher leaks from the door seal again, the repairman comes.\n") \
        == ["- The dishwasher leaks from the door seal again, the repairman comes."]


def test_a_transcript_without_lists_has_no_item_parts(monkeypatch):
    lines = "\n".join(f"Speaker {i % 2}: line {i} of the talk with some words" for i in range(30))
    chunks = chunk_text(f"# Session 1\n\n{lines}\n", 400, 80, words)
    with_items = segment_chunks(chunks, 24, word_tokens)
    monkeypatch.setattr(chunk_parts, "ITEM_PARTS", False)
    assert with_items == segment_chunks(chunks, 24, word_tokens)
