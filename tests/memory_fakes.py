"""Test doubles for memory search: a deterministic embedder and workspace helpers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clawd.config import MemorySearch
from clawd.memory.chunker import TokenizedText
from clawd.memory.embeddings import EmbeddingError

WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder:
    """Bag-of-words vectors: each word lands in a hashed dimension; ``synonyms`` map words
    onto a shared dimension so paraphrases can match without sharing a word."""

    provider = "fake"
    calibration = (0.0, 1.0)

    def __init__(self, model: str = "bow-256", dims: int = 256, segment_tokens: int | None = None,
                 synonyms: dict[str, str] | None = None, fingerprint: str = "fp1"):
        self.model = model
        self.dims = dims
        self.segment_tokens = segment_tokens
        self.fingerprint = fingerprint
        self.synonyms = synonyms or {}
        self.calls: list[list[str]] = []
        self.queries: list[str] = []
        self.fail: Exception | None = None
        self.vocabulary: dict[str, int] = {}

    def tokenize(self, texts: Sequence[str]) -> list[TokenizedText]:
        """Whitespace-separated words are the tokens; ids index ``vocabulary``."""
        out = []
        for text in texts:
            found = list(re.finditer(r"\S+", text))
            ids = [self.vocabulary.setdefault(m.group(), len(self.vocabulary)) for m in found]
            out.append(TokenizedText(ids, [m.span() for m in found]))
        return out

    def embed_tokens(self, texts: Sequence[Sequence[int]],
                     progress: Callable[[int], None] | None = None) -> list[Any]:
        words = {i: word for word, i in self.vocabulary.items()}
        return self.embed_documents([" ".join(words[i] for i in ids) for ids in texts],
                                    progress)

    def _vector(self, text: str) -> Any:
        vec = np.zeros(self.dims, dtype=np.float32)
        for word in WORD.findall(text.lower()):
            word = self.synonyms.get(word, word)
            slot = int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims
            vec[slot] += 1.0
        norm = np.linalg.norm(vec)
        return vec / norm if norm else vec

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        if self.fail:
            raise self.fail
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            vectors.append(self._vector(text))
            if progress:
                progress(1)
        return vectors

    def embed_query(self, text: str) -> Any:
        if self.fail:
            raise self.fail
        self.queries.append(text)
        return self._vector(text)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


class BrokenEmbedder(FakeEmbedder):
    provider = "broken"

    def __init__(self) -> None:
        super().__init__(model="broken")
        self.fail = EmbeddingError("broken embeddings: HTTP 500")


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def settings(**overrides: Any) -> MemorySearch:
    """MemorySearch settings from camelCase overrides (as in clawd.json)."""
    return MemorySearch.model_validate(overrides)
