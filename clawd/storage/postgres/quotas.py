"""The turns each person started, counted for every ``clawd serve`` worker on one database
(``quota_turns``), so ``gateway.quotas`` holds however the requests are spread.

A turn takes a ticket before it is queued (``reserve``): under a transaction-scoped advisory
lock on the person, their recent starts and the turns they have under way are read, the
rule (``core.quotas.turn_refusal``) is applied, and the ticket is written, so two workers
taking a ticket for one person at the same moment never both get the last one. The ticket
then names its turn (``attach``), whose ``gateway_turns`` row says whether it is still under
way; a ticket that started no turn (a refused or retried send) is given back (``cancel``).
Times are the database's clock, the same for every worker.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from clawd.core.quotas import WINDOW_SECONDS, Refusal, turn_refusal
from clawd.storage.postgres.sessions import key_lock
from clawd.storage.postgres.shared import UNFINISHED

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

PENDING_SECONDS = 30.0  # a ticket whose turn is being queued counts as under way this long
# the ticket's turn is queued, or runs on a worker still connected
UNDER_WAY = (f"((q.turn_id IS NULL AND q.started > now() - make_interval(secs => "
             f"{PENDING_SECONDS})) OR EXISTS (SELECT 1 FROM gateway_turns WHERE "
             f"gateway_turns.turn_id = q.turn_id AND {UNFINISHED}))")


class PgTurnQuota:
    """Tickets for the turns of people, in ``quota_turns``."""

    remote = True  # its calls reach the database: made off the event loop

    def __init__(self, db: Connections):
        self.db = db

    def reserve(self, person: str, per_minute: int | None, at_once: int | None
                ) -> str | Refusal:
        """A ticket for one more turn of ``person``, or why not."""
        ticket = uuid.uuid4().hex
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (key_lock("", person, "quota"),))
            conn.execute(f"DELETE FROM quota_turns q WHERE person = %s AND started < now() - "
                         f"make_interval(secs => %s) AND NOT {UNDER_WAY}",
                         (person, WINDOW_SECONDS))
            # the time now, after the lock: ``now()`` is when the transaction began, before
            # it waited, and the tickets taken meanwhile would seem to come from the future
            now = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())"
                                     ).fetchone()[0])
            rows = conn.execute("SELECT extract(epoch FROM started) FROM quota_turns WHERE "
                                "person = %s AND started > to_timestamp(%s) - make_interval("
                                "secs => %s)", (person, now, WINDOW_SECONDS)).fetchall()
            under_way = conn.execute(f"SELECT count(*) FROM quota_turns q WHERE person = %s "
                                     f"AND {UNDER_WAY}", (person,)).fetchone()[0]
            refusal = turn_refusal([float(r[0]) for r in rows], int(under_way), now,
                                   per_minute=per_minute, at_once=at_once)
            if refusal is not None:
                return refusal
            conn.execute("INSERT INTO quota_turns (ticket, person, started) VALUES (%s, %s, "
                         "to_timestamp(%s))", (ticket, person, now))
        return ticket

    def attach(self, ticket: str, turn: Any) -> None:
        """The ticket's turn was queued (``turn.id``): it is under way while that runs."""
        with self.db.connection() as conn:
            conn.execute("UPDATE quota_turns SET turn_id = %s WHERE ticket = %s",
                         (str(turn.id), ticket))

    def cancel(self, ticket: str) -> None:
        """The ticket started no turn: it counts for nothing."""
        with self.db.connection() as conn:
            conn.execute("DELETE FROM quota_turns WHERE ticket = %s", (ticket,))

    def forget(self, person: str) -> None:
        """Every ticket of ``person`` (their data purged)."""
        with self.db.connection() as conn:
            conn.execute("DELETE FROM quota_turns WHERE person = %s", (person,))
