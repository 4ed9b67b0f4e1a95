"""Token estimates and the budget arithmetic (pure functions over numbers and messages).

Estimates use a real BPE encoding, never downloading at run time: ``o200k_base`` from
tiktoken's cache when present, else put there from the copy clawd ships
(``clawd/data/o200k_base.tiktoken.gz``, checked by SHA-256; see ``clawd/data/NOTICE.md``);
characters / 4 only when tiktoken itself cannot load (which over-counts English prose by
roughly a tenth against o200k). The
context size the loop trusts is the provider-reported prompt of the last call plus estimates
of what was appended since; these functions supply the estimates and the thresholds.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from clawd.core.messages import ImagePart, Message, ModelRequest, TextPart, ToolCall, ToolSpec

log = logging.getLogger(__name__)

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
MESSAGE_OVERHEAD = 4  # role and separators, per message
IMAGE_TOKENS = 1600  # a typical image block, whatever its bytes
DEFAULT_CONTEXT_WINDOW = 200_000

_lock = threading.Lock()
_encoder: Any = None
_encoder_name: str | None = None


def _materialise_o200k() -> bool:
    """Put o200k_base where stock tiktoken finds it offline; True when it is there.

    A cached copy that fails the hash is replaced from the bundled one: tiktoken would
    otherwise try to download the file again."""
    from clawd.core.paths import state_dir

    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or str(state_dir() / "cache" / "tiktoken")
    target = os.path.join(cache_dir, hashlib.sha1(O200K_URL.encode()).hexdigest())
    if not _sha256_matches(target):
        source = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                              "o200k_base.tiktoken.gz")
        try:
            with gzip.open(source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            log.warning("the bundled o200k_base encoding cannot be read (%s); token "
                        "estimates fall back to characters / 4", exc)
            return False
        if hashlib.sha256(data).hexdigest() != O200K_SHA256:
            log.warning("the bundled o200k_base encoding fails its SHA-256 check; token "
                        "estimates fall back to characters / 4")
            return False
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", cache_dir)
    return True


def _sha256_matches(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest() == O200K_SHA256
    except OSError:
        return False


def _load() -> None:
    global _encoder, _encoder_name
    _encoder_name = "chars/4"
    try:
        import tiktoken
    except ImportError:
        return
    try:
        if _materialise_o200k():
            # tiktoken checks the cached file against the same hash before using it
            _encoder = tiktoken.get_encoding("o200k_base")
            _encoder_name = "o200k_base"
    except Exception as exc:  # noqa: BLE001 - any failure means "not offline-loadable"
        log.debug("o200k_base unavailable offline: %s", exc)


def encoder_name() -> str:
    """Which estimator is in use: an encoding name, or ``chars/4``."""
    if _encoder_name is None:
        with _lock:
            if _encoder_name is None:
                _load()
    return _encoder_name or "chars/4"


def at_most(text: str) -> int:
    """An upper bound on the tokens of ``text`` that needs no tokenizer: its UTF-8 bytes (a
    BPE token is at least one byte), so a check that passes on it passes on the real count."""
    return len(text.encode("utf-8", errors="replace"))


def estimate_text(text: str) -> int:
    """Tokens in a string (long texts, such as the system prompt, are remembered)."""
    if not text:
        return 0
    if encoder_name() == "chars/4":
        return (len(text) + 3) // 4
    if len(text) >= 2000:
        return _estimate_long(text)
    return len(_encoder.encode(text, disallowed_special=()))


@lru_cache(maxsize=64)
def _estimate_long(text: str) -> int:
    return len(_encoder.encode(text, disallowed_special=()))


def estimate_message(message: Message) -> int:
    """Tokens of one message as sent: its text, tool calls and images, plus overhead."""
    total = MESSAGE_OVERHEAD
    for part in message.content:
        match part:
            case TextPart(text):
                total += estimate_text(text)
            case ToolCall(_, name, arguments):
                import orjson
                total += estimate_text(name) + estimate_text(orjson.dumps(arguments).decode())
            case ImagePart():
                total += IMAGE_TOKENS
    return total


_message_cache: dict[tuple[str, int], int] = {}


def estimate_messages(messages: Iterable[Message]) -> int:
    """Tokens of a list of messages (memoised per message id and content size)."""
    total = 0
    for message in messages:
        key = (message.id, sum(len(p.text) if isinstance(p, TextPart) else
                               len(str(p.arguments)) if isinstance(p, ToolCall) else 0
                               for p in message.content))
        cached = _message_cache.get(key)
        if cached is None:
            cached = estimate_message(message)
            if len(_message_cache) > 50_000:
                _message_cache.clear()
            _message_cache[key] = cached
        total += cached
    return total


def estimate_tools(tools: Iterable[ToolSpec]) -> int:
    """Tokens of the tool schemas sent with a request."""
    import orjson
    return sum(estimate_text(t.name) + estimate_text(t.description)
               + estimate_text(orjson.dumps(t.parameters).decode()) for t in tools)


def estimate_request(request: ModelRequest) -> int:
    """Tokens of a whole request: system segments, messages and tool schemas."""
    return (sum(estimate_text(s) for s in request.system) + estimate_messages(request.messages)
            + estimate_tools(request.tools))


def calibration(reported: int, estimated: int, previous: float = 1.0) -> float:
    """How many provider tokens one estimated token is, from one call (kept in 0.5..2).

    Each provider counts with its own tokenizer; scaling estimates by this factor makes
    them agree with what the provider reports for the same text.
    """
    if reported <= 0 or estimated <= 0:
        return previous
    return min(2.0, max(0.5, reported / estimated))


# --- budget ---------------------------------------------------------------------------------

# Shares of the window that the absolute settings may take at most, so that the flush and
# compaction points make sense from 4k to 2M windows (docs/real-models-windows.md has the table).
RESERVE_SHARE = 0.25  # reserveTokensFloor: at most a quarter of the window
SOFT_SHARE = 0.125  # softThresholdTokens: at most an eighth
KEEP_SHARE = 0.15  # keepRecentTokens: at most 15%
FILES_SHARE = 0.2  # the injected workspace files: at most a fifth
SUMMARY_SHARE = 0.10  # a compaction summary's length: at most a tenth
MIN_ROOM = 1000  # tokens a window must leave for the conversation after the fixed layers


@dataclass(frozen=True, slots=True)
class Budget:
    """Where, for one context window, the flush and compaction points fall, and how many
    tokens the kept history, the workspace files and a compaction summary may take.

    ``flush_at`` is 0 when the flush point would fall at or below 0: then it never fires.
    """

    context_window: int
    flush_at: int
    compact_at: int
    keep_recent: int = 0
    files: int = 0
    summary: int = 0

    def percent(self, used: int) -> float:
        return 100.0 * used / self.context_window if self.context_window else 0.0


def make_budget(context_window: int, reserve_tokens_floor: int, soft_threshold_tokens: int,
                soft_threshold: float | None = None,
                threshold_ratio: float | None = None, keep_recent_tokens: int = 20_000,
                max_tokens: int = 4096) -> Budget:
    """The flush and compaction points; of absolute and ratio settings the earlier wins.

    Compaction starts above ``contextWindow - reserve`` (or ``thresholdRatio`` of the
    window, if earlier), where the reserve is ``reserveTokensFloor`` but at most a quarter of
    the window; the flush comes ``softThresholdTokens`` (at most an eighth of the window)
    before that, or at ``softThreshold`` of the window if earlier, never after the
    compaction point and never at a point <= 0.
    """
    reserve = min(reserve_tokens_floor, int(context_window * RESERVE_SHARE))
    soft = min(soft_threshold_tokens, int(context_window * SOFT_SHARE))
    compact_at = context_window - reserve
    if threshold_ratio is not None:
        compact_at = min(compact_at, int(context_window * threshold_ratio))
    compact_at = max(compact_at, 1)
    flush_at = context_window - reserve - soft
    if soft_threshold is not None:
        flush_at = min(flush_at, int(context_window * soft_threshold))
    flush_at = max(min(flush_at, compact_at), 0)
    keep = min(keep_recent_tokens, int(context_window * KEEP_SHARE), compact_at // 2)
    return Budget(context_window, flush_at, compact_at, keep,
                  files=int(context_window * FILES_SHARE),
                  summary=max(256, min(max_tokens, int(context_window * SUMMARY_SHARE))))


# Context windows of well-known models, matched by prefix of the model id.
KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gpt-3.5-turbo", 16_385),
)


def known_context_window(model_id: str) -> int | None:
    for prefix, window in KNOWN_WINDOWS:
        if model_id.startswith(prefix):
            return window
    return None
