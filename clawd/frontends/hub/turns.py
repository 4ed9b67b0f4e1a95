"""What the hub queues and runs, as data: a ``QueuedTurn`` (a message or command sent to a
session, with its feed and the ``CancelToken`` that stops it), a ``RemoteTurn`` (one another
worker runs, followed through its stored lines), a ``Slot`` (one session's queue and open
``Chat``), and the errors a send meets (``QueueFull``, ``Stopping``,
``IdempotencyConflict``). The hub and both coordinations share them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError
from clawd.frontends.commands import Chat
from clawd.frontends.hub.feed import Feed
from clawd.frontends.hub.stored import StoredFeed

IDEMPOTENCY_KEYS = 1000  # sends remembered for their idempotency key
STOPPING = "the gateway is shutting down; the message was not sent"


class QueueFull(ClawdError):
    def __init__(self, key: str, retry_after: int):
        super().__init__(f"session {key} already has the most turns waiting; try again in "
                         f"{retry_after} s")
        self.retry_after = retry_after


class Stopping(ClawdError):
    """The gateway is shutting down and takes no new turns."""


class IdempotencyConflict(ClawdError):
    """An idempotency key came back with a different message."""

    @classmethod
    def of(cls, idempotency: str, key: str) -> IdempotencyConflict:
        return cls(f"the idempotency key {idempotency!r} was used for another message to "
                   f"{key}; use a new key for a new message")


@dataclass(eq=False)
class QueuedTurn:
    """One message or command sent to a session, and what it produced."""

    id: str
    agent_id: str
    key: str
    text: str
    feed: Feed = field(default_factory=Feed)
    state: str = "queued"  # queued | running | done
    ephemeral: bool = False  # its session is set aside when it ends (nobody can return)
    asks: bool = False  # its sender answers its tools' questions (the web page)
    token: CancelToken = field(default_factory=CancelToken)  # cancelled: the turn stops
    images: tuple[Any, ...] = ()  # ``ImagePart``s (a channel's photo; not across workers)
    queued_at: float = field(default_factory=time.monotonic)  # when it arrived
    # a job's run (``scheduler.in_session.spec``): run as the job, not as a message
    job: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "agent": self.agent_id, "sessionKey": self.key, "state": self.state}


@dataclass(eq=False)
class RemoteTurn:
    """A turn another worker runs (with shared state): followed through its stored lines."""

    id: str
    agent_id: str
    key: str
    feed: StoredFeed
    state: str = "running"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "agent": self.agent_id, "sessionKey": self.key, "state": self.state}


@dataclass(eq=False)
class Slot:
    """One session's queue and, while it is in use, its open ``Chat``."""

    agent_id: str
    key: str
    queue: deque[QueuedTurn] = field(default_factory=deque)  # one process: its waiting turns
    running: QueuedTurn | None = None
    chat: Chat | None = None
    worker: asyncio.Task[None] | None = None
    idle_timer: asyncio.TimerHandle | None = None
    seconds_per_turn: float = 5.0  # a moving average, for Retry-After
    # with several workers: held while the session is taken or let go; how many wait for it
    taking: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    busy: ClawdError | None = None  # why it could not be taken last
    again: bool = False  # woken while its queue was being drained
