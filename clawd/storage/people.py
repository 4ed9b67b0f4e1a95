"""The people of a clawd: who may use the gateway, with a token each, reaching their own
agents only (``clawd users``, SPEC §14).

A person is a name, the agents their token reaches, and the SHA-256 digest of that token:
the token itself is shown once, when it is made (``add``, ``rotate``), and never stored. A
request's token is found by its digest. The embedded store is ``<state>/people.json``
(mode 0600, replaced whole under a lock); with ``storage.url`` it is the ``people`` table,
so every worker sees a person the moment they are added or removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from clawd.core.errors import ClawdError
from clawd.core.messages import now_iso

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class Person:
    name: str
    agents: tuple[str, ...]
    digest: str  # SHA-256 of the token, hex
    created: str


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

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ClawdError(f"{self.path} cannot be read ({exc}); fix or remove it") from None
        return data if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, Any]]:
        from clawd.sessions.store import locked_file

        with locked_file(self.path.with_name(self.path.name + ".lock")):
            data = self._read()
            yield data
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, self.path)


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
            rows = conn.execute("SELECT name, agents, digest, created FROM people "
                                "ORDER BY name").fetchall()
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


def _person(entry: dict[str, Any]) -> Person:
    return Person(str(entry["name"]), tuple(entry.get("agents") or ()), str(entry["digest"]),
                  str(entry.get("created") or ""))


def _row(row: Any) -> Person:
    """A person from a ``people`` row: name, agents, digest, created."""
    return Person(row[0], tuple(row[1]), row[2], row[3])


def _taken(name: str) -> ClawdError:
    return ClawdError(f"{name} is already a person here (clawd users rotate {name} gives them "
                      f"a new token)")


def _unknown(name: str) -> ClawdError:
    return ClawdError(f"no person {name} (clawd users list)")
