"""Embedding providers for memory search, and the choice between them.

An embedder turns texts into L2-normalised float32 vectors. Providers: ``local`` (an ONNX
MiniLM on the CPU, see ``local.py``), ``openai`` (the embeddings endpoint of the OpenAI SDK,
or any compatible server via ``remote.baseUrl``/``apiKey``/``headers``; large backfills go
through the Batch API with ``remote.batch``) and ``gemini`` (see ``gemini.py``). ``auto``
is ``local`` unless the memory config sets ``remote.apiKey``: a key in the environment (set
for chat) never moves embeddings off the machine. ``fallback`` names the provider
used when the primary cannot start or fails; the index records which one built it.

Each embedder exposes ``provider``, ``model``, ``fingerprint`` (of the endpoint, never the key
itself), ``dims`` (known after the first call), ``segment_tokens`` (the size of the pieces a
chunk is embedded in when the model's window is short, else None) and ``calibration`` (the
cosine span mapped onto a 0..1 vector score). An embedder that segments also exposes
``tokenize(texts)`` (its tokens of each text, as ``chunker.Tokens``) and
``embed_tokens(ids, progress)``, so the segments are cut by its own token counts and never
tokenized a second time. The OpenAI SDK is imported only when used.

Embedders with an asynchronous batch endpoint (OpenAI's Batch API, Gemini's async batch
job) also expose three steps: ``submit_batch_job(texts)`` starts one job and returns its id
with a first ``BatchStatus``, ``poll_batch_job(job_id, count)`` looks at it once (never
waits) and ``cancel_batch_job(job_id)`` gives it up. With ``remote.batch.wait`` (the
default) ``run_batch_jobs`` submits the jobs and polls them until they finish, handing over
each job's vectors as it completes; with ``wait: false`` the index submits them, records
them and collects them on later syncs (``batches.py``). ``split_batch_jobs`` keeps each job
within the provider's limits (``batch_job_texts`` texts, about ``batch_job_bytes`` bytes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol

from clawd.config import MemorySearch
from clawd.errors import ClawdError

log = logging.getLogger(__name__)

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"
GEMINI_DEFAULT_MODEL = "gemini-embedding-001"
SYNC_BATCH = 128  # inputs per synchronous embeddings request
BATCH_MIN_TEXTS = 100  # fewer texts than this go through the synchronous endpoint
# The Batch API takes at most 50,000 embedding inputs and 200 MB per input file; smaller jobs
# keep each output file (and what one failed job costs) small.
OPENAI_BATCH_TEXTS = 10_000
OPENAI_BATCH_BYTES = 100_000_000
BATCH_TEXT_OVERHEAD = 200  # JSON bytes around each text in a job's upload, generously
OPENAI_BATCH_FAILED = ("failed", "expired", "cancelled")


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


def supports_batches(embedder: Any) -> bool:
    """Whether ``embedder`` has an asynchronous batch endpoint."""
    return all(callable(getattr(embedder, name, None)) for name in
               ("submit_batch_job", "poll_batch_job", "cancel_batch_job"))


def split_batch_jobs(embedder: Any, texts: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of each job ``texts`` go out in: at most ``batch_job_texts`` texts and,
    when the embedder sets ``batch_job_bytes``, about that many bytes of request."""
    size = max(1, int(getattr(embedder, "batch_job_texts", 0) or len(texts) or 1))
    budget = getattr(embedder, "batch_job_bytes", None)
    parts: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, text in enumerate(texts):
        cost = len(json.dumps(text)) + BATCH_TEXT_OVERHEAD if budget else 0
        if i > start and (i - start >= size or (budget and used + cost > budget)):
            parts.append((start, i))
            start, used = i, 0
        used += cost
    if start < len(texts):
        parts.append((start, len(texts)))
    return parts


def waits_for_batches(embedder: Any, count: int) -> bool:
    """Whether ``count`` texts go through batch jobs that are waited for: an embedder with a
    batch endpoint, ``remote.batch`` enabled with ``wait``, and a backfill large enough."""
    if not supports_batches(embedder):
        return False
    batch = embedder.settings.remote.batch
    return batch.enabled and batch.wait and count >= embedder.batch_min_texts


def embed_waiting(embedder: BatchEmbedder, texts: Sequence[str],
                  progress: Callable[[int], None] | None,
                  embed_part: Callable[[list[str]], list[Any]], part_size: int) -> list[Any]:
    """Vectors of ``texts``, waited for: through batch jobs for a large backfill when
    ``remote.batch`` is enabled with ``wait``, else ``part_size`` texts per synchronous
    ``embed_part`` call. ``progress`` counts texts."""
    if waits_for_batches(embedder, len(texts)):
        return run_batch_jobs(embedder, list(texts), progress)
    out: list[Any] = []
    for start in range(0, len(texts), part_size):
        part = list(texts[start:start + part_size])
        out.extend(embed_part(part))
        if progress:
            progress(len(part))
    return out


def run_batch_jobs(embedder: BatchEmbedder, texts: list[str],
                   progress: Callable[[int], None] | None = None,
                   on_done: Callable[[int, list[Any]], None] | None = None) -> list[Any]:
    """Embed ``texts`` through batch jobs and wait for them (``remote.batch.wait``).

    Jobs (see ``split_batch_jobs``) run ``remote.batch.concurrency`` at a time; each is
    polled every ``pollIntervalMs`` and given up (cancelled) after ``timeoutMinutes``. As
    each job completes, ``on_done(start, vectors)`` receives its vectors (``start`` is the
    offset of its first text) and ``progress`` its count, in the calling thread. When a
    job fails, the jobs not started yet are not submitted, those running are still waited
    for (and handed to ``on_done``), then the first error is raised.
    """
    parts = split_batch_jobs(embedder, texts)
    workers = max(1, min(len(parts), embedder.settings.remote.batch.concurrency))

    def run(start: int, end: int) -> list[Any]:
        job_id, status = embedder.submit_batch_job(texts[start:end])
        return wait_for_batch_job(embedder, job_id, status, end - start)

    done: dict[int, list[Any]] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run, start, end): start for start, end in parts}
        for future in as_completed(futures):
            if future.cancelled():
                continue
            try:
                got = future.result()
            except Exception as exc:  # noqa: BLE001 - raised once the running jobs are in
                if error is None:
                    error = exc
                    for other in futures:
                        other.cancel()
                continue
            done[futures[future]] = got
            if on_done:
                on_done(futures[future], got)
            if progress:
                progress(len(got))
    if error is not None:
        raise error
    vectors = [v for start, _ in parts for v in done[start]]
    if vectors:
        embedder.dims = len(vectors[0])
    return vectors


def wait_for_batch_job(embedder: BatchEmbedder, job_id: str, status: BatchStatus,
                       count: int) -> list[Any]:
    """Poll one job until it finishes; its vectors, or ``EmbeddingError``."""
    cfg = embedder.settings.remote.batch
    deadline = time.monotonic() + cfg.timeout_minutes * 60
    while status.state == "pending":
        if time.monotonic() > deadline:
            embedder.cancel_batch_job(job_id)
            raise EmbeddingError(f"{embedder.provider} batch {job_id} timed out after "
                                 f"{cfg.timeout_minutes:g} minutes")
        time.sleep(cfg.poll_interval_ms / 1000)
        status = embedder.poll_batch_job(job_id, count)
    if status.state != "completed" or status.vectors is None:
        raise EmbeddingError(f"{embedder.provider} batch {job_id} ended {status.detail}")
    missing = sum(1 for v in status.vectors if v is None)
    if missing:
        raise EmbeddingError(f"{embedder.provider} batch {job_id}: no vectors for {missing} "
                             f"of {count} texts ({status.detail})")
    return status.vectors


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


# --- OpenAI ---------------------------------------------------------------------------------

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
                                         timeout=60.0, max_retries=3)
        return self._client

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
            response = self.client().embeddings.create(model=self.model, input=texts,
                                                        encoding_format="float")
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
            uploaded = client.files.create(file=("embeddings.jsonl", body), purpose="batch")
            job = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings",
                                        completion_window="24h")
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"openai batch failed: {exc}") from None
        if job.status in OPENAI_BATCH_FAILED:
            return job.id, BatchStatus("failed", _openai_detail(job))
        return job.id, BatchStatus("pending", job.status)

    def poll_batch_job(self, job_id: str, count: int) -> BatchStatus:
        import openai

        try:
            job = self.client().batches.retrieve(job_id)
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
            self.client().batches.cancel(job_id)
        except openai.OpenAIError as exc:
            log.info("openai batch %s could not be cancelled: %s", job_id, exc)

    def _batch_output(self, file_id: str, count: int) -> tuple[list[Any], str]:
        """One vector per text of the job (None where its request failed), and the first
        request error."""
        content = self.client().files.content(file_id)
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


# --- choosing a provider --------------------------------------------------------------------

def _openai_key(settings: MemorySearch, env: Mapping[str, str]) -> str | None:
    return settings.remote.api_key or env.get("OPENAI_API_KEY")


def _gemini_key(settings: MemorySearch, env: Mapping[str, str]) -> str | None:
    return settings.remote.api_key or env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")


def resolve_provider(settings: MemorySearch, env: Mapping[str, str] | None = None) -> str:
    """The primary provider. ``auto`` is ``local`` unless the memory config itself sets a
    remote key (``memorySearch.remote.apiKey``, then ``openai``): notes leave the machine
    only when the config says so, never because a chat key is in the environment. ``env`` is
    accepted for symmetry with ``create_embedder`` and deliberately not consulted."""
    del env
    if settings.provider != "auto":
        return settings.provider
    return "openai" if settings.remote.api_key else "local"


def create_embedder(provider: str, settings: MemorySearch,
                    env: Mapping[str, str] | None = None, *, primary: bool = True,
                    openai_base_url: str | None = None) -> Embedder:
    """An embedder for ``provider``; ``EmbeddingError`` when it cannot be set up.
    ``openai_base_url`` (``models.providers.openai.baseUrl``) is used when
    ``remote.baseUrl`` is not set."""
    env = os.environ if env is None else env
    # memorySearch.model names the primary's model; a fallback uses its own default.
    model = settings.model if primary else None
    if provider == "local":
        from clawd.memory.local import LocalEmbedder

        return LocalEmbedder(model=model, model_path=settings.local.model_path,
                             tokenizer_path=settings.local.tokenizer_path)
    if provider == "openai":
        key = _openai_key(settings, env)
        if not key:
            raise EmbeddingError("openai embeddings need a key: set OPENAI_API_KEY or "
                                 "memorySearch.remote.apiKey")
        return OpenAIEmbedder(settings, key, model=model,
                              base_url=settings.remote.base_url or openai_base_url)
    if provider == "gemini":
        from clawd.memory.gemini import GeminiEmbedder

        key = _gemini_key(settings, env)
        if not key:
            raise EmbeddingError("gemini embeddings need a key: set GEMINI_API_KEY or "
                                 "memorySearch.remote.apiKey")
        return GeminiEmbedder(settings, key, model=model)
    raise EmbeddingError(f"unknown embedding provider {provider!r}")


def signature(embedder: Embedder) -> str:
    """What the index's vectors depend on (chunking is recorded apart); a change rebuilds."""
    return json.dumps({"provider": embedder.provider, "model": embedder.model,
                       "fingerprint": embedder.fingerprint,
                       "segmentTokens": embedder.segment_tokens}, sort_keys=True)
