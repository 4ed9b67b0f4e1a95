"""``People`` as ``<state>/people.json`` (``storage.people``): mode 0600, replaced whole under
a lock."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clawd.core.messages import now_iso
from clawd.storage.files.jsondoc import changing, read_object
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


class FilePeople:
    """``People`` as ``people.json`` in the state folder."""

    def __init__(self, path: Path):
        self.path = path
        self.location = str(path)

    def add(self, name: str, agents: tuple[str, ...]) -> tuple[Person, str]:
        name, token = checked_name(name), new_token()
        with self._changing() as data:
            if name in data:
                raise taken(name)
            person = Person(name, agents, digest(token), now_iso())
            data[name] = asdict(person)
        return person, token

    def all(self) -> list[Person]:
        return [_person(entry) for _, entry in sorted(self._read().items())]

    def remove(self, name: str) -> Person:
        with self._changing() as data:
            entry = data.pop(checked_name(name), None)
        if entry is None:
            raise unknown(name)
        return _person(entry)

    def rotate(self, name: str) -> tuple[Person, str]:
        name, token = checked_name(name), new_token()
        with self._changing() as data:
            if name not in data:
                raise unknown(name)
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
                raise unknown(name)
            other = next((n for n, e in data.items() if link in (e.get("links") or ())), None)
            if other is not None and other != name:
                raise linked_to(link, other)
            if other is None:
                data[name]["links"] = sorted([*(data[name].get("links") or ()), link])
            return _person(data[name])

    def unlink(self, name: str, link: str) -> Person:
        name, link = checked_name(name), checked_link(link)
        with self._changing() as data:
            if name not in data:
                raise unknown(name)
            links = list(data[name].get("links") or ())
            if link not in links:
                raise not_linked(name, link)
            data[name]["links"] = [one for one in links if one != link]
            return _person(data[name])

    def linked(self, link: str) -> Person | None:
        link = checked_link(link)
        return next((p for p in self.all() if link in p.links), None)

    def _read(self) -> dict[str, Any]:
        return read_object(self.path)

    def _changing(self) -> contextlib.AbstractContextManager[dict[str, Any]]:
        return changing(self.path, indent=2)


def _person(entry: dict[str, Any]) -> Person:
    return Person(str(entry["name"]), tuple(entry.get("agents") or ()), str(entry["digest"]),
                  str(entry.get("created") or ""), tuple(entry.get("links") or ()))
