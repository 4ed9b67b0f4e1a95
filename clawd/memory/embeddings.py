"""The embedding providers of memory search, and the choice between them.

Providers: ``local`` (an ONNX MiniLM on the CPU, ``local.py``), ``openai`` (the OpenAI SDK
or a compatible server, ``openai_embed.py``) and ``gemini`` (its REST API, ``gemini.py``);
what they share (the ``Embedder`` protocol, ``EmbeddingError``) is in ``base.py`` and is
re-exported here. ``auto`` is ``local`` unless the memory config sets ``remote.apiKey``: a
key in the environment (set for chat) never moves embeddings off the machine. ``fallback``
names the provider used when the primary cannot start or fails (``Embedders``); the index
records which one built it (``signature``). A concrete embedder's module is imported only
when that provider is created, so importing this module loads no SDK and no model.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping

from clawd.config import MemorySearch
from clawd.memory.base import Embedder, EmbeddingError

__all__ = [
    "Embedder",
    "Embedders",
    "EmbeddingError",
    "create_embedder",
    "resolve_provider",
    "signature",
]

log = logging.getLogger(__name__)

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
        from clawd.memory.openai_embed import OpenAIEmbedder

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


class Embedders:
    """The primary embedder and, when it fails, the configured fallback."""

    def __init__(self, settings: MemorySearch, env: Mapping[str, str] | None,
                 primary: Embedder | None = None, fallback: Embedder | None = None,
                 openai_base_url: str | None = None):
        self.settings, self.env = settings, env
        self.openai_base_url = openai_base_url
        self.primary_name = primary.provider if primary else resolve_provider(settings, env)
        self.fallback_name = fallback.provider if fallback else settings.fallback
        self._primary, self._fallback = primary, fallback
        self.active: Embedder | None = None
        self.fallback_info: dict[str, str] | None = None
        self.error: str | None = None
        self._tried = False
        self._lock = threading.RLock()

    def get(self) -> Embedder | None:
        with self._lock:  # a search and a background sync may both ask first
            if self.active is None and not self._tried:
                self._tried = True
                try:
                    self.active = self._primary or create_embedder(
                        self.primary_name, self.settings, self.env,
                        openai_base_url=self.openai_base_url)
                except EmbeddingError as exc:
                    self.fail(exc)
            return self.active

    def fail(self, exc: Exception) -> Embedder | None:
        """The primary failed: switch to the fallback once; None when there is none."""
        failed = self.active.provider if self.active else self.primary_name
        log.warning("memory embeddings (%s) failed: %s", failed, exc)
        self.error = str(exc)
        if self.fallback_info is None and self.fallback_name not in ("none", failed):
            self.fallback_info = {"from": failed, "to": self.fallback_name, "reason": str(exc)}
            try:
                self.active = self._fallback or create_embedder(
                    self.fallback_name, self.settings, self.env, primary=False,
                    openai_base_url=self.openai_base_url)
                return self.active
            except EmbeddingError as second:
                log.warning("memory embeddings fallback (%s) failed: %s", self.fallback_name,
                            second)
                self.error = f"{exc}; fallback: {second}"
        self.active = None
        return None
