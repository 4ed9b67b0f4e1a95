"""Fencing of session writes: one writer per session even when a lease is lost unseen.

A session's lease is an advisory lock on the process's lease connection; if that connection
drops, the server lets go of the lock while the process still believes it holds the session,
and another worker may take it. So each taking of a lease bumps the session's ``epoch`` in
``leases`` and this process remembers the epoch it got (``taken``); every transcript append
and session-entry write of a session this process holds reads the epoch ``FOR SHARE`` in
its own transaction (``check``), or in the write's own statement (``condition``). A writer
whose epoch is no longer the session's gets ``LeaseLost`` and writes nothing; the new
holder's bump waits for a check under way, so a write either lands before the other worker
took the session or not at all.
"""

from __future__ import annotations

import threading
from typing import Any

from clawd.core.errors import ClawdError

_epochs: dict[tuple[int, str, str], int] = {}  # (id of the Database, agent, key): epoch held
_lost: set[tuple[int, str, str]] = set()  # held here, taken by another since
_guard = threading.Lock()
EPOCH = "SELECT epoch FROM leases WHERE agent_id = %s AND key = %s FOR SHARE"  # the session's


class LeaseLost(ClawdError):
    """Another process took the session after this one lost its hold without knowing."""

    def __init__(self, key: str):
        super().__init__(f"session {key} was taken over by another worker after this one "
                         f"lost its connection to the database; nothing more of this turn "
                         f"was written, send the message again")


def taken(db: Any, agent_id: str, key: str, epoch: int) -> None:
    with _guard:
        _epochs[(id(db), agent_id, key)] = epoch
        _lost.discard((id(db), agent_id, key))


def lost(db: Any, agent_id: str, key: str) -> bool:
    with _guard:
        return (id(db), agent_id, key) in _lost


def lease_epoch(db: Any, agent_id: str, key: str) -> int | None:
    """The epoch this process holds the session at (None: it does not hold it)."""
    with _guard:
        return _epochs.get((id(db), agent_id, key))


def let_go(db: Any, agent_id: str, key: str) -> None:
    with _guard:
        _epochs.pop((id(db), agent_id, key), None)
        _lost.discard((id(db), agent_id, key))


def check(conn: Any, db: Any, agent_id: str, key: str | None) -> None:
    """Within a write's transaction on ``conn``: raise ``LeaseLost`` if this process held
    the session and another has taken it since (a session not held here is not fenced)."""
    mine = lease_epoch(db, agent_id, key) if key is not None else None
    if mine is None:
        return
    row = conn.execute(EPOCH, (agent_id, key)).fetchone()
    if row is None or int(row[0]) != mine:
        raise refused(db, agent_id, key)


def condition(db: Any, agent_id: str, key: str | None) -> tuple[str, tuple[Any, ...]]:
    """The fence as a condition one statement carries, and its parameters: true while the
    session's epoch is the one this process took (the row read ``FOR SHARE``, as ``check``
    reads it), so the write and its check are one round trip; always true for a session
    not held here. A statement that wrote nothing under it: ``refused``."""
    mine = lease_epoch(db, agent_id, key) if key is not None else None
    if mine is None:
        return "TRUE", ()
    return f"({EPOCH}) = %s", (agent_id, key, mine)


def refused(db: Any, agent_id: str, key: str | None) -> LeaseLost:
    """The session was taken by another process since this one took it: known as lost."""
    with _guard:
        _lost.add((id(db), agent_id, key or ""))
    return LeaseLost(key or "")
