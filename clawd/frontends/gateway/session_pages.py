"""``GET /api/sessions`` a page at a time: the sessions keys point at, newest activity first.

A page reads ``limit`` entries of the store in the list's order (``sessions.paging``; one
indexed query on PostgreSQL) and the transcripts of those sessions only, so a person with
10,000 sessions gets their first 100 as fast as a person with 100. ``nextCursor`` is the
place the page ended (None: the last page). With ``all`` (ended sessions too, which no key
points at) every transcript is read and the list is cut into pages by (last activity,
session id) instead. ``limit``: ``DEFAULT_LIMIT`` when absent, at most ``MAX_LIMIT`` (more
is cut to it); not a whole number above 0, or a cursor this gateway did not give, is a 400.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawd.frontends.gateway.bodies import BadRequest
from clawd.sessions import paging
from clawd.sessions.files import summary_of
from clawd.sessions.paging import Place

if TYPE_CHECKING:
    from clawd.storage.interface import AgentStorage
    from clawd.storage.session_admin import Row

DEFAULT_LIMIT = 100
MAX_LIMIT = 500


def limit_of(value: str | None) -> int:
    """The page size a client asked for: absent, the default; above ``MAX_LIMIT``, that."""
    if value is None or value == "":
        return DEFAULT_LIMIT
    text = value.strip()
    if not text.isdigit() or int(text) < 1:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {value!r}")
    return min(int(text), MAX_LIMIT)


def cursor_of(value: str | None) -> Place | None:
    """The place a page's ``nextCursor`` names; None for the first page."""
    if value is None or value == "":
        return None
    try:
        return paging.decode(value)
    except ValueError as exc:
        raise BadRequest(f"cursor: {exc}; pass the nextCursor of the page before") from None


def page(storage: AgentStorage, limit: int, after: Place | None, ended: bool
         ) -> tuple[list[Row], str | None]:
    """On a thread: a page of the session list and the cursor of the next (None: none)."""
    from clawd.storage.session_admin import Row, rows

    if ended:
        every = [(_place(row), row) for row in rows(storage, ended=True)]
        every.sort(key=lambda item: item[0], reverse=True)
        later = [item for item in every if after is None or item[0] < after]
        shown = later[:limit]
        more = len(later) > limit
        return [row for _, row in shown], paging.encode(shown[-1][0]) if more else None
    found = storage.sessions.page(limit + 1, after)
    shown_entries = found[:limit]
    out = []
    for key, entry in shown_entries:
        session_id = entry.get("sessionId") if isinstance(entry, dict) else None
        summary = summary_of(storage.transcript(session_id)) if session_id else None
        if summary is not None:  # a key whose transcript is not there yet is not listed
            out.append(Row(summary, key))
    more = len(found) > limit
    return out, paging.encode(paging.place_of(*shown_entries[-1])) if more else None


def _place(row: Row) -> Place:
    return (row.summary.last_activity or "", row.summary.session_id)
