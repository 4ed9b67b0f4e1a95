"""What a channel keeps between messages and processes (docs/channels.md): which updates it has
taken, who asked to talk (pairing) and who was let in, whom it told "no" once, and how it
is doing (``clawd channels status`` reads it from another process).

``ChannelState`` is the interface; ``storage.files.channels.FileChannels`` keeps it in
``<state>/channels.json`` (replaced whole under a lock; one process polls, so an update id
above the highest taken is a new one), ``storage.postgres.channels.PgChannels`` in tables
every worker shares. A
pairing code is 8 characters of an alphabet without look-alikes (no 0/O, 1/I), valid
``PAIRING_SECONDS`` (an hour); at most ``MAX_WAITING`` requests wait per channel.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Protocol

from clawd.core.errors import ClawdError

PAIRING_SECONDS = 3600.0
MAX_WAITING = 3
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


@dataclass(frozen=True)
class Pairing:
    """A stranger's request to talk."""

    code: str
    channel: str
    sender: str  # the sender's id on the channel
    name: str | None  # "@name"
    chat: str  # where to tell them they were let in
    created: float  # time.time()

    @property
    def expires(self) -> float:
        return self.created + PAIRING_SECONDS


class ChannelState(Protocol):
    location: str

    def first_time(self, channel: str, update_id: int) -> bool:
        """Record update ``update_id`` as taken; True only the first time (in any
        process), so an update delivered again is never answered twice."""
        ...

    def request(self, channel: str, sender: str, name: str | None, chat: str,
                now: float) -> tuple[Pairing | None, bool]:
        """The sender's waiting request, or a new one: (request, made now); (None, False)
        when ``MAX_WAITING`` others already wait."""
        ...

    def pending(self, now: float) -> list[Pairing]:
        """Requests still valid, oldest first."""
        ...

    def approve(self, code: str, now: float) -> Pairing:
        """Let the sender of request ``code`` in; ``ClawdError`` for no such request."""
        ...

    def deny(self, code: str, now: float) -> Pairing:
        """Refuse request ``code`` (its sender is not asked again)."""
        ...

    def approved(self, channel: str) -> set[str]: ...

    def told(self, channel: str, sender: str) -> bool:
        """Mark a refused sender as told; True only the first time."""
        ...

    def was_denied(self, channel: str, sender: str) -> bool: ...

    def note(self, channel: str, *, connected: bool | None = None,
             error: str | None = None, inbound: int = 0, outbound: int = 0) -> None:
        """Update the channel's status: connection, last error ("" clears it), counts."""
        ...

    def status(self) -> dict[str, dict[str, Any]]:
        """Per channel: ``connected``, ``lastError``, ``messagesIn``, ``messagesOut``,
        ``updatedAt``."""
        ...

    def try_poll(self, bot: str) -> bool:
        """Become the one poller of ``bot`` (its id) if nobody is; True while this process
        is (asked again, it says whether it still is)."""
        ...

    def stop_polling(self, bot: str) -> None: ...


def no_request(code: str) -> ClawdError:
    return ClawdError(f"no pairing request {code} waiting (clawd pairing list shows them; a "
                      f"code is valid for an hour)")
