"""One writer per session: a process holds its session key's lock while it uses the session.

Two processes appending to one transcript interleave it (the second request goes out
without the first reply), so a process takes ``<sessions>/locks/<key>.lock`` before it
loads a session and keeps it until it is done with it. A second process waits up to
``WAIT_SECONDS`` and then fails in one line naming the process that holds the session. The
lock is an OS file lock (``flock``): the kernel drops it when its holder exits or crashes,
so a stale holder never blocks anyone; the pid written in the file is only for the message.
Within one process the lock is shared (counted), so ``/new`` and tests may open the same
key again.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path
from typing import IO

from clawd.core.errors import ClawdError

WAIT_SECONDS = 10.0
POLL_SECONDS = 0.1

_held: dict[Path, tuple[IO[bytes], int]] = {}
# re-entrant: a Session collected during ``acquire`` releases its own hold from a finalizer
_guard = threading.RLock()


class SessionBusyError(ClawdError):
    """Another process is using the session."""


def lock_path(sessions_dir: Path, key: str) -> Path:
    """A file name per key (keys hold ``:`` and are case-insensitive)."""
    key = key.lower()
    readable = re.sub(r"[^a-z0-9._-]+", "_", key)[:80]
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    return sessions_dir / "locks" / f"{readable}-{digest}.lock"


CHAT_HINT = "wait for it to finish, or use --session NAME for another session"


def acquire(sessions_dir: Path, key: str, wait: float | None = None,
            hint: str = CHAT_HINT) -> Path:
    """Hold the session ``key`` for this process; returns the handle for ``release``.
    ``hint`` ends the busy message: what the user can do."""
    path = lock_path(sessions_dir, key)
    with _guard:
        if path in _held:
            handle, count = _held[path]
            _held[path] = (handle, count + 1)
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")  # noqa: SIM115 - held open while the session is held
        deadline = time.monotonic() + (WAIT_SECONDS if wait is None else wait)
        while not _try_lock(handle):
            if time.monotonic() >= deadline:
                holder = _holder(handle)
                handle.close()
                raise SessionBusyError(
                    f"session {key} is in use by another clawd process"
                    f"{f' (pid {holder})' if holder else ''}; {hint}")
            time.sleep(POLL_SECONDS)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()).encode())
        handle.flush()
        _held[path] = (handle, 1)
        return path


def release(path: Path) -> None:
    with _guard:
        if path not in _held:
            return
        handle, count = _held.pop(path)
        if count > 1:
            _held[path] = (handle, count - 1)
            return
        handle.seek(0)
        handle.truncate()
        _unlock(handle)
        handle.close()


def _holder(handle: IO[bytes]) -> str:
    handle.seek(0)
    text = handle.read(32).decode("ascii", "replace").strip()
    return text if text.isdigit() else ""


try:
    import fcntl

    def _try_lock(handle: IO[bytes]) -> bool:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(handle: IO[bytes]) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
except ImportError:  # Windows: a byte-range lock far past the pid
    import msvcrt

    def _try_lock(handle: IO[bytes]) -> bool:
        handle.seek(1 << 20)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
            return True
        except OSError:
            return False

    def _unlock(handle: IO[bytes]) -> None:
        handle.seek(1 << 20)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
