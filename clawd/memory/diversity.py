"""Diversity in search results: maximal marginal relevance (MMR) over the chunk vectors.

The same fact written in several daily logs makes several chunks that all match a query
well; ranked by score alone they fill the results and push a different note out. With
``query.mmr`` on, results are picked one at a time, each the candidate with the best

    lambda * score - (1 - lambda) * (highest cosine to a result already picked)

so the first result is always the best-scored one, and ``lambda`` 1 is the plain ranking.
Similarity is the cosine of the whole-chunk vectors already in the index; a chunk without
a vector (keyword-only index, a vector a batch job still owes) is similar to nothing, so
without embeddings MMR changes nothing. Pure functions; ``index.py`` reads the vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clawd.memory.search import Scored


def cosine(a: Any, b: Any) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    import numpy as np

    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / norms if norms > 0 else 0.0


def mmr(ranked: Sequence[Scored], vectors: Mapping[int, Any], lam: float,
        limit: int) -> list[Scored]:
    """At most ``limit`` of ``ranked`` (best first) in MMR order; scores are not changed.

    ``vectors`` maps chunk ids to their vectors; a chunk missing from it is similar to
    nothing. Ties go to the candidate ranked first."""
    remaining = list(ranked)
    chosen: list[Scored] = []
    closest = {s.chunk_id: 0.0 for s in remaining}  # highest cosine to a chosen result
    while remaining and len(chosen) < limit:
        best = max(range(len(remaining)), key=lambda i: (
            lam * remaining[i].score - (1 - lam) * closest[remaining[i].chunk_id], -i))
        picked = remaining.pop(best)
        chosen.append(picked)
        vec = vectors.get(picked.chunk_id)
        if vec is None:
            continue
        for s in remaining:
            other = vectors.get(s.chunk_id)
            if other is not None:
                closest[s.chunk_id] = max(closest[s.chunk_id], cosine(vec, other))
    return chosen
