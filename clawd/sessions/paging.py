"""Session lists a page at a time: newest activity first, in an order that holds still.

The order is the entry's ``updatedAt`` (the last activity; ISO-8601 text, which sorts as
the time does), newest first, then the key, last first, so two sessions of one moment are
never in doubt. A page ends with a cursor, the place of its last session (``Place``), given
to the client as opaque text (``encode``); the next page is what comes after that place.
``page_of`` is the rule over entries in memory (the files' store); the database's store runs
the same order as one indexed query.
"""

from __future__ import annotations

import base64
import json
import unicodedata
from collections.abc import Mapping
from typing import Any

Place = tuple[str, str]  # (updatedAt or "", key): where a page ended


def place_of(key: str, entry: Mapping[str, Any]) -> Place:
    return (str(entry.get("updatedAt") or ""), key)


def page_of(entries: Mapping[str, Any], limit: int, after: Place | None = None
            ) -> list[tuple[str, Any]]:
    """At most ``limit`` of ``entries`` (key: entry) in the list's order, after ``after``."""
    ordered = sorted(entries.items(), key=lambda item: place_of(*item), reverse=True)
    if after is not None:
        ordered = [item for item in ordered if place_of(*item) < after]
    return ordered[:max(limit, 0)]


def encode(place: Place) -> str:
    """A page's cursor as a client is given it: URL-safe text."""
    raw = json.dumps(list(place), ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> Place:
    """The place a cursor of ``encode`` names; ``ValueError`` for anything else."""
    text = cursor.strip()
    if not text or len(text) > 4096:
        raise ValueError("the cursor is empty or too long")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        found = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ValueError("the cursor is not one this gateway gave") from None
    if not (isinstance(found, list) and len(found) == 2
            and all(isinstance(part, str) and not any(
                unicodedata.category(ch) in ("Cc", "Cs") for ch in part) for part in found)):
        raise ValueError("the cursor is not one this gateway gave")
    return found[0], found[1]
