"""The session list's order and cursors: newest activity first, then the key; a cursor is
the place a page ended, and nothing but a cursor the list gave is taken."""

from __future__ import annotations

import base64

import pytest

from clawd.sessions.paging import decode, encode, page_of, place_of


def _entries() -> dict:
    stamps = ["2026-01-02T00:00:00.000Z", "2026-01-01T00:00:00.000Z", None]
    return {f"agent:main:{name}": {"updatedAt": stamps[n % 3]}
            for n, name in enumerate(["a", "b", "c", "d", "e", "f", "g"])}


def test_pages_walk_every_entry_once_newest_first():
    entries = _entries()
    seen, after = [], None
    while True:
        found = page_of(entries, 3, after)
        if not found:
            break
        seen += [key for key, _ in found]
        after = place_of(*found[-1])
    assert sorted(seen) == sorted(entries) and len(seen) == len(set(seen))
    assert seen == ["agent:main:g", "agent:main:d", "agent:main:a",  # newest; keys last first
                    "agent:main:e", "agent:main:b", "agent:main:f", "agent:main:c"]
    assert page_of(entries, 0) == [] and page_of({}, 5) == []


@pytest.mark.parametrize("place", [("2026-01-01T00:00:00.000Z", "agent:main:ü/x y"),
                                   ("", ""), ("", "agent:main:\u202e")])
def test_a_cursor_gives_back_its_place(place):
    cursor = encode(place)
    assert cursor.isascii() and "=" not in cursor and "/" not in cursor
    assert decode(cursor) == place


@pytest.mark.parametrize("cursor", [
    "", " ", "not a cursor!", "%%%", "x" * 5000,
    base64.urlsafe_b64encode(b"[1, 2]").decode(),
    base64.urlsafe_b64encode(b'["a"]').decode(),
    base64.urlsafe_b64encode(b'{"a": "b"}').decode(),
    base64.urlsafe_b64encode(b'["a\\u0000", "b"]').decode(),
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
])
def test_anything_else_is_no_cursor(cursor):
    with pytest.raises(ValueError):
        decode(cursor)
