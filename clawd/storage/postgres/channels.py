"""``ChannelState`` in the database every worker shares (``storage.channels``): the
``channel_updates`` taken (a primary key: the one insert that lands answers the update),
``channel_pairing`` requests, ``channel_senders`` (approved, denied, told) and
``channel_status``. Taken updates are kept ``KEEP_UPDATES_SECONDS``: Telegram never
delivers one again after a day.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from typing import TYPE_CHECKING, Any

from clawd.storage.channels import MAX_WAITING, PAIRING_SECONDS, Pairing, new_code, no_request

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

KEEP_UPDATES_SECONDS = 7 * 24 * 3600


def _lock_number(channel: str) -> int:
    return int.from_bytes(hashlib.sha256(f"pairing:{channel}".encode()).digest()[:8], "big",
                          signed=True)


def _pairing(row: Any) -> Pairing:
    return Pairing(row[0], row[1], row[2], row[3], row[4], float(row[5]))


PAIRING_COLUMNS = "code, channel, sender, name, chat, created"


class PgChannels:
    def __init__(self, db: Connections):
        self.db = db
        self.location = f"{db.location} (channels)"
        self._polling: dict[str, Any] = {}  # bot -> the connection holding its lock

    def try_poll(self, bot: str) -> bool:
        """A session advisory lock on a connection of its own: it is let go when this
        process stops or loses the connection, and another worker takes over."""
        held = self._polling.get(bot)
        if held is not None:
            try:
                held.execute("SELECT 1")
                return True
            except Exception:  # noqa: BLE001 - the connection (and the lock) is gone
                self.stop_polling(bot)
        import psycopg

        conn = psycopg.connect(self.db.url, autocommit=True,
                               application_name=f"{self.db.worker} poller")
        number = int.from_bytes(hashlib.sha256(f"poller:{bot}".encode()).digest()[:8], "big",
                                signed=True)
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (number,)).fetchone()
        if not got or not got[0]:
            conn.close()
            return False
        self._polling[bot] = conn
        return True

    def stop_polling(self, bot: str) -> None:
        conn = self._polling.pop(bot, None)
        if conn is not None:
            with contextlib.suppress(Exception):  # already gone
                conn.close()

    def first_time(self, channel: str, update_id: int) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("INSERT INTO channel_updates (channel, update_id) VALUES "
                               "(%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                               (channel, update_id)).fetchone()
            if row is not None and update_id % 100 == 0:
                conn.execute("DELETE FROM channel_updates WHERE seen < now() - "
                             "make_interval(secs => %s)", (KEEP_UPDATES_SECONDS,))
        return row is not None

    def request(self, channel: str, sender: str, name: str | None, chat: str,
                now: float) -> tuple[Pairing | None, bool]:
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_number(channel),))
            conn.execute("DELETE FROM channel_pairing WHERE created <= %s",
                         (now - PAIRING_SECONDS,))
            rows = conn.execute(f"SELECT {PAIRING_COLUMNS} FROM channel_pairing WHERE "
                                f"channel = %s", (channel,)).fetchall()
            for row in rows:
                if row[2] == sender:
                    return _pairing(row), False
            if len(rows) >= MAX_WAITING:
                return None, False
            made = Pairing(new_code(), channel, sender, name, chat, now)
            conn.execute(f"INSERT INTO channel_pairing ({PAIRING_COLUMNS}) VALUES "
                         f"(%s, %s, %s, %s, %s, %s)", (made.code, channel, sender, name,
                                                       chat, now))
            return made, True

    def pending(self, now: float) -> list[Pairing]:
        with self.db.connection() as conn:
            rows = conn.execute(f"SELECT {PAIRING_COLUMNS} FROM channel_pairing WHERE "
                                f"created > %s ORDER BY created",
                                (now - PAIRING_SECONDS,)).fetchall()
        return [_pairing(row) for row in rows]

    def approve(self, code: str, now: float) -> Pairing:
        return self._settle(code, "approved", now)

    def deny(self, code: str, now: float) -> Pairing:
        return self._settle(code, "denied", now)

    def _settle(self, code: str, state: str, now: float) -> Pairing:
        with self.db.connection() as conn, conn.transaction():
            row = conn.execute(f"DELETE FROM channel_pairing WHERE code = %s AND created > "
                               f"%s RETURNING {PAIRING_COLUMNS}",
                               (code.strip().upper(), now - PAIRING_SECONDS)).fetchone()
            if row is None:
                raise no_request(code)
            found = _pairing(row)
            conn.execute("INSERT INTO channel_senders (channel, sender, state) VALUES "
                         "(%s, %s, %s) ON CONFLICT (channel, sender) DO UPDATE SET "
                         "state = EXCLUDED.state", (found.channel, found.sender, state))
        return found

    def approved(self, channel: str) -> set[str]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT sender FROM channel_senders WHERE channel = %s AND "
                                "state = 'approved'", (channel,)).fetchall()
        return {row[0] for row in rows}

    def was_denied(self, channel: str, sender: str) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("SELECT 1 FROM channel_senders WHERE channel = %s AND "
                               "sender = %s AND state = 'denied'", (channel, sender)
                               ).fetchone()
        return row is not None

    def told(self, channel: str, sender: str) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("INSERT INTO channel_told (channel, sender) VALUES (%s, %s) "
                               "ON CONFLICT DO NOTHING RETURNING 1", (channel, sender)
                               ).fetchone()
        return row is not None

    def note(self, channel: str, *, connected: bool | None = None,
             error: str | None = None, inbound: int = 0, outbound: int = 0) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO channel_status (channel, connected, last_error, messages_in, "
                "messages_out, updated) VALUES (%(c)s, coalesce(%(up)s, false), "
                "nullif(%(err)s, ''), %(i)s, %(o)s, %(now)s) ON CONFLICT (channel) DO UPDATE "
                "SET connected = coalesce(%(up)s, channel_status.connected), "
                "last_error = CASE WHEN %(err)s::text IS NULL THEN channel_status.last_error "
                "ELSE nullif(%(err)s, '') END, "
                "messages_in = channel_status.messages_in + %(i)s, "
                "messages_out = channel_status.messages_out + %(o)s, updated = %(now)s",
                {"c": channel, "up": connected, "err": error, "i": inbound, "o": outbound,
                 "now": time.time()})

    def status(self) -> dict[str, dict[str, Any]]:
        with self.db.connection() as conn:
            rows = conn.execute("SELECT channel, connected, last_error, messages_in, "
                                "messages_out, updated FROM channel_status ORDER BY channel"
                                ).fetchall()
        return {row[0]: {"connected": row[1], "lastError": row[2], "messagesIn": row[3],
                         "messagesOut": row[4], "updatedAt": row[5]} for row in rows}
