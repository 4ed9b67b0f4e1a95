"""Embedding providers for memory search, and the choice between them.

An embedder turns texts into L2-normalised float32 vectors. Providers: ``local`` (an ONNX
MiniLM on the CPU, see ``local.py``), ``openai`` (the embeddings endpoint of the OpenAI SDK,
or any compatible server via ``remote.baseUrl``/``apiKey``/``headers``; large backfills go
through the Batch API with ``remote.batch``) and ``gemini`` (see ``gemini.py``). ``auto``
takes a remote provider whose key is set, else ``local``. ``fallback`` names the provider
used when the primary cannot start or fails; the index records which one built it.

Each embedder exposes ``provider``, ``model``, ``fingerprint`` (of the endpoint, never the key
itself), ``dims`` (known after the first call), ``segment_tokens`` (the size of the pieces a
chunk is embedded in when the model's window is short, else None) and ``calibration`` (the
cosine span mapped onto a 0..1 vector score). The OpenAI SDK is imported only when used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from clawd.config import MemorySearch
from clawd.errors import ClawdError

log = logging.getLogger(__name__)

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"
GEMINI_DEFAULT_MODEL = "gemini-embedding-001"
SYNC_BATCH = 128  # inputs per synchronous embeddings request
BATCH_MIN_TEXTS = 100  # fewer texts than this go through the synchronous endpoint
BATCH_MAX_REQUESTS = 50_000  # the Batch API's limit per input file


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

    def count_tokens(self, text: str) -> int: ...


def normalise(vectors: Any) -> Any:
    """Rows scaled to unit length, as float32 (zero rows stay zero)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def estimate_tokens(text: str) -> int:
    """Tokens of a remote model's input, by clawd's offline estimate."""
    from clawd.tokens import estimate_text

    return estimate_text(text)


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
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import openai  # imported here: the SDK costs start-up time

            self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url,
                                         default_headers=self.headers or None,
                                         timeout=60.0, max_retries=3)
        return self._client

    count_tokens = staticmethod(estimate_tokens)

    def embed_query(self, text: str) -> Any:
        return self._sync([text])[0]

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        batch = self.settings.remote.batch
        if batch.enabled and len(texts) >= self.batch_min_texts:
            if batch.wait:
                vectors = self._batch(list(texts))
                if progress:
                    progress(len(texts))
                return vectors
            log.info("remote.batch.wait is false: embedding %d texts synchronously", len(texts))
        out: list[Any] = []
        for start in range(0, len(texts), SYNC_BATCH):
            part = list(texts[start:start + SYNC_BATCH])
            out.extend(self._sync(part))
            if progress:
                progress(len(part))
        return out

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

    # The Batch API: one JSONL file of requests per job, jobs run ``concurrency`` at a time.
    def _batch(self, texts: list[str]) -> list[Any]:
        requests = [{"custom_id": str(start), "method": "POST", "url": "/v1/embeddings",
                     "body": {"model": self.model, "input": texts[start:start + SYNC_BATCH],
                              "encoding_format": "float"}}
                    for start in range(0, len(texts), SYNC_BATCH)]
        jobs = [requests[i:i + BATCH_MAX_REQUESTS]
                for i in range(0, len(requests), BATCH_MAX_REQUESTS)]
        results: dict[int, list[list[float]]] = {}
        workers = max(1, self.settings.remote.batch.concurrency)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for part in pool.map(self._run_batch_job, jobs):
                results.update(part)
        vectors: list[Any] = []
        for start in range(0, len(texts), SYNC_BATCH):
            got = results.get(start)
            expected = len(texts[start:start + SYNC_BATCH])
            if got is None or len(got) != expected:
                raise EmbeddingError(f"openai batch: request {start} returned no vectors")
            vectors.extend(normalise(got))
        if vectors:
            self.dims = len(vectors[0])
        return vectors

    def _run_batch_job(self, requests: list[dict[str, Any]]) -> dict[int, list[list[float]]]:
        import openai

        cfg = self.settings.remote.batch
        client = self.client()
        body = "\n".join(json.dumps(r) for r in requests).encode()
        try:
            uploaded = client.files.create(file=("embeddings.jsonl", body), purpose="batch")
            job = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings",
                                        completion_window="24h")
            deadline = time.monotonic() + cfg.timeout_minutes * 60
            while job.status not in ("completed", "failed", "expired", "cancelled"):
                if time.monotonic() > deadline:
                    raise EmbeddingError(f"openai batch {job.id} timed out after "
                                         f"{cfg.timeout_minutes:g} minutes")
                time.sleep(cfg.poll_interval_ms / 1000)
                job = client.batches.retrieve(job.id)
            if job.status != "completed" or not job.output_file_id:
                raise EmbeddingError(f"openai batch {job.id} ended {job.status}")
            content = client.files.content(job.output_file_id)
            text = content.text if hasattr(content, "text") else content.read().decode()
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"openai batch failed: {exc}") from None
        results: dict[int, list[list[float]]] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            response = item.get("response") or {}
            if item.get("error") or response.get("status_code", 200) >= 400:
                raise EmbeddingError(f"openai batch request {item.get('custom_id')} failed: "
                                     f"{item.get('error') or response.get('body')}")
            data = sorted(response["body"]["data"], key=lambda d: d["index"])
            results[int(item["custom_id"])] = [d["embedding"] for d in data]
        return results


# --- choosing a provider --------------------------------------------------------------------

def _openai_key(settings: MemorySearch, env: Mapping[str, str]) -> str | None:
    return settings.remote.api_key or env.get("OPENAI_API_KEY")


def _gemini_key(settings: MemorySearch, env: Mapping[str, str]) -> str | None:
    return settings.remote.api_key or env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")


def resolve_provider(settings: MemorySearch, env: Mapping[str, str] | None = None) -> str:
    """The primary provider: ``auto`` is a remote one with a key set, else ``local``."""
    env = os.environ if env is None else env
    if settings.provider != "auto":
        return settings.provider
    if env.get("OPENAI_API_KEY") or (settings.remote.api_key and not env.get("GEMINI_API_KEY")):
        return "openai"
    if env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY"):
        return "gemini"
    return "local"


def create_embedder(provider: str, settings: MemorySearch,
                    env: Mapping[str, str] | None = None, *, primary: bool = True) -> Embedder:
    """An embedder for ``provider``; ``EmbeddingError`` when it cannot be set up."""
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
        return OpenAIEmbedder(settings, key, model=model)
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
