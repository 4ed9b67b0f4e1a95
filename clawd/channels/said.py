"""What the model reads of a message from a channel (docs/channels.md): pure.

``is_command`` tells a bot command (``/status``) from text (``//`` escapes a slash).
``model_text`` is the text of a message that is not a command as its turn is queued: a
photo without a caption is ``(a photo)``; an edit of a message sent before is marked
``(edited)``, so the model reads it as the person's correction of what they said (the
earlier version is in the history, or queued ahead of it); in a group it is ``@sender:
text``, so the model knows who is speaking.
"""

from __future__ import annotations

from clawd.channels.base import Inbound

EDITED = "(edited) "
PHOTO = "(a photo)"


def is_command(text: str) -> bool:
    """Whether ``text`` (stripped) is a bot command rather than something said."""
    return text.startswith("/") and not text.startswith("//")


def model_text(message: Inbound, text: str) -> str:
    """The text the model reads for ``message`` (``text``: its words, stripped)."""
    text = text or (PHOTO if message.kind == "image" else "")
    if message.edited:
        text = EDITED + text
    if message.chat_type == "group":
        text = f"{message.sender_name or message.sender_id}: {text}"
    return text
