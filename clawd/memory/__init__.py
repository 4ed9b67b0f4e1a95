"""Memory search: a per-agent index over the Markdown memory files, searched by meaning and
by exact tokens (hybrid BM25 + vector).

Entry point: ``open_index(agent_id, workspace, settings, state_dir, sources=, files=)``
from ``clawd.memory.index``, re-exported here: the index reads the notes and transcripts only
through the agent's store (``sources``, ``files``: ``AgentStorage.memory_sources`` and
``files``). Importing this package loads no model and no SDK;
the embedding model is loaded on the first embedding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawd.memory.index import MemoryIndex, open_index

__all__ = ["MemoryIndex", "open_index"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from clawd.memory import index

        return getattr(index, name)
    raise AttributeError(name)
