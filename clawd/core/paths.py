"""Where clawd keeps its state: ``$CLAWD_HOME``, else ``~/.clawd`` (the config, sessions,
memory indexes and caches live under it)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """``$CLAWD_HOME``, else ``~/.clawd``."""
    home = os.environ.get("CLAWD_HOME")
    return Path(home).expanduser() if home else Path.home() / ".clawd"
