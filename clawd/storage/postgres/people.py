"""``People`` as rows of the ``people`` table and its ``person_links`` (``storage.people``):
every worker sees a person the moment they are added or removed."""

from __future__ import annotations

from typing import Any

from clawd.core.messages import now_iso
from clawd.storage.people import (
    Person,
    checked_link,
    checked_name,
    digest,
    linked_to,
    new_token,
    not_linked,
    taken,
    unknown,
)


class PgPeople:
    """``People`` as rows of the ``people`` table."""

    def __init__(self, db: Any):
        self.db = db
        self.location = f"{db.location} (people)"

    def add(self, name: str, agents: tuple[str, ...]) -> tuple[Person, str]:
        name, token = checked_name(name), new_token()
        person = Person(name, agents, digest(token), now_iso())
        with self.db.connection() as conn:
            made = conn.execute("INSERT INTO people (name, agents, digest, created) VALUES "
                                "(%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                                (name, list(agents), person.digest, person.created)).fetchone()
        if not made:
            raise taken(name)
        return person, token

    def all(self) -> list[Person]:
        with self.db.connection() as conn:
            rows = conn.execute(f"{WITH_LINKS} GROUP BY p.name ORDER BY p.name").fetchall()
        return [_row(row) for row in rows]

    def remove(self, name: str) -> Person:
        with self.db.connection() as conn:
            row = conn.execute("DELETE FROM people WHERE name = %s RETURNING name, agents, "
                               "digest, created", (checked_name(name),)).fetchone()
        if row is None:
            raise unknown(name)
        return _row(row)

    def rotate(self, name: str) -> tuple[Person, str]:
        token = new_token()
        with self.db.connection() as conn:
            row = conn.execute("UPDATE people SET digest = %s WHERE name = %s RETURNING name, "
                               "agents, digest, created", (digest(token), checked_name(name))
                               ).fetchone()
        if row is None:
            raise unknown(name)
        return _row(row), token

    def find(self, token: bytes) -> Person | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT name, agents, digest, created FROM people WHERE "
                               "digest = %s", (digest(token),)).fetchone()
        return _row(row) if row else None

    def link(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self.db.connection() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM people WHERE name = %s FOR UPDATE",
                            (name,)).fetchone() is None:
                raise unknown(name)
            other = conn.execute("INSERT INTO person_links (link, name) VALUES (%s, %s) ON "
                                 "CONFLICT (link) DO UPDATE SET link = EXCLUDED.link "
                                 "RETURNING name", (link, name)).fetchone()[0]
            if other != name:  # the account is another person's: nothing changed
                raise linked_to(link, other)
        return self._one(name)

    def unlink(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self.db.connection() as conn:
            gone = conn.execute("DELETE FROM person_links WHERE link = %s AND name = %s "
                                "RETURNING 1", (link, name)).fetchone()
        person = self._one(name)
        if gone is None:
            raise not_linked(name, link)
        return person

    def linked(self, link: str) -> Person | None:
        with self.db.connection() as conn:
            row = conn.execute(f"{WITH_LINKS} WHERE p.name = (SELECT name FROM person_links "
                               f"WHERE link = %s) GROUP BY p.name",
                               (checked_link(link),)).fetchone()
        return _row(row) if row else None

    def _one(self, name: str) -> Person:
        with self.db.connection() as conn:
            row = conn.execute(f"{WITH_LINKS} WHERE p.name = %s GROUP BY p.name",
                               (name,)).fetchone()
        if row is None:
            raise unknown(name)
        return _row(row)


# a person's row with their links (``person_links``), for ``_row``
WITH_LINKS = ("SELECT p.name, p.agents, p.digest, p.created, coalesce(array_agg(l.link "
              "ORDER BY l.link) FILTER (WHERE l.link IS NOT NULL), '{}') FROM people p "
              "LEFT JOIN person_links l ON l.name = p.name")


def _row(row: Any) -> Person:
    """A person from a ``people`` row: name, agents, digest, created (and links)."""
    return Person(row[0], tuple(row[1]), row[2], row[3], tuple(row[4]) if len(row) > 4 else ())
