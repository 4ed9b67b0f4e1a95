"""The OpenAI embedder: the embeddings endpoint of the OpenAI SDK, or any compatible server
via ``remote.baseUrl``/``apiKey``/``headers``; large backfills go through the Batch API with
``remote.batch`` (waited for by ``jobs.py``, or collected later by ``batches.py``).

The SDK is imported only when used. Its calls are retried by the policy of ``retry.py``
(the SDK's own retries are off). A job is one JSONL file of embedding requests
(``SYNC_BATCH`` inputs each); vectors come back base64-encoded.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

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

T = TypeVar("T")

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"
SYNC_BATCH = 128  # inputs per synchronous embeddings request
# The Batch API takes at most 50,000 embedding inputs and 200 MB per input file; smaller jobs
# keep each output file (and what one failed job costs) small.
OPENAI_BATCH_TEXTS = 10_000
OPENAI_BATCH_BYTES = 100_000_000
OPENAI_BATCH_FAILED = ("failed", "expired", "cancelled")


class OpenAIEmbedder:
    """OpenAI (or a compatible server) through the official SDK; Batch API for backfills."""

    provider = "openai"
    segment_tokens: int | None = None  # 8k-token window: a chunk is embedded whole
    calibration = (0.1, 0.6)

    def __init__(self, settings: MemorySearch, api_key: str, model: str | None = None,
                 base_url: str | None = None):
        self.settings = settings
        self.model = model or OPENAI_DEFAULT_MODEL
        self.api_key = api_key
        self.base_url = (base_url or settings.remote.base_url
                         or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE)
        self.headers = dict(settings.remote.headers)
        self.fingerprint = endpoint_fingerprint("openai", self.base_url.rstrip("/"),
                                                sorted(self.headers.items()))
        self.dims: int | None = None
        self.batch_min_texts = BATCH_MIN_TEXTS
        self.batch_job_texts = OPENAI_BATCH_TEXTS
        self.batch_job_bytes: int | None = OPENAI_BATCH_BYTES
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import openai  # imported here: the SDK costs start-up time

            self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url,
                                         default_headers=self.headers or None,
                                         timeout=60.0, max_retries=0)
        return self._client

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """One SDK call under the retry policy."""
        return retry.call(fn, _failure, what=f"openai {what}")

    def embed_query(self, text: str) -> Any:
        return self._sync([text])[0]

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        """Vectors of ``texts``, waiting for them. Large backfills go through batch jobs when
        ``remote.batch`` is enabled with ``wait``; with ``wait: false`` the index submits jobs
        itself and does not wait, so a call here is answered by the synchronous endpoint."""
        return embed_waiting(self, texts, progress, self._sync, SYNC_BATCH)

    def _sync(self, texts: list[str]) -> list[Any]:
        import openai

        try:
            response = self._call("embeddings", lambda: self.client().embeddings.create(
                model=self.model, input=texts, encoding_format="float"))
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"openai embeddings failed: {exc}") from None
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingError(f"openai embeddings: {len(data)} vectors for {len(texts)} texts")
        vectors = normalise([item.embedding for item in data])
        self.dims = int(vectors.shape[1])
        return list(vectors)

    # The Batch API: one JSONL file of embedding requests (``SYNC_BATCH`` inputs each,
    # ``custom_id`` = offset of the request's first text in the job) per job. Vectors come
    # back base64-encoded (little-endian float32): a quarter of the output of JSON floats.
    def submit_batch_job(self, texts: Sequence[str]) -> tuple[str, BatchStatus]:
        import openai

        requests = [{"custom_id": str(start), "method": "POST", "url": "/v1/embeddings",
                     "body": {"model": self.model, "input": list(texts[start:start + SYNC_BATCH]),
                              "encoding_format": "base64"}}
                    for start in range(0, len(texts), SYNC_BATCH)]
        body = "\n".join(json.dumps(r) for r in requests).encode()
        client = self.client()
        try:
            uploaded = self._call("upload", lambda: client.files.create(
                file=("embeddings.jsonl", body), purpose="batch"))
            job = self._call("batch", lambda: client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"))
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"openai batch failed: {exc}") from None
        if job.status in OPENAI_BATCH_FAILED:
            return job.id, BatchStatus("failed", _openai_detail(job))
        return job.id, BatchStatus("pending", job.status)

    def poll_batch_job(self, job_id: str, count: int) -> BatchStatus:
        import openai

        try:
            job = self._call("poll", lambda: self.client().batches.retrieve(job_id))
            if job.status in OPENAI_BATCH_FAILED:
                return BatchStatus("failed", _openai_detail(job), self._partial(job, count))
            if job.status != "completed":
                return BatchStatus("pending", job.status)
            if not job.output_file_id:
                return BatchStatus("failed", _openai_detail(job, "completed without output"))
            vectors, error = self._batch_output(job.output_file_id, count)
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"openai batch {job_id}: {exc}") from None
        return BatchStatus("completed", error or "completed", vectors)

    def _partial(self, job: Any, count: int) -> list[Any] | None:
        """What an expired or cancelled batch finished, if its output can be read."""
        import openai

        if not job.output_file_id:
            return None
        try:
            return self._batch_output(job.output_file_id, count)[0]
        except openai.OpenAIError as exc:
            log.info("openai batch %s: its partial output is unavailable: %s", job.id, exc)
            return None

    def cancel_batch_job(self, job_id: str) -> None:
        import openai

        try:
            self._call("cancel", lambda: self.client().batches.cancel(job_id))
        except openai.OpenAIError as exc:
            log.info("openai batch %s could not be cancelled: %s", job_id, exc)

    def _batch_output(self, file_id: str, count: int) -> tuple[list[Any], str]:
        """One vector per text of the job (None where its request failed), and the first
        request error."""
        content = self._call("output", lambda: self.client().files.content(file_id))
        text = content.text if hasattr(content, "text") else content.read().decode()
        vectors: list[Any] = [None] * count
        error = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                response = item.get("response") or {}
                if item.get("error") or response.get("status_code", 200) >= 400:
                    error = error or (f"request {item.get('custom_id')} failed: "
                                      f"{item.get('error') or response.get('body')}")
                    continue
                start = int(item["custom_id"])
                data = sorted(response["body"]["data"], key=lambda d: d["index"])
                got = normalise([_embedding(d["embedding"]) for d in data])
            except (ValueError, KeyError, TypeError) as exc:  # binascii.Error is a ValueError
                error = error or f"unreadable result line: {exc}"
                continue
            for offset, vector in enumerate(got):
                if 0 <= start + offset < count:
                    vectors[start + offset] = vector
        found = next((v for v in vectors if v is not None), None)
        if found is not None:
            self.dims = len(found)
        return vectors, error


def _embedding(value: Any) -> Any:
    """One embedding of a result line: base64 of little-endian float32, or a list of floats."""
    if isinstance(value, str):
        import numpy as np

        raw = base64.b64decode(value, validate=True)
        if not raw or len(raw) % 4:
            raise ValueError(f"a base64 embedding of {len(raw)} bytes")
        return np.frombuffer(raw, dtype="<f4")
    return value


def _openai_detail(job: Any, status: str | None = None) -> str:
    """A batch's state with the errors OpenAI reported for it."""
    errors = getattr(getattr(job, "errors", None), "data", None) or []
    messages = "; ".join(str(getattr(e, "message", e)) for e in errors[:3])
    status = status or job.status
    return f"{status}: {messages}" if messages else status


def _failure(exc: Exception) -> retry.Failure | None:
    """How the retry policy sees an SDK error."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return retry.for_status(exc.status_code, exc.response.headers)
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return retry.TRANSIENT
    return None
