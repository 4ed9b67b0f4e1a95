"""Markdown as Telegram's HTML subset, everything else escaped (pure).

Telegram shows ``<b> <i> <s> <u> <code> <pre> <a href> <blockquote> <tg-spoiler>``; every
other ``<``, ``>`` and ``&`` must be escaped or the message is refused. ``inline`` renders
one line: `` `code` `` first (its inside untouched), then ``[text](url)`` links, ``**bold**``
and ``__bold__``, ``*italic*`` and ``_italic_``, ``~~strike~~``, ``||spoiler||``; a line whose
tags would not nest (``**a *b** c*``) is shown with its code spans only, the rest as
written, so a reply is never refused for its markup. ``block`` renders a paragraph:
headings bold, list bullets as ``•``, a quote as ``<blockquote>``; ``code_block`` a fenced
block as ``<pre><code class="language-…">``. ``blocks`` cuts a reply into paragraphs and
fenced code blocks (an unclosed fence runs to the end). ``is_balanced`` checks that every
tag is closed in order.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+|tg://[^\s)]+|mailto:[^\s)]+)\)")
_STYLES = (
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), "b"),
    (re.compile(r"(?<![\w_])__(?=\S)(.+?)(?<=\S)__(?![\w_])"), "b"),
    (re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])"), "i"),
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), "i"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), "s"),
    (re.compile(r"\|\|(?=\S)(.+?)(?<=\S)\|\|"), "tg-spoiler"),
)
_TAG = re.compile(r"<(/?)(b|i|s|u|code|pre|a|blockquote|tg-spoiler)\b[^>]*>")
_SLOT = re.compile("\x00(\\d+)\x00")


def escape(text: str) -> str:
    """``text`` shown as written: ``&``, ``<`` and ``>`` escaped (NUL dropped)."""
    return html.escape(text.replace("\x00", ""), quote=False)


def is_balanced(markup: str) -> bool:
    """Every tag of ``markup`` closed, in the order opened, none left open."""
    stack: list[str] = []
    for match in _TAG.finditer(markup):
        closing, name = match.group(1), match.group(2)
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def inline(text: str) -> str:
    """One line of Markdown as Telegram HTML (see the module docstring)."""
    slots: list[str] = []

    def keep(markup: str) -> str:
        slots.append(markup)
        return f"\x00{len(slots) - 1}\x00"

    line = _CODE_SPAN.sub(lambda m: keep(f"<code>{escape(m.group(2))}</code>"),
                          text.replace("\x00", ""))
    plain_with_code = line
    line = _LINK.sub(lambda m: keep(f'<a href="{html.escape(m.group(2), quote=True)}">'
                                    f"{_styled(escape_kept(m.group(1)))}</a>"), line)
    done = _restore(_styled(escape_kept(line)), slots)
    if is_balanced(done):
        return done
    return _restore(escape_kept(plain_with_code), slots)


def escape_kept(text: str) -> str:
    """``escape`` that leaves the slots (``\\x00n\\x00``) of ``inline`` in place."""
    parts = _SLOT.split(text)
    return "".join(escape(part) if i % 2 == 0 else f"\x00{part}\x00"
                   for i, part in enumerate(parts))


def _styled(text: str) -> str:
    for pattern, tag in _STYLES:
        text = pattern.sub(rf"<{tag}>\1</{tag}>", text)
    return text


def _restore(text: str, slots: list[str]) -> str:
    while _SLOT.search(text):
        text = _SLOT.sub(lambda m: slots[int(m.group(1))], text)
    return text


def line_markup(line: str) -> str:
    """One line of a paragraph: a heading bold, a list item with a bullet, a rule."""
    if _RULE.match(line):
        return "———"
    if heading := _HEADING.match(line):
        return f"<b>{inline(heading.group(1))}</b>" if heading.group(1) else ""
    if item := _ITEM.match(line):
        return f"{item.group(1)}• {inline(item.group(2))}"
    return inline(line)


def block(lines: list[str]) -> str:
    """A paragraph (lines without a blank one): quoted lines as one ``<blockquote>``."""
    out: list[str] = []
    quoted: list[str] = []
    for line in lines:
        if quote := _QUOTE.match(line):
            quoted.append(line_markup(quote.group(1)))
            continue
        if quoted:
            out.append(f"<blockquote>{chr(10).join(quoted)}</blockquote>")
            quoted = []
        out.append(line_markup(line))
    if quoted:
        out.append(f"<blockquote>{chr(10).join(quoted)}</blockquote>")
    return "\n".join(out)


def code_open(language: str) -> str:
    return (f'<pre><code class="language-{escape(language)}">' if language
            else "<pre><code>")


CODE_CLOSE = "</code></pre>"


def code_block(language: str, lines: list[str]) -> str:
    return code_open(language) + escape("\n".join(lines)) + CODE_CLOSE


@dataclass(frozen=True)
class Block:
    """A paragraph (``code`` False) or a fenced code block (its ``language``)."""

    lines: list[str]
    code: bool = False
    language: str = ""


def blocks(markdown: str) -> list[Block]:
    """``markdown`` cut into paragraphs (at blank lines) and fenced code blocks."""
    found: list[Block] = []
    paragraph: list[str] = []
    lines = markdown.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence and i + 1 < len(lines):
            if paragraph:
                found.append(Block(paragraph))
                paragraph = []
            mark, body = fence.group(1), []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                body.append(lines[i])
                i += 1
            found.append(Block(body, code=True, language=fence.group(2)))
        elif fence:  # a fence on the last line opens nothing: its words are text
            paragraph.append(line)
        elif not line.strip():
            if paragraph:
                found.append(Block(paragraph))
                paragraph = []
        else:
            paragraph.append(line)
        i += 1
    if paragraph:
        found.append(Block(paragraph))
    return found
