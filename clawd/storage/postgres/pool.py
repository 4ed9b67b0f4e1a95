"""The pool of connections a process's stores share: a connection the server dropped (it
restarted) is found out when the pool hands it out, not by the request that gets it; but
only one that sat unused for ``FRESH_SECONDS`` is checked, since a check is one more round
trip to the server and a busy worker asks for a connection several times a turn.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

FRESH_SECONDS = 1.0  # a connection used this recently is handed out unchecked


class Freshness:
    """When each connection was last given back (``used``), and the pool's ``check``."""

    def __init__(self) -> None:
        self._used: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def used(self, conn: Any) -> None:
        with self._lock:
            self._used[conn] = time.monotonic()

    def check(self, conn: Any) -> None:
        """Nothing for a connection used within ``FRESH_SECONDS``; else the pool's own
        check (an error: the connection is thrown away and another one made)."""
        from psycopg_pool import ConnectionPool

        with self._lock:
            last = self._used.get(conn)
        if last is None or time.monotonic() - last >= FRESH_SECONDS:
            ConnectionPool.check_connection(conn)


def open_pool(url: str, size: int, wait: float, kwargs: dict[str, Any], freshness: Freshness
              ) -> Any:
    """A ``psycopg_pool.ConnectionPool`` of at most ``size`` connections, each given out
    within ``wait`` seconds or an error, checked as ``freshness`` says."""
    from psycopg_pool import ConnectionPool

    return ConnectionPool(url, min_size=1, max_size=size, open=True, timeout=wait,
                          check=freshness.check, kwargs=kwargs, name="clawd")
