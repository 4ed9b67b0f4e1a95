"""What one person may do through the gateway (``gateway.quotas``), checked where it is done.

A person is whoever holds a token of ``clawd users`` (the gatekeeper puts their name in the
request's scope); the operator's token and ``gateway.auth.tokens`` are counted only with
``quotas.operator``, as one person, ``OPERATOR``. ``submit`` is the hub's ``submit`` with the
person's turns counted: past ``turnsPerMinute`` started in a minute, or ``turnsAtOnce`` under
way, the send is refused (429 with ``Retry-After``) before anything is queued, so a burst of
one person's turns never takes the threads and the queue places another's turn needs; a send
that opens a new session past ``sessions`` is refused (409: the person can resolve it by
deleting sessions). ``write_limit`` is the largest write of a file a person may make (413
past it): ``noteBytes`` for MEMORY.md and ``memory/**.md``, ``fileBytes`` for the rest.

The turns are counted where the hub's coordination counts them: in the database with
``storage.url`` (``storage.postgres.quotas``, for every worker), in this process's memory
on files (``core.quotas.LocalTurnQuota``, one process).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from clawd.config.gateway import Quotas
from clawd.core.errors import ClawdError
from clawd.core.quotas import Refusal
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

OPERATOR = "(operator)"  # no person's name: those are letters, digits, - and _


class OverQuota(ClawdError):
    """A person's turns past ``turnsPerMinute`` or ``turnsAtOnce`` (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class TooLarge(ClawdError):
    """A write larger than a person may make (HTTP 413)."""


class TooManySessions(ClawdError):
    """A new session past ``sessions`` (HTTP 409)."""


def counted_person(request: Request) -> str | None:
    """Whose turns and writes this request counts against (None: nobody's, no limits)."""
    found = request.scope.get("state", {})
    person = found.get("person")
    if person:
        return str(person)
    quotas: Quotas = request.app.state.gateway.config.gateway.quotas
    return OPERATOR if quotas.operator else None


def turn_quota(gw: Any) -> Any:
    """The gateway's turn counter: the hub's coordination's (in the database for every
    worker, or in this process's memory)."""
    if gw.turns is None:
        gw.turns = gw.hub.coordination.turn_quota()
    return gw.turns


async def submit(request: Request, agent_id: str, key: str, text: str,
                 idempotency: str | None, *, ephemeral: bool = False, asks: bool = False
                 ) -> tuple[Any, bool]:
    """``Hub.submit`` for the request's person, within their quotas."""
    gw = request.app.state.gateway
    person = counted_person(request)
    if person is None:
        return await gw.hub.submit(agent_id, key, text, idempotency, ephemeral=ephemeral,
                                   asks=asks)
    quotas: Quotas = gw.config.gateway.quotas
    if quotas.sessions is not None and not ephemeral:
        runtime = gw.agents.runtime(agent_id)
        await run_in_threadpool(check_sessions, runtime.store, key, quotas.sessions)
    counter = turn_quota(gw)

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, *args) if counter.remote else fn(*args)

    ticket = await call(counter.reserve, person, quotas.turns_per_minute,
                        quotas.turns_at_once)
    if isinstance(ticket, Refusal):
        raise OverQuota(ticket.message, ticket.retry_after)
    try:
        turn, new = await gw.hub.submit(agent_id, key, text, idempotency,
                                        ephemeral=ephemeral, asks=asks)
    except BaseException:
        await call(counter.cancel, ticket)
        raise
    if new:
        await call(counter.attach, ticket, turn)
    else:  # a retried send: its turn was counted the first time
        await call(counter.cancel, ticket)
    return turn, new


def check_sessions(store: Any, key: str, limit: int) -> None:
    """On a thread: refuse a new session ``key`` when the store holds ``limit`` already."""
    if store.get(key) is not None:
        return
    held = store.count()
    if held >= limit:
        raise TooManySessions(f"there are {held:,} sessions here, the most one person may "
                              f"keep (gateway.quotas.sessions); delete some (DELETE "
                              f"/api/sessions/KEY) and send again")


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
