"""The keyword half's evidence: CJK-aware FTS text, query plans, and keyword coverage.

Pure functions; ``index.py`` supplies the FTS tokenizer and the term statistics.

- CJK: SQLite's ``unicode61`` tokenizer keeps a run of Han/kana characters as one token, so
  ``会议`` inside ``东京的会议改到下周三`` would never match. The text given to FTS5 has a space
  around each such character (``fts_text``), and a CJK run in a query becomes the phrase of
  its characters, which matches exactly that substring.
- Coverage: how much of a query a chunk holds, as the IDF-weighted share of the query's
  terms that occur in it (``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, as in BM25). A
  chunk holding a rare identifier that is the whole query has coverage 1; one that shares
  only a common word with a longer question has little. Unlike the min-max normalised BM25
  score, coverage is absolute: it does not make the best of a poor pool look perfect.
- A keyword hit on its own scores ``KEYWORD_ALONE * coverage ** 2``: a chunk holding the
  whole query scores 0.6 (above the default ``minScore`` 0.35) whatever the vector half
  says, one holding under about three quarters of its weight stays under it.
- Line evidence: BM25 and coverage rate a whole chunk, so a chunk with the query's words
  scattered over fifteen lines can beat the one line that holds them together. A chunk's line
  evidence is its best line's share of the query, with each term weighed by how rare it is
  among the lines of the keyword hits (the same IDF formula over lines): a term in every
  chunk, such as a speaker's name in a transcript or the owner's name in notes, still tells
  one line from another. A question that ends a chunk (a line ending in ``?``) counts half:
  its answer is the next line, in the next chunk.
- At scale, the commonest terms are left out of the MATCH expression while the chunks its
  terms occur in add up to more than ``POSTINGS_BUDGET`` (the rarest term is always kept;
  left-out terms still count in coverage): walking long posting lists is what makes a
  common-word query slow on a large index, and such terms have an IDF near zero anyway. When
  even what is left is over the budget (a query made only of common words, or a phrase of
  them), only the newest ``POSTINGS_BUDGET`` chunks it matches are ranked (``KeywordPlan.newest``):
  FTS5 walks its posting lists newest first and stops there, where ranking every match by
  BM25 would visit all of them. A rare token is never cut this way. On a small index nothing
  is left out, so ranking there is plain BM25.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

KEYWORD_ALONE = 0.6
POSTINGS_BUDGET = 5_000
TRAILING_QUESTION = 0.5

# Han (with extensions and compatibility ideographs), hiragana and katakana: written without
# spaces between words. Hangul is written with spaces, so unicode61 already splits it.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\U00020000-\U0002ebef]")
_CJK_RUN = re.compile(_CJK.pattern + "+")

Tokenize = Callable[[str], list[str]]


def fts_text(text: str) -> str:
    """``text`` as given to FTS5: each CJK character a token of its own."""
    return _CJK.sub(lambda m: f" {m.group(0)} ", text) if _CJK.search(text) else text


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: its FTS tokens (several for a CJK run) and its IDF weight."""

    text: str
    tokens: tuple[str, ...]
    idf: float
    docs: int


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """What the keyword half asks FTS5 (``match``), how many of the newest matching chunks
    it ranks (``newest``, None for all), and how coverage is weighed (``terms``)."""

    match: str | None
    terms: tuple[Term, ...]
    newest: int | None = None


def idf(docs: int, total: int) -> float:
    return math.log(1.0 + (total - docs + 0.5) / (docs + 0.5))


def _quoted(words: Iterable[str]) -> str:
    """A phrase for MATCH; FTS5 tokenizes (and stems) it as it did the text."""
    return '"' + " ".join(fts_text(w).replace('"', '""') for w in words) + '"'


def plan(words: Sequence[str], phrases: Sequence[Sequence[str]], tokenize: Tokenize,
         stats: Callable[[list[str]], tuple[int, Mapping[str, int]]]) -> KeywordPlan:
    """The keyword query for ``words`` (query terms, stop words already dropped) plus the
    ``phrases`` of compound identifiers; ``stats(tokens)`` gives (chunk count, df per token).
    """
    raw: list[tuple[str, tuple[str, ...]]] = []
    for word in words:
        tokens = tuple(tokenize(fts_text(word)))
        if tokens:
            raw.append((word, tokens))
    raw = list({tokens: (word, tokens) for word, tokens in raw}.values())
    if not raw:
        return KeywordPlan(None, ())
    joined = [p for p in phrases if len(p) > 1]
    phrase_tokens = [[t for w in p for t in tokenize(fts_text(w))] for p in joined]
    total, docs = stats(sorted({t for _, tokens in raw for t in tokens}
                               | {t for tokens in phrase_tokens for t in tokens}))
    terms = []
    for word, tokens in raw:
        df = min(docs.get(t, 0) for t in tokens)  # a phrase is at most as common as its rarest
        terms.append(Term(word, tokens, idf(df, total), df))
    asked = sorted(terms, key=lambda t: t.docs)
    while len(asked) > 1 and sum(t.docs for t in asked) > POSTINGS_BUDGET:
        asked.pop()
    asked.sort(key=terms.index)
    postings = sum(t.docs for t in asked) + sum(
        min((docs.get(t, 0) for t in tokens), default=0) for tokens in phrase_tokens)
    parts = [_quoted([t.text]) for t in asked] + [_quoted(p) for p in joined]
    return KeywordPlan(" OR ".join(dict.fromkeys(parts)), tuple(terms),
                POSTINGS_BUDGET if postings > POSTINGS_BUDGET else None)


@dataclass(frozen=True, slots=True)
class ChunkLine:
    """One non-blank line of a chunk: the query's FTS tokens it holds, and whether it asks
    a question."""

    tokens: frozenset[str]
    asks: bool


# lines without a wanted token
_NOTHING = (ChunkLine(frozenset(), False), ChunkLine(frozenset(), True))


def chunk_lines(text: str, line_tokens: Sequence[str], terms: Sequence[Term]) -> list[ChunkLine]:
    """The non-blank lines of ``text`` with the tokens of ``terms`` each holds;
    ``line_tokens`` are the FTS tokens of each line of ``text``, separated by spaces."""
    wanted = {tok for t in terms for tok in t.tokens}
    lines = []
    for raw, tokens in zip(text.split("\n"), line_tokens):
        if not raw.strip():
            continue
        asks = raw.rstrip().endswith("?")
        # A wanted token that is no substring of the line is surely not one of its tokens.
        for tok in wanted:
            if tok in tokens:
                lines.append(ChunkLine(frozenset(wanted.intersection(tokens.split())), asks))
                break
        else:
            lines.append(_NOTHING[asks])
    return lines


def _holds(term: Term, tokens: Set[str]) -> bool:
    return all(tok in tokens for tok in term.tokens)


def line_evidence(terms: Sequence[Term],
                  chunks: Mapping[int, Sequence[ChunkLine]]) -> dict[int, float]:
    """Each chunk's best line's share of the query, terms weighed by IDF over all the lines
    of ``chunks``; a question on a chunk's last line counts ``TRAILING_QUESTION``."""
    held = {chunk_id: [[i for i, t in enumerate(terms) if _holds(t, ln.tokens)]
                       if ln.tokens else [] for ln in chunk]
            for chunk_id, chunk in chunks.items()}
    docs = [0] * len(terms)
    for per_line in held.values():
        for found in per_line:
            for i in found:
                docs[i] += 1
    lines = sum(len(chunk) for chunk in chunks.values())
    weights = [idf(df, lines) for df in docs]
    total = sum(weights)
    evidence = dict.fromkeys(chunks, 0.0)
    if total <= 0:
        return evidence
    for chunk_id, chunk in chunks.items():
        for number, (ln, found) in enumerate(zip(chunk, held[chunk_id])):
            if not found:
                continue  # a share of 0 raises nothing
            share = sum(weights[i] for i in found) / total
            if ln.asks and number == len(chunk) - 1:
                share *= TRAILING_QUESTION
            evidence[chunk_id] = max(evidence[chunk_id], share)
    return evidence


def coverage(terms: Sequence[Term], chunk_tokens: Set[str]) -> float:
    """The IDF-weighted share of the query's terms all of whose tokens the chunk holds."""
    weight = sum(t.idf for t in terms)
    if weight <= 0:
        return 0.0
    held = sum(t.idf for t in terms if _holds(t, chunk_tokens))
    return held / weight


def alone(cover: float) -> float:
    """The score a keyword hit earns on its own from its coverage."""
    return KEYWORD_ALONE * cover * cover
