"""Gemini embeddings over its REST API (standard library HTTP, no SDK).

Queries use ``models/<model>:embedContent`` with task type ``RETRIEVAL_QUERY``; documents go
to ``:batchEmbedContents`` (up to 100 per call) with ``RETRIEVAL_DOCUMENT``, or, for large
backfills with ``remote.batch.enabled``, to the asynchronous ``:asyncBatchEmbedContent``
job, which is polled every ``pollIntervalMs`` until it succeeds, fails or reaches
``timeoutMinutes``. The key travels in the ``x-goog-api-key`` header; ``remote.baseUrl``
and ``remote.headers`` point the client at a proxy.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clawd.config import MemorySearch
from clawd.memory.embeddings import (
    BATCH_MIN_TEXTS,
    GEMINI_DEFAULT_MODEL,
    EmbeddingError,
    endpoint_fingerprint,
    estimate_tokens,
    normalise,
)

log = logging.getLogger(__name__)

GEMINI_DEFAULT_BASE = "https://generativelanguage.googleapis.com/v1beta"
SYNC_BATCH = 100  # the batchEmbedContents limit
ASYNC_JOB_SIZE = 5000  # inlined requests per async job (the inline payload is capped at 20 MB)
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
        self.timeout = 60.0

    count_tokens = staticmethod(estimate_tokens)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        url = path if path.startswith("http") else f"{self.base_url}/{path.lstrip('/')}"
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json", "x-goog-api-key": self.api_key,
                   **self.headers}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
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
        batch = self.settings.remote.batch
        if batch.enabled and batch.wait and len(texts) >= self.batch_min_texts:
            vectors = self._async_batch(list(texts))
            if progress:
                progress(len(texts))
            return vectors
        out: list[Any] = []
        for start in range(0, len(texts), SYNC_BATCH):
            part = list(texts[start:start + SYNC_BATCH])
            data = self._request("POST", f"models/{self.model}:batchEmbedContents",
                                 {"requests": [self._content(t, "RETRIEVAL_DOCUMENT")
                                               for t in part]})
            embeddings = (data or {}).get("embeddings") or []
            if len(embeddings) != len(part):
                raise EmbeddingError(f"gemini embeddings: {len(embeddings)} vectors for "
                                     f"{len(part)} texts")
            out.extend(normalise([e["values"] for e in embeddings]))
            if progress:
                progress(len(part))
        if out:
            self.dims = len(out[0])
        return out

    def _async_batch(self, texts: list[str]) -> list[Any]:
        jobs = [(start, texts[start:start + ASYNC_JOB_SIZE])
                for start in range(0, len(texts), ASYNC_JOB_SIZE)]
        workers = max(1, self.settings.remote.batch.concurrency)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(lambda job: self._run_job(*job), jobs))
        vectors = [v for part in parts for v in part]
        if vectors:
            self.dims = len(vectors[0])
        return vectors

    def _run_job(self, offset: int, texts: list[str]) -> list[Any]:
        cfg = self.settings.remote.batch
        requests = [{"request": self._content(t, "RETRIEVAL_DOCUMENT"),
                     "metadata": {"key": str(offset + i)}} for i, t in enumerate(texts)]
        body = {"batch": {"displayName": f"clawd-memory-{offset}",
                          "inputConfig": {"requests": {"requests": requests}}}}
        job = self._request("POST", f"models/{self.model}:asyncBatchEmbedContent", body) or {}
        name = job.get("name")
        if not name:
            raise EmbeddingError("gemini batch: the job has no name")
        deadline = time.monotonic() + cfg.timeout_minutes * 60
        while not _finished(job):
            if time.monotonic() > deadline:
                raise EmbeddingError(f"gemini batch {name} timed out after "
                                     f"{cfg.timeout_minutes:g} minutes")
            time.sleep(cfg.poll_interval_ms / 1000)
            job = self._request("GET", name) or {}
        state = _state(job)
        if job.get("error") or (state and not state.endswith("SUCCEEDED")):
            raise EmbeddingError(f"gemini batch {name} ended {state or job.get('error')}")
        responses = _inlined_responses(job)
        if len(responses) != len(texts):
            raise EmbeddingError(f"gemini batch {name}: {len(responses)} results for "
                                 f"{len(texts)} texts")
        by_key: dict[int, Any] = {}
        for index, item in enumerate(responses):
            key = int((item.get("metadata") or {}).get("key", offset + index)) - offset
            if item.get("error"):
                raise EmbeddingError(f"gemini batch request {key} failed: {item['error']}")
            values = (item.get("response") or {}).get("embedding", {}).get("values")
            if not values:
                raise EmbeddingError(f"gemini batch request {key}: no vector")
            by_key[key] = values
        return list(normalise([by_key[i] for i in range(len(texts))]))


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
