"""The people of a clawd: who may use the gateway, with a token each, reaching their own
agents only (``clawd users``, docs/hosting.md).

A person is a name, the agents their token reaches, and the SHA-256 digest of that token:
the token itself is shown once, when it is made (``add``, ``rotate``), and never stored. A
request's token is found by its digest. A person may be linked to their accounts on the
channels (``link``: ``telegram:<userId>``), so a message from there goes to their own agent;
an account is linked to one person at most. The embedded store is ``<state>/people.json``
(mode 0600, replaced whole under a lock); with ``storage.url`` it is the ``people`` table
(and ``person_links``), so every worker sees a person the moment they are added or removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from clawd.core.errors import ClawdError
from clawd.core.messages import now_iso
from clawd.storage.jsondoc import locked, read_json, write_private

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
LINK = re.compile(r"(telegram):([0-9]{1,20})")  # the channels a person can be linked on


@dataclass(frozen=True)
class Person:
    name: str
    agents: tuple[str, ...]
    digest: str  # SHA-256 of the token, hex
    created: str
    links: tuple[str, ...] = ()  # their accounts on channels: ``telegram:<userId>``


def digest(token: str | bytes) -> str:
    return hashlib.sha256(token if isinstance(token, bytes) else token.encode()).hexdigest()


def new_token() -> str:
    """A fresh token: 43 URL-safe characters (256 bits)."""
    return secrets.token_urlsafe(32)


def checked_name(name: str) -> str:
    """``name`` as a person's name (and their agent's id), or a ``ClawdError``."""
    folded = name.strip().lower()
    if not NAME.fullmatch(folded):
        raise ClawdError(f"{name!r} is not a name for a person: use 1-32 lowercase letters, "
                         f"digits, '-' or '_', starting with a letter or digit")
    return folded


def checked_link(link: str) -> str:
    """``link`` as an account on a channel (``telegram:<userId>``, the user's number as
    Telegram gives it, not an @name), or a ``ClawdError``."""
    folded = link.strip().lower()
    if not LINK.fullmatch(folded):
        raise ClawdError(f"{link!r} is not an account to link: use telegram:<userId>, the "
                         f"number Telegram gives the person (clawd pairing list shows it)")
    return folded


class People(Protocol):
    location: str

    def add(self, name: str, agents: tuple[str, ...]) -> tuple[Person, str]:
        """Add a person; (the person, their token, shown once)."""
        ...

    def all(self) -> list[Person]: ...

    def remove(self, name: str) -> Person: ...

    def rotate(self, name: str) -> tuple[Person, str]:
        """A new token for ``name``; the old one stops working at once."""
        ...

    def find(self, token: bytes) -> Person | None:
        """The person whose token this is, or None."""
        ...

    def link(self, name: str, link: str) -> Person:
        """Link ``name`` to an account (``checked_link``); one linked to another person is a
        ``ClawdError``, one linked to them already is no change."""
        ...

    def unlink(self, name: str, link: str) -> Person: ...

    def linked(self, link: str) -> Person | None:
        """The person linked to the account ``link``, or None."""
        ...


class FilePeople:
    """``People`` as ``people.json`` in the state folder."""

    def __init__(self, path: Path):
        self.path = path
        self.location = str(path)

    def add(self, name: str, agents: tuple[str, ...]) -> tuple[Person, str]:
        name, token = checked_name(name), new_token()
        with self._changing() as data:
            if name in data:
                raise _taken(name)
            person = Person(name, agents, digest(token), now_iso())
            data[name] = asdict(person)
        return person, token

    def all(self) -> list[Person]:
        return [_person(entry) for _, entry in sorted(self._read().items())]

    def remove(self, name: str) -> Person:
        with self._changing() as data:
            entry = data.pop(checked_name(name), None)
        if entry is None:
            raise _unknown(name)
        return _person(entry)

    def rotate(self, name: str) -> tuple[Person, str]:
        name, token = checked_name(name), new_token()
        with self._changing() as data:
            if name not in data:
                raise _unknown(name)
            data[name]["digest"] = digest(token)
            person = _person(data[name])
        return person, token

    def find(self, token: bytes) -> Person | None:
        wanted = digest(token)
        return next((p for p in self.all() if secrets.compare_digest(p.digest, wanted)), None)

    def link(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self._changing() as data:
            if name not in data:
                raise _unknown(name)
            other = next((n for n, e in data.items() if link in (e.get("links") or ())), None)
            if other is not None and other != name:
                raise _linked_to(link, other)
            if other is None:
                data[name]["links"] = sorted([*(data[name].get("links") or ()), link])
            return _person(data[name])

    def unlink(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self._changing() as data:
            if name not in data:
                raise _unknown(name)
            links = list(data[name].get("links") or ())
            if link not in links:
                raise _not_linked(name, link)
            data[name]["links"] = [one for one in links if one != link]
            return _person(data[name])

    def linked(self, link: str) -> Person | None:
        link = checked_link(link)
        return next((p for p in self.all() if link in p.links), None)

    def _read(self) -> dict[str, Any]:
        data = read_json(self.path)
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, Any]]:
        with locked(self.path):
            data = self._read()
            yield data
            write_private(self.path, json.dumps(data, indent=2) + "\n")


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
            raise _taken(name)
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
            raise _unknown(name)
        return _row(row)

    def rotate(self, name: str) -> tuple[Person, str]:
        token = new_token()
        with self.db.connection() as conn:
            row = conn.execute("UPDATE people SET digest = %s WHERE name = %s RETURNING name, "
                               "agents, digest, created", (digest(token), checked_name(name))
                               ).fetchone()
        if row is None:
            raise _unknown(name)
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
                raise _unknown(name)
            other = conn.execute("INSERT INTO person_links (link, name) VALUES (%s, %s) ON "
                                 "CONFLICT (link) DO UPDATE SET link = EXCLUDED.link "
                                 "RETURNING name", (link, name)).fetchone()[0]
            if other != name:  # the account is another person's: nothing changed
                raise _linked_to(link, other)
        return self._one(name)

    def unlink(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self.db.connection() as conn:
            gone = conn.execute("DELETE FROM person_links WHERE link = %s AND name = %s "
                                "RETURNING 1", (link, name)).fetchone()
        person = self._one(name)
        if gone is None:
            raise _not_linked(name, link)
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
            raise _unknown(name)
        return _row(row)


# a person's row with their links (``person_links``), for ``_row``
WITH_LINKS = ("SELECT p.name, p.agents, p.digest, p.created, coalesce(array_agg(l.link "
              "ORDER BY l.link) FILTER (WHERE l.link IS NOT NULL), '{}') FROM people p "
              "LEFT JOIN person_links l ON l.name = p.name")


def _person(entry: dict[str, Any]) -> Person:
    return Person(str(entry["name"]), tuple(entry.get("agents") or ()), str(entry["digest"]),
                  str(entry.get("created") or ""), tuple(entry.get("links") or ()))


def _row(row: Any) -> Person:
    """A person from a ``people`` row: name, agents, digest, created (and links)."""
    return Person(row[0], tuple(row[1]), row[2], row[3], tuple(row[4]) if len(row) > 4 else ())


def _taken(name: str) -> ClawdError:
    return ClawdError(f"{name} is already a person here (clawd users rotate {name} gives them "
                      f"a new token)")


def _linked_to(link: str, other: str) -> ClawdError:
    return ClawdError(f"{link} is linked to {other} already (clawd users unlink {other} {link} "
                      f"first)")


def _not_linked(name: str, link: str) -> ClawdError:
    return ClawdError(f"{name} is not linked to {link} (clawd users list)")


def _unknown(name: str) -> ClawdError:
    return ClawdError(f"no person {name} (clawd users list)")
