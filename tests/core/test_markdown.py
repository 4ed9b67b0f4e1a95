"""Markdown for the terminal: styles, wrapping, code blocks, tables, and streaming in pieces."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clawd.frontends.markdown import MarkdownStream, cell_width

B, I, C, S, D, R = "\x1b[0;1m", "\x1b[0;3m", "\x1b[0;36m", "\x1b[0;9m", "\x1b[0;2m", "\x1b[0m"  # noqa: E741


def render(text: str, width: int = 80, step: int = 0) -> str:
    """The whole text at once, or in pieces of ``step`` characters."""
    md = MarkdownStream(width)
    pieces = [text[i:i + step] for i in range(0, len(text), step)] if step else [text]
    return "".join(md.feed(p) for p in pieces) + md.finish()


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.parametrize("text, expected", [
    ("# Title\n", f"{B}Title{R}\n"),
    ("### A *b*\n", f"{B}A \x1b[0;1;3mb{R}\n"),
    ("a **b** *c* or _d_ `e` ~~f~~\n",
     f"a {B}b{R} {I}c{R} or {I}d{R} {C}e{R} {S}f{R}\n"),
    ("*one phrase* *and another*\n", f"{I}one phrase and another{R}\n"),
    ("`a **b** c`\n", f"{C}a **b** c{R}\n"),
    ("``a ` b``\n", f"{C}a ` b{R}\n"),
    ("**bold phrase**\n", f"{B}bold phrase{R}\n"),
    # marks that do not open or close are text
    ("2 * 3 * 4 and snake_case_name\n", "2 * 3 * 4 and snake_case_name\n"),
    ("**never closed and `one tick\n", "**never closed and `one tick\n"),
    ("\\*not italic\\* a\\_b\n", "*not italic* a_b\n"),
    ("#hashtag is not a heading\n", "#hashtag is not a heading\n"),
    ("plain text\n", "plain text\n"),
    ("no newline at the end", "no newline at the end\n"),
    ("", ""),
])
def test_inline_styles(text, expected):
    assert render(text) == expected


@pytest.mark.parametrize("text, width, expected", [
    ("the quick brown fox jumps over the lazy dog\n", 20,
     "the quick brown fox\njumps over the lazy\ndog\n"),
    ("- one two three four five six\n", 20, "• one two three four\n  five six\n"),
    ("  * nested item with words\n", 20, "  • nested item with\n    words\n"),
    ("10. alpha beta gamma delta\n", 20, "10. alpha beta gamma\n    delta\n"),
    ("- \n", 20, "•\n"),
    ("> quoted words that wrap here\n", 20, "│ quoted words that\n│ wrap here\n"),
    ("> > deeper\n", 20, "│ │ deeper\n"),
    ("## a heading that is long\n", 20, "a heading that is\nlong\n"),
    ("   indented text keeps its indent\n", 20, "   indented text\n   keeps its indent\n"),
    ("see https://example.com/a/very/long/path ok\n", 20,
     "see\nhttps://example.com/\na/very/long/path ok\n"),
    ("---\n", 20, "─" * 20 + "\n"),
    ("* * *\n", 20, "─" * 20 + "\n"),
    ("漢字漢字漢字 漢字漢字漢字\n", 20, "漢字漢字漢字\n漢字漢字漢字\n"),
    ("one\n\ntwo\n", 20, "one\n\ntwo\n"),
])
def test_blocks_wrap_at_word_boundaries(text, width, expected):
    out = render(text, width)
    assert plain(out) == expected
    assert all(cell_width(line) <= width for line in plain(out).splitlines())


def test_styles_survive_wrapping_and_end_each_row():
    out = render("**bold words that wrap across rows** then plain\n", 22)
    assert out == (f"{B}bold words that wrap{R}\n"
                   f"{B}across rows{R} then plain\n")


def test_code_blocks_are_never_wrapped_and_highlighted():
    code = "def f(x):\n    return x + 1  # a comment that is much longer than the width\n"
    out = render(f"```python\n{code}```\nafter\n", 20)
    lines = out.splitlines()
    assert lines[0] == f"{D}```python{R}" and lines[3] == f"{D}```{R}"
    assert plain("\n".join(lines[1:3])) + "\n" == code  # the code itself, whole
    assert "\x1b[" in lines[1] and "\x1b[" in lines[2]  # coloured
    assert lines[4] == "after"


def test_code_keeps_multiline_strings_and_blank_lines():
    code = 'x = """\n\n**not markdown**\n"""\n\ny = 1\n'
    out = render(f"~~~py\n{code}~~~\n")
    assert plain(out) == f"~~~py\n{code}~~~\n"
    string_line = out.splitlines()[3]
    assert string_line.startswith("\x1b[") and B not in string_line  # a string, not bold


@pytest.mark.parametrize("fence", ["```", "```nosuchlanguage"])
def test_code_without_a_known_language_is_plain(fence):
    assert render(f"{fence}\n**x** = 1\n```\n") == f"{D}{fence}{R}\n**x** = 1\n{D}```{R}\n"


def test_an_unclosed_fence_ends_with_the_reply():
    md = MarkdownStream(40)
    assert plain(md.feed("```\nx = 1\n") + md.finish()) == "```\nx = 1\n"
    assert md.feed("**b**\n") == f"{B}b{R}\n"  # the next reply is prose again


TABLE = """| Name | Count | Notes |
|:-----|------:|:----:|
| apple | 3 | **ripe** |
| kiwi fruit | 12 | `a|b` |
"""


def test_table_columns_are_aligned():
    out = render(TABLE + "after\n")
    assert plain(out) == ("Name       │ Count │ Notes\n"
                          "───────────┼───────┼──────\n"
                          "apple      │     3 │ ripe\n"
                          "kiwi fruit │    12 │  a|b\n"
                          "after\n")
    assert f"{B}Name{R}" in out and f"{B}ripe{R}" in out and f"{C}a|b{R}" in out


def test_a_wide_table_wraps_inside_its_cells():
    table = ("| key | description |\n|---|---|\n"
             "| a | a description long enough to need several rows |\n")
    out = plain(render(table, 30))
    assert all(cell_width(line) <= 30 for line in out.splitlines())
    assert out.splitlines()[2:] == ["a   │ a description long",
                                    "    │ enough to need several",
                                    "    │ rows"]


def test_a_pipe_line_without_a_delimiter_row_is_prose():
    assert render("| not a table\nnext\n") == "| not a table\nnext\n"
    assert render("|a|\n") == "|a|\n"
    assert render("|\n|-|\n") == "|\n|-|\n"  # no column


def test_a_table_is_held_until_it_ends():
    md = MarkdownStream(80)
    assert md.feed(TABLE) == ""
    assert plain(md.feed("\n")).startswith("Name ")
    md = MarkdownStream(80)
    md.feed(TABLE)
    assert plain(md.finish()).endswith("kiwi fruit │    12 │  a|b\n")


def test_a_long_line_streams_row_by_row():
    md = MarkdownStream(20)
    assert md.feed("short") == ""  # held: the line is not finished
    first = md.feed(" words then a few more wor")
    assert first == "short words then a\n"  # a full row is known: let out at once
    assert md.feed("ds and") == ""  # "few more words": the next word may still fit
    assert md.feed(" the end\n") == "few more words and\nthe end\n"


def test_a_long_table_row_or_fence_is_not_streamed_early():
    md = MarkdownStream(20)
    assert md.feed("| a very long table header cell | b") == ""
    md = MarkdownStream(20)
    assert md.feed("```a-language-name-longer-than-the-width") == ""


DOCUMENT = ("# Notes\nSome **bold text** and *italic words* with `inline code` in a line "
            "long enough to wrap, and then more.\n\n- a list item that wraps around because "
            "it is long\n  1. nested\n> quoted *text* here\n\n```python\nprint('hi')  # "
            "comment\n```\n\n" + TABLE + "\n---\nThe end, ~~struck~~ and done.")


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 16])
def test_pieces_render_as_the_whole(step):
    assert render(DOCUMENT, 30, step) == render(DOCUMENT, 30)


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12)


@given(st.lists(st.lists(words, min_size=1, max_size=30), min_size=1, max_size=5),
       st.integers(min_value=20, max_value=60), st.integers(min_value=1, max_value=40))
def test_wrapping_keeps_every_word_within_the_width(paragraphs, width, step):
    text = "\n".join(" ".join(p) for p in paragraphs) + "\n"
    out = render(text, width, step)
    assert out == render(text, width)
    assert all(cell_width(line) <= width for line in out.splitlines())
    assert out.split() == text.split()


@given(st.text(alphabet="ab 12|-:*_~`#>\\.\n\t漢", max_size=200),
       st.integers(min_value=1, max_value=50), st.integers(min_value=1, max_value=30))
def test_any_text_renders_whole_in_any_pieces(text, width, step):
    """Nothing the model writes breaks the renderer, and its words all arrive, in order."""
    out = plain(render(text, width, step))
    significant = lambda s: [c for c in s if c.isalnum() or c == "漢"]  # noqa: E731
    assert significant(out) == significant(text)
