"""The people of a clawd: who may use the gateway, with a token each, reaching their own
agents only (``clawd users``, docs/hosting.md).

A person is a name, the agents their token reaches, and the SHA-256 digest of that token:
the token itself is shown once, when it is made (``add``, ``rotate``), and never stored. A
request's token is found by its digest. A person may be linked to their accounts on the
channels (``link``: ``telegram:<userId>``), so a message from there goes to their own agent;
an account is linked to one person at most. The embedded store is ``<state>/people.json``
(mode 0600, replaced whole under a lock: ``storage.files.people``); with ``storage.url`` it is
the ``people`` table (and ``person_links``: ``storage.postgres.people``), so every worker sees a
person the moment they are added or removed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from clawd.core.errors import ClawdError

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


def taken(name: str) -> ClawdError:
    return ClawdError(f"{name} is already a person here (clawd users rotate {name} gives them "
                      f"a new token)")


def linked_to(link: str, other: str) -> ClawdError:
    return ClawdError(f"{link} is linked to {other} already (clawd users unlink {other} {link} "
                      f"first)")


def not_linked(name: str, link: str) -> ClawdError:
    return ClawdError(f"{name} is not linked to {link} (clawd users list)")


def unknown(name: str) -> ClawdError:
    return ClawdError(f"no person {name} (clawd users list)")
