"""What one person may do through the gateway (``gateway.quotas``), checked where it is done.

A person is whoever holds a token of ``clawd users`` (the gatekeeper puts their name in the
request's scope); the operator's token and ``gateway.auth.tokens`` are counted only with
``quotas.operator``, as one person, ``OPERATOR``. ``submit`` is the hub's ``submit`` with the
person's turns counted (``hub.quotas.submit``, which the channels use too): past
``turnsPerMinute`` started in a minute, or ``turnsAtOnce`` under way, the send is refused
(429 with ``Retry-After``) before anything is queued; a send that opens a new session past
``sessions`` is refused (409: the person can resolve it by deleting sessions).
``write_limit`` is the largest write of a file a person may make (413 past it):
``noteBytes`` for MEMORY.md and ``memory/**.md``, ``fileBytes`` for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from clawd.config.gateway import Quotas
from clawd.core.errors import ClawdError
from clawd.frontends.hub import quotas as counted
from clawd.frontends.hub.quotas import OPERATOR
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE


class TooLarge(ClawdError):
    """A write larger than a person may make (HTTP 413)."""


def counted_person(request: Request) -> str | None:
    """Whose turns and writes this request counts against (None: nobody's, no limits)."""
    found = request.scope.get("state", {})
    person = found.get("person")
    if person:
        return str(person)
    quotas: Quotas = request.app.state.gateway.config.gateway.quotas
    return OPERATOR if quotas.operator else None


async def submit(request: Request, agent_id: str, key: str, text: str,
                 idempotency: str | None, *, ephemeral: bool = False, asks: bool = False
                 ) -> tuple[Any, bool]:
    """``Hub.submit`` for the request's person, within their quotas."""
    gw = request.app.state.gateway
    return await counted.submit(gw.hub, gw.config.gateway.quotas, counted_person(request),
                                agent_id, key, text, idempotency, ephemeral=ephemeral,
                                asks=asks)


def is_note(rel: str) -> bool:
    """Whether the workspace path ``rel`` (canonical) is a note: MEMORY.md, memory/**.md."""
    return rel == MEMORY_FILE or (rel.startswith(f"{MEMORY_DIR}/")
                                  and rel.lower().endswith(".md"))


def note_limit(request: Request) -> int | None:
    """The largest note the request's person may add (``/mcp``'s ``memory_add``)."""
    if counted_person(request) is None:
        return None
    quotas: Quotas = request.app.state.gateway.config.gateway.quotas
    return quotas.note_bytes


def write_limit(request: Request) -> Callable[[str, str], None]:
    """For the request's person: ``check(rel, content)``, which raises ``TooLarge`` when
    ``content`` is more than they may write to ``rel`` at once."""
    quotas: Quotas = request.app.state.gateway.config.gateway.quotas
    if counted_person(request) is None:
        return lambda rel, content: None

    def check(rel: str, content: str) -> None:
        note = is_note(rel)
        limit = quotas.note_bytes if note else quotas.file_bytes
        size = len(content.encode("utf-8", "surrogatepass"))
        if limit is not None and size > limit:
            key = "noteBytes" if note else "fileBytes"
            raise TooLarge(f"{size:,} bytes for {rel}; one write of "
                           f"{'a note' if note else 'a file'} may be {limit:,} bytes at most "
                           f"(gateway.quotas.{key}); nothing was written")

    return check
