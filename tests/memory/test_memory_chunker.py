"""Chunk boundaries, line ranges, overlap, headings and long lines."""

from __future__ import annotations

import itertools
import re

import pytest

from clawd.memory.chunk_parts import segment_chunks, split_tokens
from clawd.memory.chunker import TokenizedText, chunk_text, split_long_line


def words(text: str) -> int:
    return len(text.split())


def numbered(n: int, width: int = 10) -> str:
    return "\n".join(f"l{i} " + "w " * (width - 1) for i in range(1, n + 1))


def test_small_file_is_one_chunk_with_its_line_range():
    chunks = chunk_text("# Title\n\nfirst line\nsecond line\n", 400, 80, words)
    assert len(chunks) == 1
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 4)
    assert chunks[0].text == "# Title\n\nfirst line\nsecond line"
    assert chunks[0].heading == "Title"


def test_empty_and_blank_files_have_no_chunks():
    assert chunk_text("", 400, 80, words) == []
    assert chunk_text("\n\n  \n", 400, 80, words) == []


@pytest.mark.parametrize("lines,size,overlap", [(30, 40, 10), (50, 100, 20), (7, 25, 0)])
def test_chunks_cover_every_line_within_budget_and_overlap(lines, size, overlap):
    text = numbered(lines)
    chunks = chunk_text(text, size, overlap, words)
    covered = set()
    for chunk in chunks:
        assert words(chunk.text) <= size
        body = text.split("\n")[chunk.start_line - 1:chunk.end_line]
        assert chunk.text == "\n".join(body)  # the line range is exactly the text
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    assert covered == set(range(1, lines + 1))
    for a, b in itertools.pairwise(chunks):
        assert b.start_line > a.start_line
        shared = max(0, a.end_line - b.start_line + 1)
        assert shared * 10 <= overlap  # overlap is whole lines, at most `overlap` tokens
        if overlap >= 10:
            assert shared >= 1


def test_line_ranges_are_one_based_and_precise():
    text = "\n".join(f"line {i}" for i in range(1, 10))
    chunks = chunk_text(text, 6, 2, words)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 3), (3, 5), (5, 7), (7, 9)]


def test_a_new_section_starts_a_new_chunk_without_overlap():
    text = "# A\n" + numbered(3) + "\n## B\n" + numbered(2)
    chunks = chunk_text(text, 50, 10, words)
    assert [c.start_line for c in chunks] == [1, 5]
    assert chunks[1].text.startswith("## B")
    assert chunks[1].heading == "A > B"


def test_a_chunk_never_ends_on_a_heading():
    text = numbered(4) + "\n## Next\n" + numbered(4)
    for chunk in chunk_text(text, 45, 0, words):
        assert not chunk.text.split("\n")[-1].startswith("#")


def test_headings_inside_code_fences_are_not_sections():
    text = "# Doc\n```\n# not a heading\n```\ntext"
    chunk = chunk_text(text, 400, 80, words)[0]
    assert chunk.heading == "Doc"
    mid = chunk_text("# Doc\n```\n# comment\n" + numbered(20) + "\n```", 40, 0, words)
    assert all(c.heading == "Doc" for c in mid)


def test_heading_path_travels_with_later_chunks():
    text = "# Projects\n## Gateway\n" + numbered(20)
    chunks = chunk_text(text, 40, 0, words)
    assert len(chunks) > 2
    assert chunks[-1].heading == "Projects > Gateway"
    assert chunks[-1].context_text().startswith("Projects > Gateway\n")
    assert chunks[0].context_text() == chunks[0].text


def test_long_lines_are_split_and_keep_their_line_number():
    long = " ".join(f"t{i}" for i in range(250))
    chunks = chunk_text(f"intro\n{long}\noutro", 100, 0, words)
    assert all(words(c.text) <= 100 for c in chunks)
    pieces = [c for c in chunks if c.start_line == c.end_line == 2]
    assert len(pieces) >= 2
    rejoined = " ".join(" ".join(c.text.split()) for c in chunks)
    assert "t0" in rejoined and "t249" in rejoined


def test_split_long_line_prefers_spaces():
    pieces = split_long_line("aaa bbb ccc ddd", 2, words)
    assert pieces == ["aaa bbb ", "ccc ddd"]
    assert "".join(split_long_line("x" * 50, 1, lambda s: (len(s) + 9) // 10)) == "x" * 50


def test_default_counter_uses_the_token_estimator():
    chunks = chunk_text(numbered(200), 400, 80)
    assert len(chunks) > 1
    assert chunks[1].start_line < chunks[0].end_line  # overlapping by default


def word_tokens(texts: list[str], calls: list[list[str]] | None = None) -> list[TokenizedText]:
    """Whitespace-separated words as tokens (ids: their lengths)."""
    if calls is not None:
        calls.append(list(texts))
    found = [list(re.finditer(r"\S+", text)) for text in texts]
    return [TokenizedText([len(m.group()) for m in ms], [m.span() for m in ms]) for ms in found]


def test_segments_pack_lines_under_the_heading():
    chunk = chunk_text("# Day\n" + numbered(6, width=5), 400, 0, words)[0]
    (segments,) = segment_chunks([chunk], 11, word_tokens)
    assert all(s.text.startswith("Day\n") for s in segments)
    # 1 heading word + two lines of 5 words fill the 11-token budget
    assert len(segments) == 3
    assert segments[1].text.split("\n")[1:] == ["l3 w w w w ", "l4 w w w w "]
    # A segment's ids are those of its text: the model never tokenizes it again.
    for segment in segments:
        assert segment.ids == word_tokens([segment.text])[0].ids
    assert len(segment_chunks([chunk], 400, word_tokens)[0]) == 1


def test_each_distinct_line_is_tokenized_once_in_one_call():
    text = "# Day\n" + numbered(12, width=4)
    chunks = chunk_text(text, 20, 8, words)  # overlapping chunks share lines
    assert len(chunks) > 2
    calls: list[list[str]] = []
    segmented = segment_chunks(chunks, 6, lambda texts: word_tokens(texts, calls))
    assert len(calls) == 1 and len(calls[0]) == len(set(calls[0])) == 12 + 1
    assert [len(s) for s in segmented] == [len(c.text.split("\n")) - (c.start_line == 1)
                                          for c in chunks]


def test_a_chunk_of_headings_alone_is_one_segment():
    chunk = chunk_text("# A\n## B\n", 400, 0, words)[0]
    (segments,) = segment_chunks([chunk], 5, word_tokens)
    assert [s.text for s in segments] == [chunk.context_text()]


def test_long_lines_are_cut_by_tokens_at_spaces():
    line = "aaa bbb ccc ddd"
    pieces = split_tokens(line, word_tokens([line])[0], 2)
    assert pieces == [("aaa bbb ", [3, 3]), ("ccc ddd", [3, 3])]
    # Without a space in the second half of a piece, it is cut where the budget ends.
    glued = TokenizedText([1] * 5, [(i, i + 1) for i in range(5)])  # "abcde", one token a letter
    assert split_tokens("abcde", glued, 2) == [("ab", [1, 1]), ("cd", [1, 1]), ("e", [1])]
