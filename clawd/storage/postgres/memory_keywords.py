"""The keyword half of the memory index in PostgreSQL: FTS5's tokens as a ``tsvector``, the
token counts of ``memory_terms``, and FTS5's BM25 (``memory.bm25``) over them.

``terms_of`` is what a chunk's row holds: its tokens with their positions, the heading's
first and the text's one position after them (no phrase spans both, as FTS5's two columns),
and its token count. ``memory.PgIndexStore`` holds one ``KeywordRows``, built on its
connection (the open transaction's, if any) and its generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from clawd.memory import bm25, tokens
from clawd.memory.index_store import SearchFailed
from clawd.memory.keywords import fts_text

MAX_POSITION = 16383  # a tsvector position's bound
MAX_POSITIONS = 255  # positions a tsvector keeps per lexeme (PostgreSQL keeps 256)
MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses a longer lexeme (a pasted blob): it is not kept


def _lexeme(token: str) -> str:
    """A token as a quoted ``tsvector``/``tsquery`` lexeme (taken as is: no parser)."""
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def terms_of(heading: str, text: str) -> tuple[str, int, list[str]]:
    """(the ``tsvector`` literal of a chunk's FTS tokens with their positions, how many
    tokens it has, its distinct tokens), as FTS5 indexes its heading and text columns."""
    head = tokens.fts_tokens(fts_text(heading))
    body = tokens.fts_tokens(fts_text(text))
    positions: dict[str, list[int]] = {}
    placed = [*enumerate(head, start=1), *enumerate(body, start=len(head) + 2)]  # one apart
    for number, token in placed:
        if len(token.encode()) <= MAX_LEXEME_BYTES:
            positions.setdefault(token, []).append(min(number, MAX_POSITION))
    literal = " ".join(f"{_lexeme(token)}:{','.join(map(str, sorted(set(at))[:MAX_POSITIONS]))}"
                       for token, at in positions.items())
    return literal, len(head) + len(body), list(positions)


class KeywordRows:
    """Token counts, BM25 ranking and the GIN-index queries of one agent's index.

    ``connection()`` is the store's (its open transaction's, if any); ``generation`` is the
    index's, which the chunk count and phrase counts are kept by."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]], agent_id: str,
                 generation: Callable[[], str]):
        self._conn, self.agent_id, self.generation = connection, agent_id, generation
        self._stats: tuple[str, int, float] | None = None  # (generation, chunks, mean length)
        self._docs: tuple[str, dict[tuple[str, ...], int]] = ("", {})  # phrase -> chunks

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._conn() as conn:
            return list(conn.execute(sql, params).fetchall())

    def _matching(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Rows of a query that finds chunks by ``terms``, through the GIN index. The
        planner counts a ``tsvector`` match on a scanned row far cheaper than it is (each is
        read whole): it would scan a table of a few thousand chunks row by row, or an
        agent's rows through ``agent_id``. So such a query names the agent as
        ``(agent_id || '')``, which no index serves, and sequential scans are off."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
            return list(conn.execute(sql, params).fetchall())

    def term_stats(self, wanted: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, chunks holding each token: those that hold any)."""
        return self._totals()[0], self._term_docs(wanted)

    def _term_docs(self, wanted: Sequence[str]) -> dict[str, int]:
        """Chunks holding each token, from ``memory_terms`` (tokens none holds left out)."""
        return {term: int(docs) for term, docs in self._rows(
            "SELECT term, docs FROM memory_terms WHERE agent_id = %s AND term = ANY(%s)",
            (self.agent_id, list(dict.fromkeys(wanted))))}

    def _totals(self) -> tuple[int, float]:
        """(chunks, their mean length in tokens) of this generation."""
        generation = self.generation()
        if self._stats is None or self._stats[0] != generation:
            count, length = self._rows("SELECT count(*), coalesce(sum(length), 0) FROM "
                                       "memory_chunks WHERE agent_id = %s", (self.agent_id,))[0]
            self._stats = (generation, int(count), int(length) / count if count else 0.0)
        return self._stats[1], self._stats[2]

    def _phrase_counts(self, phrases: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
        """Chunks holding each phrase (a tuple of tokens), kept per generation."""
        if not phrases:
            return {}
        generation = self.generation()
        if self._docs[0] != generation:
            self._docs = (generation, {})
        known = self._docs[1]
        todo = {" <-> ".join(map(_lexeme, p)): p for p in phrases if p not in known}
        if todo:
            for query, count in self._matching(
                    "SELECT q, (SELECT count(*) FROM memory_chunks WHERE (agent_id || '') = %s "
                    "AND terms @@ q::tsquery) FROM unnest(%s::text[]) q",
                    (self.agent_id, list(todo))):
                known[todo[query]] = int(count)
        return {p: known[p] for p in phrases}

    def fts_search(self, match: str, k: int,
                   newest: int | None = None) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the best ``k`` chunks matching ``match`` (an FTS5 query of
        ``keywords.plan``), ranked as FTS5 ranks them; with ``newest``, only the newest that
        many matches are ranked. A query of single tokens (the usual one) is ranked by the
        database, which sends back ``k`` rows; one holding a phrase is ranked here from
        the positions of its tokens."""
        phrases = list(dict.fromkeys(
            p for p in (tuple(tokens.fts_tokens(text)) for text in bm25.phrases(match)) if p))
        if not phrases:
            return []
        query = " | ".join(f"({' <-> '.join(map(_lexeme, p))})" for p in phrases)
        wanted = sorted({t for p in phrases for t in p})
        matching = ("SELECT id, length, terms FROM memory_chunks WHERE (agent_id || '') = %s "
                    "AND terms @@ %s::tsquery"
                    + (f" ORDER BY id DESC LIMIT {int(newest)}" if newest is not None else ""))
        held = ("CROSS JOIN LATERAL unnest(ts_filter(setweight(setweight(c.terms, 'D'), 'A', "
                "%s::text[]), '{a}')) u")
        try:
            total, average = self._totals()
            single = self._term_docs([p[0] for p in phrases if len(p) == 1])
            joined = self._phrase_counts([p for p in phrases if len(p) > 1])
            idfs = [bm25.idf(single.get(p[0], 0) if len(p) == 1 else joined[p], total)
                    for p in phrases]
            if all(len(p) == 1 for p in phrases):
                norm = f"{bm25.K1} * (1 - {bm25.B} + {bm25.B} * c.length / %s)"
                return [(int(i), float(score)) for i, score in self._matching(
                    f"SELECT c.id, sum(w.idf * n * {bm25.K1 + 1} / (n + {norm})) AS score FROM "
                    f"({matching}) c {held} CROSS JOIN LATERAL array_length(u.positions, 1) n "
                    "JOIN unnest(%s::text[], %s::float8[]) AS w(lexeme, idf) ON w.lexeme = "
                    "u.lexeme GROUP BY c.id ORDER BY score DESC, c.id LIMIT %s",
                    (average or 1.0, self.agent_id, query, wanted, [p[0] for p in phrases],
                     idfs, int(k)))]
            rows = self._matching(f"SELECT c.id, c.length, u.lexeme, u.positions FROM "
                                  f"({matching}) c {held}", (self.agent_id, query, wanted))
        except Exception as exc:  # noqa: BLE001 - the search goes on without keywords
            raise SearchFailed(f"keyword search in the database failed: {exc}") from exc
        chunks: dict[int, tuple[int, dict[str, set[int]]]] = {}
        for chunk_id, length, lexeme, positions in rows:
            chunks.setdefault(int(chunk_id), (int(length), {}))[1][lexeme] = set(positions)
        scored = [(chunk_id, bm25.score([bm25.occurrences(p, at) for p in phrases], idfs,
                                        length, average))
                  for chunk_id, (length, at) in chunks.items()]
        scored = [item for item in scored if item[1] > 0]  # as FTS5: a match scores above 0
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:k]
