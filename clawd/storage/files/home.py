"""A files home as a whole (``CLAWD_HOME``, by default ``~/.clawd``): which agents it holds
and what ``clawd storage status`` says of it."""

from __future__ import annotations

from pathlib import Path


def agent_ids(home: Path) -> list[str]:
    """The agents with a folder of their own under ``<home>/agents``, sorted."""
    folder = home / "agents"
    return [p.name for p in sorted(folder.iterdir()) if p.is_dir()] if folder.is_dir() else []


def status_lines(home: Path) -> list[str]:
    """Which store is in use (these files) and how many agents and transcripts it holds."""
    transcripts = list((home / "agents").glob("*/sessions/*.jsonl"))
    return [f"store: files under {home} (the embedded default; storage.url not set)",
            f"agents: {len(list((home / 'agents').glob('*/sessions')))} · transcripts: "
            f"{len(transcripts)}"]
