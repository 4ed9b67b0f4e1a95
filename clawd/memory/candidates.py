"""The candidates of one search: keyword hits through FTS5, vector hits through the
in-process matrix or vec0, merged into scored candidates.

``gather`` runs the keyword query on the index's FTS thread (its own read connection) while
the vector query runs in the calling thread, gives keyword hits the vector pool missed their
real vector score (the vectors of both are read in one query), and merges both sides by
the hybrid weights (``search.py``). Without embeddings it is keyword-only, without FTS5
vector-only. A chunk still waiting for its vector from a batch job is ranked with an
estimated vector score: the mean of the keyword hits that have one. Vector scores are
calibrated cosines; a chunk embedded as segments combines the chunk's cosine with its best
segment's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import apsw

from clawd.config import Query
from clawd.memory import keywords, search
from clawd.memory.base import EmbeddingError
from clawd.memory.embeddings import Embedders, signature
from clawd.memory.index_store import IndexStore, SearchFailed
from clawd.memory.matrix import VectorMatrix

log = logging.getLogger(__name__)


# Whether the keyword stage runs on the index's FTS thread while the vector stage runs here
# (True), or after it, in line. On a loaded 2-core machine both take the same time (the GIL
# lets little of them overlap); benchmarks switch it to compare.
KEYWORDS_ON_THREAD = True


def gather(store: IndexStore, embedders: Embedders, matrix: VectorMatrix, cfg: Query,
           executor: Callable[[], Executor], query: str, pool: int,
           mode: str) -> tuple[list[search.Scored], bool, bool, bool]:
    """The merged candidates of up to ``pool`` chunks from each side, best first; whether
    vectors and keywords were used; whether either side filled its pool."""
    used_text = mode != "vector" and store.fts_available
    # The keyword query runs on its own connection while the vector query runs here.
    pending = executor().submit(keyword_hits, store, query, pool) \
        if used_text and KEYWORDS_ON_THREAD else None
    nearest: list[int] = []
    qvec = None
    if mode != "text":
        nearest, qvec = vector_candidates(store, embedders, matrix, query, pool)
    used_vector = qvec is not None
    text: dict[int, float] = {}
    cover: dict[int, float] = {}
    lines: dict[int, float] = {}
    if used_text:
        try:
            found = pending.result() if pending is not None else \
                keyword_hits(store, query, pool)
        except (apsw.Error, SearchFailed) as exc:
            log.warning("memory keyword search failed: %s", exc)
            found = None
        used_text = found is not None
        text, cover, lines = found or ({}, {}, {})
    # One read of the vectors: the nearest chunks and the keyword hits the vector pool
    # missed (they still get their real vector score).
    near = set(nearest)
    others = [c for c in text if c not in near] if used_vector else []
    scored = vector_scores(store, embedders, qvec, nearest + others)
    vector = {c: scored[c] for c in nearest if c in scored}
    full = len(vector) >= pool or len(text) >= pool
    unembedded: set[int] = set()
    if used_vector and text:
        missing = [c for c in text if c not in vector]
        vector.update((c, scored[c]) for c in missing if c in scored)
        # Chunks still without a vector (a batch job has yet to deliver it).
        unembedded = {c for c in missing if c not in scored}
    weights = (cfg.hybrid.vector_weight if used_vector else 0.0,
               cfg.hybrid.text_weight if used_text else 0.0)
    merged = search.merge_hybrid(vector, text, *weights, lines=lines)
    if unembedded:
        merged = search.estimate_owed(merged, vector, text, unembedded, *weights)
    if used_text:
        merged = search.keyword_floor(merged, cover, keyword_only=not used_vector)
    return merged, used_vector, used_text, full


def keyword_hits(store: IndexStore, query: str, pool: int
                 ) -> tuple[dict[int, float], dict[int, float], dict[int, float]] | None:
    """The best ``pool`` keyword hits (chunk id -> -bm25), each one's coverage of the query
    and its line evidence; None when the query has no word to look for. Runs off the index
    lock, on the store's second connection."""
    plan = keywords.plan(search.query_terms(query), search.compounds(query),
                         store.fts_tokens, store.term_stats)
    if plan.match is None:
        return None
    hits = dict(store.fts_search(plan.match, pool, plan.newest))
    cover: dict[int, float] = {}
    chunks: dict[int, list[keywords.ChunkLine]] = {}
    for chunk_id, (body, heading, lines) in store.keyword_chunks(hits).items():
        chunks[chunk_id] = keywords.chunk_lines(body, lines, plan.terms)
        held = set(heading)
        held.update(*(ln.tokens for ln in chunks[chunk_id]))
        cover[chunk_id] = keywords.coverage(plan.terms, held)
    return hits, cover, keywords.line_evidence(plan.terms, chunks)


def query_vector(store: IndexStore, embedders: Embedders, query: str) -> Any | None:
    """The query's vector, or None when the index has no usable vectors for it."""
    embedder = embedders.get()
    if embedder is None or store.get_meta("embedding") != signature(embedder):
        return None
    try:
        import numpy as np

        return np.asarray(embedder.embed_query(query), dtype=np.float32)
    except EmbeddingError as exc:
        log.warning("memory search is keyword-only: %s", exc)
        embedders.error = str(exc)
        return None


def vector_candidates(store: IndexStore, embedders: Embedders, matrix: VectorMatrix, query: str,
                      pool: int) -> tuple[list[int], Any | None]:
    """The ids of the ``pool`` nearest chunks, and the query vector (None when vector
    search is unavailable)."""
    qvec = query_vector(store, embedders, query)
    if qvec is None or not store.dims:
        return [], None
    # The in-process matrix when it is in step with the store, else vec0 (the matrix loads
    # meanwhile); without sqlite-vec the matrix is the only way and is loaded in line. A
    # store that finds the nearest chunks itself (pgvector's HNSW) is asked directly.
    nearest = matrix.nearest(store, qvec, pool, wait=not store.vec_available) \
        if store.knn_in_process else None
    if nearest is None:
        try:
            nearest = [cid for cid, _ in store.vec_knn(qvec.tobytes(), pool)]
        except SearchFailed as exc:
            log.warning("memory search is keyword-only: %s", exc)
            return [], None
    return nearest, qvec


def vector_scores(store: IndexStore, embedders: Embedders, qvec: Any,
                  chunk_ids: list[int]) -> dict[int, float]:
    """Calibrated 0..1 vector scores of the given chunks for the query vector, read in one
    query. Each chunk is scanned on its own: stacking them into one matrix would be 0.2 ms
    faster for 44 chunks, but rounds differently, and the segment two overlapping chunks
    share then ties where it did not before (vector-only ranking changed in 81 of 762
    LoCoMo questions, R@1 42.9 -> 42.5)."""
    import numpy as np

    embedder = embedders.active
    if qvec is None or embedder is None or not chunk_ids:
        return {}
    scores: dict[int, float] = {}
    for chunk_id, (blob, segments) in store.get_vectors(chunk_ids).items():
        if blob is None:
            continue
        cosine = float(np.frombuffer(blob, dtype=np.float32) @ qvec)
        if segments:
            matrix = np.frombuffer(segments, dtype=np.float32).reshape(-1, len(qvec))
            cosine = search.combine_cosines(cosine, float((matrix @ qvec).max()))
        scores[chunk_id] = search.calibrate(cosine, embedder.calibration)
    return scores


def chunk_vectors(store: IndexStore, chunk_ids: list[int]) -> dict[int, Any]:
    """The whole-chunk vectors of the given chunks (those that have one), read in one
    query; what MMR compares results by."""
    import numpy as np

    return {chunk_id: np.frombuffer(blob, dtype=np.float32)
            for chunk_id, (blob, _) in store.get_vectors(chunk_ids).items() if blob is not None}
