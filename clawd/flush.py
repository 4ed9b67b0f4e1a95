"""When to run the silent memory flush, and the silent-reply rule (pure functions).

The flush is one agentic turn, before compaction, that lets the model write durable notes
to ``memory/`` while the details are still in context. It runs at most once per compaction
cycle: when the context (with the incoming message counted) crosses the flush point and
``memoryFlushCompactionCount`` differs from ``compactionCount``. ``NO_REPLY`` (alone or
leading) marks a reply that is never shown; ``SilentFilter`` holds back streamed text until
it is clear whether the reply is silent.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from clawd.config import MemoryFlush

SILENT = "NO_REPLY"


def flush_due(entry: dict[str, Any], used_tokens: int, flush_at: int,
              cfg: MemoryFlush) -> bool:
    """True when the flush point is crossed and this compaction cycle has not flushed."""
    if not cfg.enabled or used_tokens < flush_at:
        return False
    return entry.get("memoryFlushCompactionCount") != entry.get("compactionCount", 0)


def flush_prompt(cfg: MemoryFlush, today: date) -> str:
    """The flush user message, with ``YYYY-MM-DD`` replaced by today's local date."""
    return cfg.prompt.replace("YYYY-MM-DD", today.isoformat())


def is_silent(text: str) -> bool:
    """Whether a reply is the silent token (alone, or leading the reply)."""
    return text.lstrip().startswith(SILENT)


class SilentFilter:
    """Passes streamed text through, except a reply that starts with ``NO_REPLY``."""

    def __init__(self) -> None:
        self._held = ""
        self._decided: bool | None = None  # True: silent; False: show

    def feed(self, delta: str) -> str:
        """The part of ``delta`` that may be shown now."""
        if self._decided is False:
            return delta
        if self._decided is True:
            return ""
        self._held += delta
        probe = self._held.lstrip()
        if probe.startswith(SILENT):
            self._decided = True
            return ""
        if SILENT.startswith(probe):
            return ""  # still a possible prefix of NO_REPLY: hold it back
        self._decided = False
        released, self._held = self._held, ""
        return released

    def finish(self) -> str:
        """Whatever is still held back once the stream has ended."""
        if self._decided is None and not is_silent(self._held):
            released, self._held = self._held, ""
            return released
        return ""
