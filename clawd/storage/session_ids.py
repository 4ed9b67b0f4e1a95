"""What may name a session in any store: ``checked_id`` (never a path)."""

from __future__ import annotations

import re

from clawd.core.errors import ClawdError

SESSION_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def checked_id(session_id: str) -> str:
    """``session_id`` when it can name a session (never a path); a ``ClawdError`` if not."""
    if not SESSION_ID.fullmatch(session_id):
        raise ClawdError(f"{session_id[:80]!r} is not a session id")
    return session_id
