"""One writer per session: a process holds its session key's lock while it uses the session.

Two processes appending to one transcript interleave it (the second request goes out
without the first reply), so a process takes ``<sessions>/locks/<key>.lock`` before it
loads a session and keeps it until it is done with it. A second process waits up to
``WAIT_SECONDS`` and then fails in one line naming the process that holds the session. The
lock is an OS file lock (``flock``): the kernel drops it when its holder exits or crashes,
so a stale holder never blocks anyone. What is written in the file is only for that
message: the holder's pid, what it is (``HOLDER``: ``clawd serve`` says so, with its
address), and, when the holder says when it will let go (``describe``: the gateway lets an
idle session go after ``gateway.idleSessionSeconds``), that time: a waiter whose wait would
end before it gives up at once and says when to come back. Within one process the lock is
shared (counted), so ``/new`` and tests may open the same key again.
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

HOLDER = "another clawd process"  # what this process is, for a waiter's message
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
HTTP_HINT = "wait for it to finish and send it again, or send to another session key"


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
            pid, who, until = _holder(handle)
            left = until - time.time() if until is not None else None
            if time.monotonic() >= deadline or (
                    left is not None and time.monotonic() + left > deadline):
                handle.close()
                raise busy_error(key, pid, who, left, hint)
            time.sleep(POLL_SECONDS)
        _write(handle, HOLDER, None)
        _held[path] = (handle, 1)
        return path


def describe(sessions_dir: Path, key: str, until: float | None) -> None:
    """Say in the lock of a session this process holds when it will let it go (``until``,
    a ``time.time()``; None: not known, e.g. while a turn runs)."""
    with _guard:
        held = _held.get(lock_path(sessions_dir, key))
        if held is not None:
            _write(held[0], HOLDER, until)


def _write(handle: IO[bytes], who: str, until: float | None) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n{who}\n{'' if until is None else f'{until:.0f}'}\n"
                 .encode())
    handle.flush()


def busy_error(key: str, pid: str, who: str, left: float | None, hint: str
               ) -> SessionBusyError:
    """The session is held: ``busy_message`` ending with ``hint``, and in an HTTP client's
    words (``HTTP_HINT``) when ``hint`` is the chat's."""
    http = busy_message(key, pid, who, left, HTTP_HINT) if hint == CHAT_HINT else None
    return SessionBusyError(busy_message(key, pid, who, left, hint), http=http)


def busy_message(key: str, pid: str, who: str, left: float | None, hint: str) -> str:
    holder = f"{who or 'another clawd process'}{f' (pid {pid})' if pid else ''}"
    if left is None:
        return f"session {key} is in use by {holder}; {hint}"
    at = time.strftime("%H:%M:%S", time.localtime(time.time() + max(left, 0)))
    return (f"session {key} is in use by {holder}, which lets it go at {at} (in "
            f"{max(round(left), 1)} s) if no other turn comes; {hint}")


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


def _holder(handle: IO[bytes]) -> tuple[str, str, float | None]:
    """(pid, what it is, when it lets go) as the holder wrote them."""
    handle.seek(0)
    lines = handle.read(512).decode("utf-8", "replace").splitlines() + ["", "", ""]
    pid, who, until = (line.strip() for line in lines[:3])
    return (pid if pid.isdigit() else "", who if pid.isdigit() else "",
            float(until) if until.isdigit() else None)


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
