"""Hybrid search policy: keyword queries, score normalisation, the weighted merge, snippets.

Pure functions over numbers and strings; ``index.py`` feeds them what the store returns.

Both halves are brought to 0..1 with higher = better before they are mixed:
- text: the store hands over ``-bm25()`` (SQLite's ``bm25()`` is negative, lower = better,
  and is negated exactly once, in ``store.fts_search``); it is min-max normalised over the
  candidate pool, so the best keyword match scores 1 and a chunk without a match scores 0.
  Half of the text score (``LINE_SHARE``) is the chunk's line evidence
  (``keywords.line_evidence``): the query's terms together on one line.
- vector: cosine similarity is mapped through the embedder's calibration span (for the
  local MiniLM models 0.1 becomes 0, 0.5 becomes 0.76, saturating towards 1), so a
  paraphrase at the typical 0.35-0.6 of these models is a strong vector hit instead of one
  that ``0.7 * cosine`` would leave under
  ``minScore``. A chunk's cosine is the better of the whole chunk and its best segment,
  because a 400-token chunk often mixes topics and the matching lines are diluted.
``score = vectorWeight * vector + textWeight * text`` (weights already sum to 1); results
below ``minScore`` are dropped. With one half unavailable (no embeddings, no FTS5, or a
one-sided mode) the other carries the whole score.

Results are places in files: chunks cut from one very long line share its line range, so
``distinct`` keeps only the best-scored chunk per (path, startLine, endLine). Snippets are
shown on terminals and sent to models, so control characters in them become U+FFFD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawd.core import phrases
from clawd.memory import keywords
from clawd.memory.interface import SearchHit, citation

if TYPE_CHECKING:
    from clawd.memory.index_store import ChunkRow

SNIPPET_CHARS = 700
LINE_SHARE = 0.5

# English function words dropped from keyword queries (kept when a query has nothing else).
STOP_WORDS = phrases.FUNCTION_WORDS

# C0 controls except tab and newline, DEL, and C1 controls (0x9b is a terminal's CSI).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_COMPOUND = re.compile(r"[^\s\"'`()\[\]{},;:!?]+")


@dataclass(frozen=True, slots=True)
class Scored:
    """One merged candidate: its final score and the two normalised halves."""

    chunk_id: int
    score: float
    vector: float
    text: float


def query_terms(query: str) -> list[str]:
    """Lower-cased words of a query without stop words (all words if nothing else is left)."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    return list(dict.fromkeys(kept or words))


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression: any of the terms, plus each compound token as a phrase.

    Identifiers such as ``OPENAI_API_KEY`` or ``memorySearch.query.hybrid`` are split by the
    tokenizer; their phrase adds weight to chunks holding the exact sequence. A search plans
    its own, bounded query (``keywords.plan``); this unbounded one is what the benchmarks
    measure it against (``scripts/bench_keyword_stage.py``, ``scripts/bench_retrieval.py``).
    """
    terms = query_terms(query)
    if not terms:
        return None
    parts = [f'"{t}"' for t in terms] + ['"' + " ".join(p) + '"' for p in compounds(query)]
    return " OR ".join(dict.fromkeys(parts))


def compounds(query: str) -> list[list[str]]:
    """The lower-cased words of each compound token (``ZX-4471``, ``OPENAI_API_KEY``).

    Stop words at either end are not part of it: ``Nate's`` and ``don't`` are not compounds
    (the phrase ``nate s`` adds nothing, and walks the posting list of ``s``)."""
    found = []
    for token in _COMPOUND.findall(query):
        pieces = [w.lower() for w in _WORD.findall(token)]
        while pieces and pieces[-1] in STOP_WORDS:
            pieces.pop()
        while pieces and pieces[0] in STOP_WORDS:
            pieces.pop(0)
        if len(pieces) > 1:
            found.append(pieces)
    return found


def min_max(scores: Mapping[int, float]) -> dict[int, float]:
    """Scores scaled to 0..1 over the pool; a pool of equal scores is all 1."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return {key: 1.0 for key in scores}
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def calibrate(cosine: float, span: tuple[float, float]) -> float:
    """A cosine similarity as a 0..1 vector score through the embedder's (floor, ceiling).

    ``floor`` maps to 0 and ``ceiling`` to tanh(1) = 0.76; above it the score keeps rising
    towards 1 without ever reaching it, so close vectors never tie at a clipped maximum
    (vector-only ranking stays the cosine ranking).
    """
    floor, ceiling = span
    x = (cosine - floor) / (ceiling - floor) if ceiling > floor else cosine
    return math.tanh(x) if x > 0 else 0.0


def combine_cosines(chunk: float, best_segment: float) -> float:
    """A chunk's cosine from its whole-chunk vector and its best-matching segment."""
    return max(chunk, best_segment)


def shares(vector_weight: float, text_weight: float) -> tuple[float, float]:
    """The two weights as shares of 1 (half each when both are 0)."""
    total = vector_weight + text_weight
    if total <= 0:
        return 0.5, 0.5
    return vector_weight / total, text_weight / total


def estimate_owed(merged: list[Scored], vector: Mapping[int, float],
                  text: Mapping[int, float], owed: set[int], vector_weight: float,
                  text_weight: float) -> list[Scored]:
    """``merged`` with a guess for the chunks whose vector is still owed (a batch job has
    yet to deliver it): instead of a vector score of 0 (under minScore), the mean vector
    score of the keyword hits that have one, so their keywords place them among those;
    when no keyword hit has a vector yet, they are scored by keywords alone, as in a
    keyword-only index."""
    known = [vector[c] for c in text if c in vector]
    guess = sum(known) / len(known) if known else None
    vw, tw = shares(vector_weight, text_weight)
    return sorted((Scored(s.chunk_id, s.text if guess is None else vw * guess + tw * s.text,
                          s.vector if guess is None else guess, s.text)
                   if s.chunk_id in owed else s for s in merged),
                  key=lambda s: (-s.score, -s.text, s.chunk_id))


def merge_hybrid(vector: Mapping[int, float], text: Mapping[int, float],
                 vector_weight: float, text_weight: float,
                 lines: Mapping[int, float] | None = None) -> list[Scored]:
    """Union of both candidate pools, best first.

    ``vector`` holds 0..1 vector scores, ``text`` raw positive keyword scores (``-bm25``),
    ``lines`` the 0..1 line evidence of the keyword hits (when given, it is ``LINE_SHARE`` of
    the text score). A chunk one side did not return scores 0 on that side. The caller
    passes weight 0 for a half that is unavailable (no embeddings, no FTS5) so the other
    carries the score.
    """
    text_norm = min_max(text)
    if lines is not None:
        text_norm = {chunk_id: (1 - LINE_SHARE) * t + LINE_SHARE * lines.get(chunk_id, 0.0)
                     for chunk_id, t in text_norm.items()}
    vector_weight, text_weight = shares(vector_weight, text_weight)
    merged = []
    for chunk_id in set(vector) | set(text_norm):
        v, t = vector.get(chunk_id, 0.0), text_norm.get(chunk_id, 0.0)
        merged.append(Scored(chunk_id, vector_weight * v + text_weight * t, v, t))
    merged.sort(key=lambda s: (-s.score, -s.text, s.chunk_id))
    return merged


def keyword_floor(merged: Iterable[Scored], cover: Mapping[int, float],
                  keyword_only: bool = False) -> list[Scored]:
    """Either side is enough on its own: a chunk's score is at least what its keyword
    coverage earns alone (``keywords.alone``). With no vector half the score is the
    min-max keyword score times coverage squared, so the best of a pool of poor matches (one
    word of a three-word query) does not score 1. Best first again."""
    raised = []
    for s in merged:
        c = cover.get(s.chunk_id, 0.0)
        score = s.text * c * c if keyword_only else s.score
        raised.append(Scored(s.chunk_id, max(score, keywords.alone(c)), s.vector, s.text))
    raised.sort(key=lambda s: (-s.score, -s.text, s.chunk_id))
    return raised


def select(merged: Iterable[Scored], min_score: float, max_results: int) -> list[Scored]:
    """The results kept: at least ``min_score``, at most ``max_results``."""
    return [s for s in merged if s.score >= min_score - 1e-9][:max_results]


def distinct(ranked: Iterable[Scored], place: Callable[[int], Hashable | None],
             max_results: int) -> tuple[list[Scored], int]:
    """The first (best) candidate of each place, at most ``max_results``; and how many
    candidates were dropped as repeats. ``place(chunk_id)`` is None for a vanished chunk."""
    kept: list[Scored] = []
    seen: set[Hashable] = set()
    repeats = 0
    for scored in ranked:
        key = place(scored.chunk_id)
        if key is None:
            continue
        if key in seen:
            repeats += 1
            continue
        seen.add(key)
        kept.append(scored)
        if len(kept) >= max_results:
            break
    return kept, repeats


def printable(text: str) -> str:
    """``text`` with control characters other than newline and tab replaced by U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def snippet(text: str, terms: Iterable[str] = (), max_chars: int = SNIPPET_CHARS) -> str:
    """At most ``max_chars`` of a chunk: the window of whole lines with the most query terms,
    without control characters."""
    text = printable(text).strip()
    if len(text) <= max_chars:
        return text
    lines = text.split("\n")
    wanted = [t for t in terms if len(t) > 2]
    hits = [sum(1 for t in wanted if t[:5] in line.lower()) for line in lines]
    best_start, best_hits = 0, -1
    for start in range(len(lines)):
        size, count, end = 0, 0, start
        while end < len(lines) and size + len(lines[end]) + 1 <= max_chars:
            size += len(lines[end]) + 1
            count += hits[end]
            end += 1
        if count > best_hits:
            best_start, best_hits = start, count
        if end == len(lines):
            break
    window = "\n".join(lines[best_start:])
    if len(window) <= max_chars:
        return window
    cut = window.rfind(" ", 0, max_chars - 1)
    cut = cut if cut > max_chars // 2 else max_chars - 1
    return window[:cut].rstrip() + "…"


def hits(chosen: Iterable[Scored], rows: Mapping[int, ChunkRow], query: str,
         mark: Callable[[str, int, str], str]) -> list[SearchHit]:
    """The results as the tools and front ends get them: each chunk's snippet around the
    query's terms, after ``mark`` (path, first line, text) struck through what was
    replaced, with its lines, score, source and citation."""
    terms = query_terms(query)
    results: list[SearchHit] = []
    for s in chosen:
        row = rows[s.chunk_id]
        text = mark(row.path, row.start_line, row.text)
        results.append({"path": row.path, "startLine": row.start_line,
                        "endLine": row.end_line, "score": round(s.score, 4),
                        "snippet": snippet(text, terms), "source": row.source,
                        "citation": citation(row.path, row.start_line, row.end_line)})
    return results
