"""The failed sign-ins per client address that every ``clawd serve`` worker on one database
counts together (``auth_failures``), so a wrong token tried on each worker in turn is locked
out as fast as on one; ``clawd users lockouts`` lists the addresses locked out and ``clawd
users unlock`` lets one in again (its row deleted: every worker sees it at once)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from clawd.config.gateway import RateLimit

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections


class PgFailedAuth:
    """``FailedAuth`` (wrong tokens per client address, lockouts) shared by every worker:
    the same rules, counted in the ``auth_failures`` table by wall-clock time."""

    def __init__(self, db: Connections, limit: RateLimit):
        self.db, self.limit = db, limit
        self.location = f"{db.location} (auth_failures)"

    def retry_after(self, client: str) -> int | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT locked_until FROM auth_failures WHERE client = %s",
                               (client,)).fetchone()
        left = (row[0] - time.time()) if row and row[0] else None
        return max(1, round(left + 0.5)) if left is not None and left > 0 else None

    def failed(self, client: str) -> int | None:
        now, window = time.time(), self.limit.window_seconds
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(
                "INSERT INTO auth_failures (client, failures) VALUES (%s, ARRAY[%s]) "
                "ON CONFLICT (client) DO UPDATE SET failures = array_append(ARRAY(SELECT f "
                "FROM unnest(auth_failures.failures) f WHERE f > %s), %s) "
                "RETURNING cardinality(failures)", (client, now, now - window, now)).fetchone()
            if row and row[0] >= self.limit.max_attempts:
                conn.execute("UPDATE auth_failures SET failures = '{}', locked_until = %s "
                             "WHERE client = %s", (now + self.limit.lockout_seconds, client))
                return max(1, round(self.limit.lockout_seconds))
        return None

    def lockouts(self) -> dict[str, float]:
        """The addresses locked out now, and until when (Unix time)."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT client, locked_until FROM auth_failures WHERE "
                                "locked_until > %s ORDER BY client", (time.time(),)).fetchall()
        return {str(row[0]): float(row[1]) for row in rows}

    def unlock(self, client: str) -> float | None:
        """Lift ``client``'s lockout and forget its wrong tokens; until when it was locked
        out (None: it was not)."""
        with self.db.connection() as conn:
            row = conn.execute("DELETE FROM auth_failures WHERE client = %s RETURNING "
                               "locked_until", (client,)).fetchone()
        until = row[0] if row else None
        return float(until) if until is not None and until > time.time() else None
