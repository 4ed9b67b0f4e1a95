"""The sign-in lockouts of the embedded gateway by their older name: the file and its store
are ``storage.files.lockouts`` (the gateway's server still imports them from here)."""

from __future__ import annotations

from clawd.storage.files.lockouts import FILE, FileLockouts

__all__ = ["FILE", "FileLockouts"]
