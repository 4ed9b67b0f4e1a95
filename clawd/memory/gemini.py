"""Gemini embeddings over its REST API (standard library HTTP, no SDK).

Queries use ``models/<model>:embedContent`` with task type ``RETRIEVAL_QUERY``; documents go
to ``:batchEmbedContents`` (up to 100 per call) with ``RETRIEVAL_DOCUMENT``, or, for large
backfills with ``remote.batch.enabled``, to the asynchronous ``:asyncBatchEmbedContent``
job (``submit_batch_job`` / ``poll_batch_job`` / ``cancel_batch_job``, the steps shared
with OpenAI in ``base.py``): with ``wait`` it is polled every ``pollIntervalMs`` until
it succeeds, fails or reaches ``timeoutMinutes``; with ``wait: false`` the index collects it
on a later sync. The key travels in the ``x-goog-api-key`` header; ``remote.baseUrl`` and
``remote.headers`` point the client at a proxy. Failed requests are retried by the policy
of ``retry.py``.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from clawd.config import MemorySearch
from clawd.memory import retry
from clawd.memory.base import (
    BATCH_MIN_TEXTS,
    BatchStatus,
    EmbeddingError,
    endpoint_fingerprint,
    normalise,
)
from clawd.memory.jobs import embed_waiting

log = logging.getLogger(__name__)

GEMINI_DEFAULT_MODEL = "gemini-embedding-001"
GEMINI_DEFAULT_BASE = "https://generativelanguage.googleapis.com/v1beta"
SYNC_BATCH = 100  # the batchEmbedContents limit
ASYNC_JOB_SIZE = 5000  # inlined requests per async job
ASYNC_JOB_BYTES = 15_000_000  # the inlined requests of one job are capped at 20 MB
DONE_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")


class GeminiEmbedder:
    provider = "gemini"
    segment_tokens: int | None = None  # 2k-token window: a chunk is embedded whole
    # gemini-embedding-001 puts unrelated text near 0.5 and related text at 0.7-0.85.
    calibration = (0.45, 0.85)

    def __init__(self, settings: MemorySearch, api_key: str, model: str | None = None):
        self.settings = settings
        self.model = (model or GEMINI_DEFAULT_MODEL).removeprefix("models/")
        self.api_key = api_key
        self.base_url = (settings.remote.base_url or GEMINI_DEFAULT_BASE).rstrip("/")
        self.headers = dict(settings.remote.headers)
        self.fingerprint = endpoint_fingerprint("gemini", self.base_url,
                                                sorted(self.headers.items()))
        self.dims: int | None = None
        self.batch_min_texts = BATCH_MIN_TEXTS
        self.batch_job_texts = ASYNC_JOB_SIZE
        self.batch_job_bytes: int | None = ASYNC_JOB_BYTES
        self.timeout = 60.0

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        url = path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json", "x-goog-api-key": self.api_key,
                   **self.headers}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)

        def send() -> bytes:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()

        try:
            return json.loads(retry.call(send, _failure, what=f"gemini {method}") or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            raise EmbeddingError(f"gemini embeddings failed: HTTP {exc.code}: {detail}") \
                from None
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
            raise EmbeddingError(f"gemini embeddings failed: {exc}") from None

    def _content(self, text: str, task: str) -> dict[str, Any]:
        return {"model": f"models/{self.model}", "content": {"parts": [{"text": text}]},
                "taskType": task}

    def embed_query(self, text: str) -> Any:
        data = self._request("POST", f"models/{self.model}:embedContent",
                             self._content(text, "RETRIEVAL_QUERY"))
        values = (data or {}).get("embedding", {}).get("values")
        if not values:
            raise EmbeddingError("gemini embeddings: no vector in the response")
        vector = normalise([values])[0]
        self.dims = len(vector)
        return vector

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        return embed_waiting(self, texts, progress, self._embed_part, SYNC_BATCH)

    def _embed_part(self, part: list[str]) -> list[Any]:
        """One synchronous ``batchEmbedContents`` call."""
        data = self._request("POST", f"models/{self.model}:batchEmbedContents",
                             {"requests": [self._content(t, "RETRIEVAL_DOCUMENT")
                                           for t in part]})
        embeddings = (data or {}).get("embeddings") or []
        if len(embeddings) != len(part):
            raise EmbeddingError(f"gemini embeddings: {len(embeddings)} vectors for "
                                 f"{len(part)} texts")
        vectors = list(normalise([e["values"] for e in embeddings]))
        if vectors:
            self.dims = len(vectors[0])
        return vectors

    def submit_batch_job(self, texts: Sequence[str]) -> tuple[str, BatchStatus]:
        requests = [{"request": self._content(t, "RETRIEVAL_DOCUMENT"),
                     "metadata": {"key": str(i)}} for i, t in enumerate(texts)]
        body = {"batch": {"displayName": f"clawd-memory-{len(texts)}",
                          "inputConfig": {"requests": {"requests": requests}}}}
        job = self._request("POST", f"models/{self.model}:asyncBatchEmbedContent", body) or {}
        name = job.get("name")
        if not name:
            raise EmbeddingError("gemini batch: the job has no name")
        status = self._status(job, len(texts))
        # Results are read by polling, even from a job finished at once.
        return name, status if status.state == "failed" else BatchStatus("pending",
                                                                          status.detail)

    def poll_batch_job(self, job_id: str, count: int) -> BatchStatus:
        return self._status(self._request("GET", job_id) or {}, count)

    def cancel_batch_job(self, job_id: str) -> None:
        try:
            self._request("POST", f"{job_id}:cancel", {})
        except EmbeddingError as exc:
            log.info("gemini batch %s could not be cancelled: %s", job_id, exc)

    def _status(self, job: dict[str, Any], count: int) -> BatchStatus:
        state = _state(job)
        if not _finished(job):
            return BatchStatus("pending", state)
        if job.get("error") or (state and not state.endswith("SUCCEEDED")):
            return BatchStatus("failed", state or json.dumps(job.get("error"))[:300])
        vectors: list[Any] = [None] * count
        error = ""
        for index, item in enumerate(_inlined_responses(job)):
            try:
                key = int((item.get("metadata") or {}).get("key", index))
            except (TypeError, ValueError):
                key = index
            values = (item.get("response") or {}).get("embedding", {}).get("values")
            if item.get("error") or not values or not 0 <= key < count:
                error = error or f"request {key} failed: {item.get('error') or 'no vector'}"
                continue
            vectors[key] = normalise([values])[0]
        found = next((v for v in vectors if v is not None), None)
        if found is not None:
            self.dims = len(found)
        return BatchStatus("completed", error or state or "done", vectors)


def _failure(exc: Exception) -> retry.Failure | None:
    """How the retry policy sees a failed request (a reply that is not JSON is no failure
    of the request)."""
    if isinstance(exc, urllib.error.HTTPError):
        return retry.for_status(exc.code, exc.headers)
    if isinstance(exc, (urllib.error.URLError, TimeoutError, OSError)):
        return retry.TRANSIENT
    return None


def _state(job: dict[str, Any]) -> str:
    meta = job.get("metadata") or {}
    return str(meta.get("state") or job.get("state") or "")


def _finished(job: dict[str, Any]) -> bool:
    return bool(job.get("done")) or _state(job).endswith(DONE_STATES)


def _inlined_responses(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-request results, wherever this API version nests them."""
    for holder in (job.get("response"), (job.get("metadata") or {}).get("output"),
                   job.get("output")):
        if not isinstance(holder, dict):
            continue
        inlined = holder.get("inlinedResponses")
        if isinstance(inlined, dict):
            inlined = inlined.get("inlinedResponses")
        if isinstance(inlined, list):
            return inlined
    return []
