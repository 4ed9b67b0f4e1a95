"""An exclusive OS lock on a file (``flock``; ``msvcrt`` on Windows): the read-modify-write
of a file several processes change (``sessions.json``, the state folder's JSON documents)
goes under it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold an exclusive OS lock on ``path`` (made, with its folder, if missing): the
    read-modify-write of a file several processes change goes under it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        _lock(handle)
        try:
            yield
        finally:
            _unlock(handle)


try:
    import fcntl

    def _lock(handle: Any) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)

    def _unlock(handle: Any) -> None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
except ImportError:  # Windows
    import msvcrt

    def _lock(handle: Any) -> None:
        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                return
            except OSError:
                time.sleep(0.01)

    def _unlock(handle: Any) -> None:
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
