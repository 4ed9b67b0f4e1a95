"""Text as FTS5 tokenizes it (``porter unicode61 remove_diacritics 2``), for any index store.

The keyword half reads tokens in three places: the query's words, each line of a keyword hit
(line evidence and coverage), and, in the database's index, the chunk's terms themselves.
All of them come from SQLite's own FTS5 tokenizer, on an in-memory connection of the calling
thread (a tokenizer belongs to its connection, which one thread uses at a time), so the
SQLite file and PostgreSQL index the same tokens and rank alike.

A chunk's tokens are stored line by line when it is written (``encode_line_tokens``): the
heading's tokens on the first line, then those of each line of the text (blank lines kept),
separated by spaces (the tokenizer never puts a space or a line break inside a token).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import apsw

from clawd.memory.keywords import fts_text
from clawd.memory.schema import FTS_TOKENIZER

# text, heading tokens, each line's tokens separated by spaces
ChunkTokens = tuple[str, list[str], list[str]]

_local = threading.local()


def _tokenizer() -> Any:
    tokenizer = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        _local.conn = apsw.Connection(":memory:")  # kept: the tokenizer lives in it
        tokenizer = _local.tokenizer = _local.conn.fts5_tokenizer(*FTS_TOKENIZER)
    return tokenizer


def fts_tokens(text: str) -> list[str]:
    """``text`` as FTS5 tokenizes it for a query (lower-cased, Porter-stemmed)."""
    found = _tokenizer()(text.encode("utf-8", "replace"), apsw.FTS5_TOKENIZE_QUERY, None,
                         include_offsets=False)
    return [item[0] for item in found]


def fts_line_tokens(text: str) -> list[list[str]]:
    """``fts_tokens`` of each line of ``text`` (split at ``\\n``), in one tokenizer call."""
    data = text.encode("utf-8", "replace")
    ends = [m.start() for m in re.finditer(b"\n", data)] + [len(data)]
    lines: list[list[str]] = [[] for _ in ends]
    number, end, current = 0, ends[0], lines[0]
    for start, _, token in _tokenizer()(data, apsw.FTS5_TOKENIZE_QUERY, None,
                                        include_colocated=False):
        if start > end:  # tokens come in order: move on to the line this one starts in
            while start > end:
                number += 1
                end = ends[number]
            current = lines[number]
        current.append(token)
    return lines


def chunk_tokens(heading: str, text: str) -> tuple[str, list[str], list[list[str]]]:
    """A chunk as the keyword half reads it: its text, the FTS tokens of its heading and
    those of each line of its text (blank lines included)."""
    # The heading ends at the first line break, as in the text the search reads.
    heading, _, body = f"{heading}\n{text}".partition("\n")
    return body, fts_tokens(fts_text(heading)), fts_line_tokens(fts_text(body))


def encode_line_tokens(heading: Sequence[str], lines: Iterable[Sequence[str]]) -> str:
    """The stored form: the heading's tokens, then each line's, one line each."""
    return "\n".join([" ".join(heading), *(" ".join(line) for line in lines)])


def decode_line_tokens(stored: str) -> tuple[list[str], list[str]]:
    """(heading tokens, each line's tokens separated by spaces) from
    ``encode_line_tokens``."""
    heading, *lines = stored.split("\n")
    return heading.split(), lines


def line_tokens(heading: str, text: str) -> str:
    """What a chunk's stored line tokens are (``encode_line_tokens``)."""
    _, head, lines = chunk_tokens(heading, text)
    return encode_line_tokens(head, lines)


def keyword_chunk(heading: str, text: str, stored: str | None) -> ChunkTokens:
    """(text, heading tokens, each line's tokens separated by spaces) of a chunk row: from
    its stored line tokens, or tokenized now when it has none."""
    if stored is None:
        body, head, tokens = chunk_tokens(heading, text)
        return body, head, [" ".join(line) for line in tokens]
    head, lines = decode_line_tokens(stored)
    if "\n" in heading:  # as in ``chunk_tokens``
        text = f"{heading}\n{text}".partition("\n")[2]
    return str(text), head, lines
