"""Each person's turns counted as the hub queues them (``gateway.quotas``), for every front
end that queues turns: the gateway's routes and the channels alike.

``submit`` is the hub's ``submit`` with a person's turns counted: past ``turnsPerMinute``
started in a minute, or ``turnsAtOnce`` under way, the send is refused (``OverQuota``, with
the seconds to wait) before anything is queued, so a burst of one person's turns never
takes the threads and the queue places another's turn needs; a send that opens a new
session past ``sessions`` is refused (``TooManySessions``). Each front end says who the
person is (the gateway: the token's person, or ``OPERATOR``; a channel: the person linked
to the sender, or the sender) and what a refusal looks like there (a 429 with
``Retry-After``, one line in the chat).

The turns are counted where the hub's coordination counts them (``Hub.quota``): in the
database with ``storage.url`` (``storage.postgres.quotas``, for every worker), in this
process's memory on files (``core.quotas.LocalTurnQuota``); one counter for every front
end, so a person's turns through the API and through Telegram share one budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from clawd.config.gateway import Quotas
from clawd.core.errors import ClawdError
from clawd.core.quotas import Refusal
from clawd.frontends.hub.hub import Hub

OPERATOR = "(operator)"  # no person's name: those are letters, digits, - and _


class OverQuota(ClawdError):
    """A person's turns past ``turnsPerMinute`` or ``turnsAtOnce`` (HTTP 429)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class TooManySessions(ClawdError):
    """A new session past ``sessions`` (HTTP 409)."""


async def submit(hub: Hub, quotas: Quotas, person: str | None, agent_id: str, key: str,
                 text: str, idempotency: str | None = None, *, ephemeral: bool = False,
                 asks: bool = False, images: tuple[Any, ...] = ()) -> tuple[Any, bool]:
    """``Hub.submit`` for ``person`` within their ``quotas`` (None: nobody's, no limits)."""
    if person is None:
        return await hub.submit(agent_id, key, text, idempotency, ephemeral=ephemeral,
                                asks=asks, images=images)
    if quotas.sessions is not None and not ephemeral:
        runtime = hub.agents.runtime(agent_id)
        await asyncio.to_thread(check_sessions, runtime.store, key, quotas.sessions)
    counter = hub.quota

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if counter.remote else fn(*args)

    ticket = await call(counter.reserve, person, quotas.turns_per_minute,
                        quotas.turns_at_once)
    if isinstance(ticket, Refusal):
        raise OverQuota(ticket.message, ticket.retry_after)
    try:
        turn, new = await hub.submit(agent_id, key, text, idempotency, ephemeral=ephemeral,
                                     asks=asks, images=images)
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
