"""The sign-in lockouts of the embedded gateway, kept where ``clawd users unlock`` finds them.

One ``clawd serve`` on the files counts wrong tokens in its memory
(``frontends.hub.sign_ins.FailedAuth``); when an address is locked out it is written here
too, in ``<state>/lockouts.json`` (mode 0600: an address and until when, replaced whole
under a lock), so the command line can list the lockouts and lift one. The server looks at
the file again (a ``stat``, at most once a ``LOOK_SECONDS``) only while an address it has
locked out comes back: an address no longer in the file may sign in again. With
``storage.url`` the lockouts are the ``auth_failures`` rows every worker shares
(``storage.postgres.auth``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawd.storage.files.jsondoc import locked, read_json, write_private

FILE = "lockouts.json"
LOOK_SECONDS = 1.0  # how often a server looks whether a lockout was lifted


class FileLockouts:
    """``<state>/lockouts.json``: {address: until (Unix time)}."""

    def __init__(self, path: Path, clock: Any = time.time):
        self.path, self.clock = path, clock
        self.location = str(path)
        self._seen: tuple[int, int, int] | None = None  # the file as last read (stat)
        self._kept: dict[str, float] = {}
        self._looked = -1e9

    # --- the server ---------------------------------------------------------------------------

    def lock(self, client: str, until: float) -> None:
        """``client`` is locked out until ``until`` (Unix time); expired entries go."""
        with self._changing() as data:
            data[client] = until
        self._kept[client] = until  # held from now on, whenever the file is looked at next
        self._seen = None

    def holds(self, client: str) -> bool:
        """Whether ``client`` is still locked out in the file (not lifted by ``unlock``);
        the file is looked at at most once a ``LOOK_SECONDS``."""
        now = time.monotonic()
        if now - self._looked >= LOOK_SECONDS:
            self._looked = now
            try:
                info = os.stat(self.path)
                seen: tuple[int, int, int] | None = (info.st_ino, info.st_mtime_ns,
                                                     info.st_size)
            except OSError:
                seen = None
            if seen != self._seen:
                self._seen, self._kept = seen, self._read() if seen else {}
        return client in self._kept

    # --- the command line ---------------------------------------------------------------------

    def lockouts(self) -> dict[str, float]:
        """The addresses locked out now, and until when."""
        now = self.clock()
        return {client: until for client, until in sorted(self._read().items())
                if until > now}

    def unlock(self, client: str) -> float | None:
        """Lift ``client``'s lockout; until when it was locked out (None: it was not)."""
        with self._changing() as data:
            until = data.pop(client, None)
        return until if until is not None and until > self.clock() else None

    def _read(self) -> dict[str, float]:
        data = read_json(self.path, "remove it")
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))}

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, float]]:
        """The file read, changed and written whole under its lock (expired entries
        dropped)."""
        with locked(self.path):
            now = self.clock()
            data = {k: v for k, v in self._read().items() if v > now}
            yield data
            write_private(self.path, json.dumps(data, indent=2) + "\n")
