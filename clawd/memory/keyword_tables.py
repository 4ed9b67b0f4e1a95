"""The keyword half's reads of the memory index: FTS5 queries, term statistics, and each
chunk's tokens line by line (``tokens.py``), stored when the chunk is written.

Line evidence and coverage (``keywords.py``) need the FTS tokens of every line of each
keyword hit. Tokenizing the ~24 hits of a search line by line cost about 3 ms of Python, so
a chunk's tokens are computed once, when it is inserted, and kept in ``chunks.line_tokens``:
the heading's tokens on the first line, then those of each line of the text (blank lines
kept), tokens separated by spaces (the tokenizer never puts a space or a line break inside
a token). A chunk's text never changes under its id (a changed chunk is deleted and
inserted anew), so stored tokens are never stale: a chunk written without them (before
this column existed, or by a writer that does not fill it) has ``NULL`` there, is tokenized
at search time instead, and gets its tokens from a later sync (``fill_line_tokens``).

``term_stats`` counts the chunks holding each token; for a common word FTS5 walks its whole
posting list (about 3 ms at 100k chunks), so the counts are kept per generation of the index
(every committed sync increments it, in any process).

``store.Store`` holds one ``KeywordTables``, built on its writer connection and its
per-thread read-only connections (``readers.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import apsw

from clawd.memory import tokens
from clawd.memory.readers import Readers
from clawd.memory.schema import batched
from clawd.memory.tokens import ChunkTokens

FILL_PER_SYNC = 2_000  # chunks given their line tokens by one sync (about 0.3 s)
DF_CACHE_MAX = 50_000  # token counts kept per generation before the cache starts afresh


class KeywordTables:
    """FTS5 search, term statistics and stored line tokens of one index file.

    ``fts_available``: whether the file has FTS5 (without it nothing is stored or searched
    here); ``generation`` is the store's, which the term counts are kept by."""

    def __init__(self, conn: apsw.Connection, readers: Readers, *, fts_available: bool,
                 generation: Callable[[], str]):
        self.conn, self.readers = conn, readers
        self.fts_available = fts_available
        self.generation = generation
        self._chunk_count: tuple[str, int] | None = None  # (generation, chunks)
        self._doc_counts: tuple[str, dict[str, int]] | None = None  # (generation, df)

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        """(chunk id, -bm25) for the best ``k`` FTS matches: higher is better, always > 0.
        With ``newest``, only the newest that many matches (highest ids) are ranked: FTS5
        walks the posting lists in id order and stops there.

        SQLite's ``bm25()`` is negative with lower = better; it is negated here once so no
        caller ever handles the inverted sign.
        """
        if newest is None:
            sql = ("SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? "
                   "ORDER BY bm25(chunks_fts) LIMIT ?")
            rows = self.readers.read(sql, (match, int(k)))
        else:
            sql = ("SELECT rowid, score FROM (SELECT rowid, -bm25(chunks_fts) AS score "
                   "FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid DESC LIMIT ?) "
                   "ORDER BY score DESC LIMIT ?")
            rows = self.readers.read(sql, (match, int(newest), int(k)))
        return [(int(r), float(s)) for r, s in rows]

    def fts_tokens(self, text: str) -> list[str]:
        """``text`` as FTS5 tokenizes it for a query (``tokens.fts_tokens``)."""
        return tokens.fts_tokens(text)

    def stored_line_tokens(self, heading: str, text: str) -> str | None:
        """What ``chunks.line_tokens`` holds for a chunk (None without FTS5)."""
        return tokens.line_tokens(heading, text) if self.fts_available else None

    def keyword_chunks(self, ids: Iterable[int]) -> dict[int, ChunkTokens]:
        """chunk id -> (text, heading tokens, each line's tokens separated by spaces):
        stored tokens where the chunk has them, else tokenized now."""
        ids = list(ids)
        out: dict[int, ChunkTokens] = {}
        for part, marks in batched(ids):
            for chunk_id, heading, text, stored in self.readers.read(
                    f"SELECT id, heading, text, line_tokens FROM chunks WHERE id IN ({marks})",
                    part):
                out[int(chunk_id)] = tokens.keyword_chunk(heading, text, stored)
        return out

    def fill_line_tokens(self, limit: int | None = None) -> int:
        """Within a sync's transaction: store the line tokens of up to ``limit`` chunks
        without them (``FILL_PER_SYNC``); how many were filled."""
        if not self.fts_available:
            return 0
        rows = list(self.conn.execute(
            "SELECT id, heading, text FROM chunks WHERE line_tokens IS NULL LIMIT ?",
            (FILL_PER_SYNC if limit is None else int(limit),)))
        self.conn.executemany("UPDATE chunks SET line_tokens = ? WHERE id = ?",
                              [(self.stored_line_tokens(heading, text), chunk_id)
                               for chunk_id, heading, text in rows])
        return len(rows)

    def term_stats(self, tokens: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, chunks holding each token) from the FTS5 vocabulary; both
        are kept until the index's generation changes."""
        generation = self.generation()
        cached = self._chunk_count
        if cached is None or cached[0] != generation:
            # count(*) walks the whole table: once per committed sync, not per search
            cached = (generation, int(self.readers.read("SELECT count(*) FROM chunks")[0][0]))
            self._chunk_count = cached
        counts = self._doc_counts
        if counts is None or counts[0] != generation or len(counts[1]) > DF_CACHE_MAX:
            counts = self._doc_counts = (generation, {})
        known = counts[1]
        wanted = list(dict.fromkeys(tokens))
        for part, marks in batched([t for t in wanted if t not in known]):
            found = dict.fromkeys(part, 0)
            for term, count in self.readers.read(
                    f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", part):
                found[term] = int(count)
            known.update(found)
        docs = {t: known[t] for t in wanted if known.get(t)}
        return cached[1], docs

    def chunk_texts(self, ids: Iterable[int]) -> Mapping[int, str]:
        """chunk id -> heading and text."""
        ids = list(ids)
        out: dict[int, str] = {}
        for part, marks in batched(ids):
            for chunk_id, heading, text in self.readers.read(
                    f"SELECT id, heading, text FROM chunks WHERE id IN ({marks})", part):
                out[int(chunk_id)] = f"{heading}\n{text}"
        return out
