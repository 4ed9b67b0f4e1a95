"""BM25 as SQLite's FTS5 computes it, for a store that ranks keyword hits itself.

The keyword half asks its store an FTS5 query: quoted phrases joined by ``OR``
(``keywords.plan``). The SQLite file answers it with FTS5's ``bm25()``; PostgreSQL finds the
matching chunks with a ``tsvector`` and ranks them here, by the same formula, so both stores
order keyword hits alike (up to rounding):

    score = sum over phrases of idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))

with ``k1 = 1.2``, ``b = 0.75``; ``f`` the phrase's occurrences in the chunk (heading and
text), ``D`` the chunk's token count, ``avgdl`` the mean token count of the agent's chunks,
``idf = ln((N - n + 0.5) / (n + 0.5))`` over the ``N`` chunks of which ``n`` hold the phrase,
and an ``idf`` of 0 or less counted as ``1e-6`` (FTS5's floor for very common phrases).
Pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence, Set

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6

_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def phrases(match: str) -> list[str]:
    """The phrases of an FTS5 query as ``keywords.plan`` writes it (``"a" OR "b c"``),
    unquoted."""
    return [found.replace('""', '"') for found in _PHRASE.findall(match)]


def idf(holding: int, total: int) -> float:
    value = math.log((total - holding + 0.5) / (holding + 0.5)) if total else 0.0
    return value if value > 0 else IDF_FLOOR


def occurrences(phrase: Sequence[str], positions: Mapping[str, Set[int]]) -> int:
    """How often the tokens of ``phrase`` stand next to each other, in order, in a chunk
    whose tokens are at ``positions`` (token -> its positions)."""
    first = positions.get(phrase[0], set())
    if len(phrase) == 1:
        return len(first)
    rest = [positions.get(token, set()) for token in phrase[1:]]
    return sum(1 for start in first
               if all(start + step in held for step, held in enumerate(rest, start=1)))


def score(frequencies: Sequence[int], idfs: Sequence[float], length: int,
          average: float) -> float:
    """The BM25 of one chunk of ``length`` tokens holding each phrase ``frequencies``
    times (``idfs`` alike); higher is better."""
    norm = K1 * (1 - B + B * length / average) if average > 0 else K1
    return sum(weight * f * (K1 + 1) / (f + norm)
               for f, weight in zip(frequencies, idfs) if f)
