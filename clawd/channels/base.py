"""What every channel adapter speaks: an ``Inbound`` message in, and a ``Channel`` out.

``Inbound`` is one message a person sent, as the service needs it whatever the network:
where it came from (chat, sender, thread), what it says (text, images, or a kind clawd
cannot take yet), whether the bot was mentioned, and whether it is an edit of a message
sent before. ``Channel`` is what a reply needs: send a text (returning the network's
message id, which is what "delivered" means), edit it (``Throttled`` when asked to wait and
not waiting), show "typing…". ``Delivery`` is the seam automation's outbox calls with a
target such as ``telegram:<chatId>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from clawd.core.messages import ImagePart

ChatType = Literal["dm", "group"]
Kind = Literal["text", "image", "voice", "file", "other"]


@dataclass(frozen=True)
class Inbound:
    """One message to clawd, from any channel."""

    channel: str  # "telegram"
    update_id: int  # the network's id of the delivery, for answering it once
    chat_id: str
    chat_type: ChatType
    sender_id: str
    sender_name: str | None  # "@name", when the person has one
    text: str
    message_id: int = 0
    thread: int | None = None  # a forum topic
    mentioned: bool = False  # the bot was named (@bot), or the message replies to it
    kind: Kind = "text"
    images: tuple[ImagePart, ...] = field(default=())
    file_id: str | None = None  # an image to fetch before the turn (``Channel.image``)
    edited: bool = False  # the person changed a message sent before (a new update)


class Throttled(Exception):
    """The network asks to wait ``retry_after`` seconds before the next call (a 429)."""

    def __init__(self, retry_after: float):
        super().__init__(f"asked to wait {retry_after:.0f} s")
        self.retry_after = retry_after


class Channel(Protocol):
    """What the service needs of an adapter to answer."""

    name: str

    async def send(self, chat_id: str, text: str, *, thread: int | None = None,
                   html: bool = True) -> int:
        """Send ``text`` (the channel's markup when ``html``); the message id."""
        ...

    async def edit(self, chat_id: str, message_id: int, text: str, *,
                   html: bool = True, wait: bool = True) -> None:
        """Change a message sent before to ``text``. A 429 is waited out, or with ``wait``
        False raised at once as ``Throttled`` (a preview that may be skipped)."""
        ...

    async def typing(self, chat_id: str, *, thread: int | None = None) -> None: ...


class Delivery(Protocol):
    """Automation's outbox: deliver ``text`` to ``target`` (``telegram:<chatId>``); the
    message id of the last part sent. Raises on failure (the outbox retries)."""

    async def deliver(self, target: str, text: str) -> int: ...
