"""A reply cut into messages of at most a channel's limit (4096 characters on Telegram),
rendered as its HTML (pure).

Cuts fall between paragraphs, then between lines, then between words, and inside a fenced
code block between its lines (each part its own ``<pre>``); only a line longer than the
limit with no space in it is cut mid-word. Every part is rendered on its own, so each has
all its tags closed: a cut never falls inside a tag. Nothing is dropped but the blank
between two parts.
"""

from __future__ import annotations

from clawd.channels import markup

TELEGRAM_LIMIT = 4096


def parts(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """``markdown`` as Telegram HTML messages, none longer than ``limit``."""
    pieces: list[tuple[str, str]] = []  # (the separator before it, html)
    for found in markup.blocks(markdown):
        rendered = _code(found, limit) if found.code else _paragraph(found.lines, limit)
        for n, piece in enumerate(rendered):
            pieces.append(("\n\n" if n == 0 else "\n", piece))
    out: list[str] = []
    for separator, piece in pieces:
        if out and len(out[-1]) + len(separator) + len(piece) <= limit:
            out[-1] += separator + piece
        else:
            out.append(piece)
    return [part for part in out if part.strip()] or ([] if not markdown.strip() else
                                                      [markup.escape(markdown[:limit])])


def _paragraph(lines: list[str], limit: int) -> list[str]:
    whole = markup.block(lines)
    if len(whole) <= limit:
        return [whole]
    found: list[str] = []
    for line in lines:
        found.extend(_line(line, limit))
    return found


def _line(line: str, limit: int) -> list[str]:
    """One source line as pieces of at most ``limit``: halved at the space nearest its
    middle (or, with none, at the middle) until each half fits."""
    rendered = markup.block([line])
    if len(rendered) <= limit or len(line) <= 1:
        return [rendered]
    middle = len(line) // 2
    left, right = line.rfind(" ", 0, middle + 1), line.find(" ", middle)
    cut = min((c for c in (left, right) if c > 0), key=lambda c: abs(c - middle),
              default=-1)
    if cut > 0:
        return _line(line[:cut], limit) + _line(line[cut + 1:], limit)
    return _line(line[:middle], limit) + _line(line[middle:], limit)


def _code(found: markup.Block, limit: int) -> list[str]:
    opening, closing = markup.code_open(found.language), markup.CODE_CLOSE
    room = limit - len(opening) - len(closing)
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in found.lines:
        for chunk in _code_chunks(line, room):
            cost = len(markup.escape(chunk)) + (1 if current else 0)
            if current and size + cost > room:
                out.append(markup.code_block(found.language, current))
                current, size = [], 0
                cost = len(markup.escape(chunk))
            current.append(chunk)
            size += cost
    if current or not out:
        out.append(markup.code_block(found.language, current))
    return out


def _code_chunks(line: str, room: int) -> list[str]:
    """A code line cut so each piece's escaped text fits ``room``."""
    if len(markup.escape(line)) <= room:
        return [line]
    chunks, current, size = [], "", 0
    for ch in line:
        cost = len(markup.escape(ch))
        if size + cost > room:
            chunks.append(current)
            current, size = "", 0
        current += ch
        size += cost
    return chunks + [current]
