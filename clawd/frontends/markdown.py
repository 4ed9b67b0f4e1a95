"""Markdown for the terminal, rendered as a reply streams.

``MarkdownStream.feed(delta)`` returns styled text (ANSI) ready to write, made of whole rows:
the incomplete line is held back, except that a long prose line is let out row by row as soon
as each row is known, so a long paragraph still streams. Paragraphs, list items (with a
hanging indent), block quotes and headings (bold) are wrapped at word boundaries to ``width``;
fenced code blocks are never wrapped and are highlighted by pygments when it is installed
(imported at the first fence); a table is held until its last row, then its columns are
aligned, and wrapped inside their cells when the table is wider than the terminal. Inline
``**bold**``, ``*italic*``, ``~~strike~~`` and `` `code` `` are styled; links and HTML are
left as written. ``finish()`` lets out what is still held. Pure: no terminal and no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

BOLD, ITALIC, CODE, STRIKE, DIM = 1, 2, 4, 8, 16
_SGR = ((BOLD, "1"), (ITALIC, "3"), (CODE, "36"), (STRIKE, "9"), (DIM, "2"))
RESET = "\x1b[0m"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_HEADING = re.compile(r" {0,3}#{1,6}(\s+|$)")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])(\s+|$)")
_QUOTE = re.compile(r" {0,3}>\s?")
_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_HIGHLIGHT_WINDOW = 60  # code lines re-read for the colours of the next one


def cell_width(text: str) -> int:
    """Terminal cells taken by ``text``: wide East Asian characters take two, combining
    marks none."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _sgr(style: int) -> str:
    codes = [code for flag, code in _SGR if style & flag]
    return f"\x1b[0;{';'.join(codes)}m" if codes else RESET


# --- inline styles --------------------------------------------------------------------------

Word = list[tuple[str, int]]  # the characters of a word, each with its style


@dataclass
class _Inline:
    """The styles open at some point of a line (``ticks``: the backtick run that opened the
    code span under way, 0 outside one)."""
    style: int = 0
    ticks: int = 0


def _words(raw: str, start: int, end: int, state: _Inline, final: bool) -> list[Word]:
    """The words of ``raw[start:end]`` with their styles, updating ``state``.

    ``raw`` is everything known of the line; ``final`` says it is all of it. An opening mark
    counts only when its closing one follows in the line, or may still come."""
    words: list[Word] = []
    word: Word = []

    def closes_later(mark: str, at: int) -> bool:
        return not final or raw.find(mark, at + 1) != -1

    i = start
    while i < end:
        c = raw[i]
        if state.ticks:
            if c == "`":
                run = len(raw[i:]) - len(raw[i:].lstrip("`"))
                if run == state.ticks:
                    state.ticks, state.style = 0, state.style & ~CODE
                else:
                    word += [("`", state.style)] * run
                i += run
                continue
        elif c == "\\" and i + 1 < end and not raw[i + 1].isalnum() and not raw[i + 1].isspace():
            word.append((raw[i + 1], state.style))
            i += 2
            continue
        elif c == "`":
            run = len(raw[i:]) - len(raw[i:].lstrip("`"))
            if closes_later("`" * run, i + run - 1):
                state.ticks, state.style, i = run, state.style | CODE, i + run
                continue
            word += [("`", state.style)] * run
            i += run
            continue
        elif c in "*_~":
            run = 2 if raw.startswith(c * 2, i) else 1
            flag = STRIKE if c == "~" else BOLD if run == 2 else ITALIC
            before = raw[i - 1] if i > 0 else " "
            after = raw[i + run] if i + run < len(raw) else " "
            intraword = c == "_" and before.isalnum() and after.isalnum()
            if c == "~" and run == 1 or intraword:
                pass
            elif state.style & flag and not before.isspace():
                state.style &= ~flag
                i += run
                continue
            elif not state.style & flag and not after.isspace() and closes_later(c * run,
                                                                                 i + run):
                state.style |= flag
                i += run
                continue
        if c.isspace():
            if word:
                words.append(word)
                word = []
        else:
            word.append((c, state.style))
        i += 1
    if word:
        words.append(word)
    return words


def _width(word: Word) -> int:
    return cell_width("".join(c for c, _ in word))


def _take_row(words: list[Word], width: int) -> tuple[list[Word], list[Word]]:
    """Greedy wrapping: the words of the next row and the rest; a word wider than a row is
    cut."""
    row: list[Word] = []
    used = 0
    for n, word in enumerate(words):
        w = _width(word)
        if not row and w > width:
            cut, cells = 0, 0
            while cut < len(word) and cells + cell_width(word[cut][0]) <= width:
                cells += cell_width(word[cut][0])
                cut += 1
            cut = max(cut, 1)
            return [word[:cut]], [word[cut:]] + words[n + 1:]
        if row and used + 1 + w > width:
            return row, words[n:]
        used += w + (1 if row else 0)
        row.append(word)
    return row, []


def _styled(words: list[Word]) -> str:
    """Words joined by spaces, as text with ANSI styles; a space takes the styles shared by
    its neighbours (so a struck or coloured phrase stays whole)."""
    chars: Word = []
    for word in words:
        if chars:
            chars.append((" ", chars[-1][1] & word[0][1]))
        chars += word
    out, current = [], 0
    for c, style in chars:
        if style != current:
            out.append(_sgr(style))
            current = style
        out.append(c)
    return "".join(out) + (RESET if current else "")


# --- prose: paragraphs, list items, quotes, headings ----------------------------------------

@dataclass
class _Flow:
    """One prose line being let out row by row: its prefixes (first row, the rows after it),
    the words not let out yet and how much of its body they cover."""
    prefix: str
    indent: str
    skip: int  # where the body starts in the line
    state: _Inline
    words: list[Word] = field(default_factory=list)
    parsed: int = 0
    rows: int = 0

    def feed(self, line: str, final: bool, width: int) -> list[str]:
        body = line[self.skip:]
        end = len(body) if final else max(body.rfind(" "), body.rfind("\t")) + 1
        if end > self.parsed:
            self.words += _words(body, self.parsed, end, self.state, final)
            self.parsed = end
        out = []
        while self.words or (final and not self.rows):
            lead = self.prefix if not self.rows else self.indent
            room = max(width - cell_width(_plain(lead)), 10)
            row, rest = _take_row(self.words, room)
            if not rest and not final:
                break  # the last row may still grow
            out.append((lead + _styled(row)).rstrip())
            self.words, self.rows = rest, self.rows + 1
        return out


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _flow(line: str) -> _Flow:
    """A prose line's kind, from its first characters: heading, quote, list item, paragraph."""
    if heading := _HEADING.match(line):
        return _Flow("", "", heading.end(), _Inline(BOLD))
    if _QUOTE.match(line):
        depth, rest = 0, line
        while quote := _QUOTE.match(rest):
            depth, rest = depth + 1, rest[quote.end():]
        at = len(line) - len(rest)
        bar = f"{_sgr(DIM)}{'│ ' * depth}{RESET}"
        inner = _flow(line[at:])
        return _Flow(bar + inner.prefix, bar + inner.indent, at + inner.skip, inner.state)
    if item := _ITEM.match(line):
        lead, mark = item.group(1), item.group(2)
        bullet = "•" if mark in "-*+" else mark
        return _Flow(f"{lead}{bullet} ", " " * (len(lead) + cell_width(bullet) + 1),
                     item.end(), _Inline())
    lead = line[:len(line) - len(line.lstrip())]
    return _Flow(lead, lead, len(lead), _Inline())


def _may_stream(line: str) -> bool:
    """Whether an incomplete line is prose for sure, so its first rows can be let out."""
    return not (line.lstrip().startswith(("|", "```", "~~~"))
                or set(line.strip()) <= set("-*_= "))


# --- code blocks ----------------------------------------------------------------------------

class _Code:
    """A fenced code block under way: its lines, and pygments' lexer for its language."""

    def __init__(self, fence: str, lang: str):
        self.fence, self.lines = fence, list[str]()
        self.lexer = _lexer(lang) if lang else None

    def closes(self, line: str) -> bool:
        mark = line.strip()
        return bool(mark) and set(mark) == {self.fence[0]} and len(mark) >= len(self.fence) \
            and len(line) - len(line.lstrip()) <= 3

    def add(self, line: str) -> str:
        """The line highlighted, in the light of up to ``_HIGHLIGHT_WINDOW`` lines before it."""
        self.lines.append(line)
        if self.lexer is None:
            return line
        from pygments import highlight
        from pygments.formatters import TerminalFormatter

        text = "\n".join(self.lines[-_HIGHLIGHT_WINDOW:]) + "\n"
        out = highlight(text, self.lexer, TerminalFormatter()).split("\n")
        return out[-2] if len(out) >= 2 else line


def _lexer(lang: str) -> Any:
    try:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # highlighting is optional: plain code then
        return None
    try:
        return get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


# --- tables ---------------------------------------------------------------------------------

def _cells(line: str) -> list[str]:
    """A table row's cells: split at pipes outside code spans, unless escaped."""
    text = line.strip()
    text = text[1:] if text.startswith("|") else text
    cells, cell, code, i = [], "", False, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and text[i + 1:i + 2] == "|":
            cell, i = cell + "|", i + 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += c
        i += 1
    if cell.strip():
        cells.append(cell.strip())
    return cells


def _table(lines: list[str], width: int) -> list[str]:
    """A table with aligned columns; cells wrap when it is wider than ``width``."""
    aligns = ["r" if c.endswith(":") and not c.startswith(":") else
              "c" if c.startswith(":") and c.endswith(":") else "l"
              for c in (cell.replace(" ", "") for cell in _cells(lines[1]))]
    rows = [_cells(lines[0])] + [_cells(line) for line in lines[2:]]
    ncols = len(rows[0])
    aligns = (aligns + ["l"] * ncols)[:ncols]
    grid = [[_words(cell, 0, len(cell), _Inline(BOLD if r == 0 else 0), True)
             for cell in (row + [""] * ncols)[:ncols]] for r, row in enumerate(rows)]
    widths = [max((sum(_width(w) for w in cell) + max(len(cell) - 1, 0) for cell in col),
                  default=0) for col in zip(*grid)]
    widths = [max(w, 1) for w in widths]
    while sum(widths) + 3 * (ncols - 1) > width and max(widths) > 6:
        widths[widths.index(max(widths))] -= 1
    bar = f"{_sgr(DIM)}│{RESET}"
    out = []
    for r, row in enumerate(grid):
        columns = [_wrap(cell, w) for cell, w in zip(row, widths)]
        for n in range(max(len(c) for c in columns)):
            parts = [_pad(col[n] if n < len(col) else "", w, a)
                     for col, w, a in zip(columns, widths, aligns)]
            out.append(f" {bar} ".join(parts).rstrip())
        if r == 0:
            out.append(f"{_sgr(DIM)}{'─┼─'.join('─' * w for w in widths)}{RESET}")
    return out


def _wrap(words: list[Word], width: int) -> list[str]:
    rows: list[str] = []
    while words or not rows:
        row, words = _take_row(words, width)
        rows.append(_styled(row))
    return rows


def _pad(text: str, width: int, align: str) -> str:
    space = width - cell_width(_plain(text))
    left = space if align == "r" else space // 2 if align == "c" else 0
    return " " * left + text + " " * (space - left)


# --- the stream -----------------------------------------------------------------------------

class MarkdownStream:
    """Markdown text in (as deltas), styled rows out; one per reply."""

    def __init__(self, width: int = 80):
        self.width = max(width, 20)
        self.tail = ""  # the incomplete line
        self.flow: _Flow | None = None  # the incomplete line, when rows of it are let out
        self.code: _Code | None = None
        self.table: list[str] = []  # a table's lines, or a header line waiting for more

    def feed(self, text: str) -> str:
        self.tail += text
        out: list[str] = []
        while "\n" in self.tail:
            line, self.tail = self.tail.split("\n", 1)
            out += self._line(line.rstrip("\r"))
        if self.flow is None and self.code is None and not self.table \
                and cell_width(self.tail) > self.width and _may_stream(self.tail):
            self.flow = _flow(self.tail)
        if self.flow is not None:
            out += self.flow.feed(self.tail, False, self.width)
        return "".join(row + "\n" for row in out)

    def finish(self) -> str:
        """Everything still held: the last line (if it has no newline) and a table."""
        out = self._line(self.tail) if self.tail or self.flow else []
        out += self._end_table()
        self.tail, self.code = "", None
        return "".join(row + "\n" for row in out)

    def _line(self, line: str) -> list[str]:
        if self.flow is not None:
            flow, self.flow = self.flow, None
            return flow.feed(line, True, self.width)
        if self.code is not None:
            if self.code.closes(line):
                self.code = None
                return [f"{_sgr(DIM)}{line}{RESET}"]
            return [self.code.add(line)]
        out: list[str] = []
        if len(self.table) == 1 and _DELIMITER.match(line) and "-" in line:
            self.table.append(line)
            return out
        if self.table:
            if line.lstrip().startswith("|") and len(self.table) > 1:
                self.table.append(line)
                return out
            out += self._end_table()
        if fence := _FENCE.match(line):
            self.code = _Code(fence.group(1), fence.group(2))
            return out + [f"{_sgr(DIM)}{line}{RESET}"]
        if line.lstrip().startswith("|"):
            self.table = [line]
            return out
        if _RULE.match(line):
            return out + [f"{_sgr(DIM)}{'─' * self.width}{RESET}"]
        return out + _flow(line).feed(line, True, self.width)

    def _end_table(self) -> list[str]:
        lines, self.table = self.table, []
        if len(lines) > 1 and _cells(lines[0]):
            return _table(lines, self.width)
        # a line starting with a pipe that no delimiter row followed, or a table of no column
        return [row for line in lines for row in _flow(line).feed(line, True, self.width)]
