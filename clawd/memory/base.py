"""What every embedder is built from, below the factory in ``embeddings.py``.

An embedder turns texts into L2-normalised float32 vectors. Each exposes ``provider``,
``model``, ``fingerprint`` (of the endpoint, never the key itself), ``dims`` (known after the
first call), ``segment_tokens`` (the size of the pieces a chunk is embedded in when the
model's window is short, else None) and ``calibration`` (the cosine span mapped onto a 0..1
vector score). An embedder that segments also exposes ``tokenize(texts)`` (its tokens of each
text, as ``chunker.TokenizedText``) and ``embed_tokens(ids, progress)``, so the segments are cut by
its own token counts and never tokenized a second time.

Embedders with an asynchronous batch endpoint (OpenAI's Batch API, Gemini's async batch job)
also expose three steps: ``submit_batch_job(texts)`` starts one job and returns its id with a
first ``BatchStatus``, ``poll_batch_job(job_id, count)`` looks at it once (never waits) and
``cancel_batch_job(job_id)`` gives it up (``jobs.py`` runs them).

The concrete embedders (``local.py``, ``openai_embed.py``, ``gemini.py``) import this module
and never the factory, so the factory can import them without a circle.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clawd.config import MemorySearch
from clawd.core.errors import ClawdError

BATCH_MIN_TEXTS = 100  # fewer texts than this go through the synchronous endpoint


class EmbeddingError(ClawdError):
    """An embedding provider could not produce vectors (setup or call failed)."""


class Embedder(Protocol):
    provider: str
    model: str
    fingerprint: str
    dims: int | None
    segment_tokens: int | None
    calibration: tuple[float, float]

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]: ...

    def embed_query(self, text: str) -> Any: ...


@dataclass(slots=True)
class BatchStatus:
    """One look at a batch job.

    ``state`` is ``pending``, ``completed`` or ``failed``; ``detail`` is the provider's own
    state name (with its error message, if any); ``vectors`` holds one normalised vector per
    text of the job, None where that request failed: always for a completed job, and for a
    failed one whose finished part is still available (an expired OpenAI batch).
    """

    state: str
    detail: str = ""
    vectors: list[Any] | None = None


class BatchEmbedder(Embedder, Protocol):
    settings: MemorySearch
    batch_min_texts: int  # fewer texts than this are embedded synchronously
    batch_job_texts: int  # at most this many texts per job
    batch_job_bytes: int | None  # and at most about this many bytes of request per job

    def submit_batch_job(self, texts: Sequence[str]) -> tuple[str, BatchStatus]: ...

    def poll_batch_job(self, job_id: str, count: int) -> BatchStatus: ...

    def cancel_batch_job(self, job_id: str) -> None: ...


def normalise(vectors: Any) -> Any:
    """Rows scaled to unit length, as float32 (zero rows stay zero)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def endpoint_fingerprint(*parts: Any) -> str:
    """A short hash identifying an endpoint; keys and header values never appear in clear."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
