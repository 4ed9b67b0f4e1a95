"""The index a sync works on, as the steps of the pipeline see it (``sync.py``).

``Target`` carries what the steps need and nothing of ``MemoryIndex``: the store, the
settings, the memory files as the agent's store keeps them (``MemorySources``), what this
process remembers of the batch jobs between syncs (``Seen``) and the flag ``close()`` sets,
which a step checks between its parts (``check``, raising ``SyncCancelled``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from clawd.config import MemorySearch
from clawd.memory.index_store import IndexStore
from clawd.memory.sources import MemorySources


class SyncCancelled(Exception):
    """The index was closed while this sync ran; nothing of it was committed."""


@dataclass
class Seen:
    """What this process remembers about an index's jobs between syncs
    (``MemoryIndex.batch_seen``)."""

    cancelled: set[str] = field(default_factory=set)  # jobs cancelled for their age
    unreachable: set[str] = field(default_factory=set)  # jobs whose poll failed (warned once)
    refused: dict[str, int] = field(default_factory=dict)  # hash -> submissions that raised


@dataclass(frozen=True)
class Target:
    store: IndexStore
    settings: MemorySearch
    sources: MemorySources  # the memory files and transcripts, as the store keeps them
    seen: Seen
    cancel: threading.Event

    def check(self) -> None:
        if self.cancel.is_set():
            raise SyncCancelled("memory sync cancelled: the index was closed")
