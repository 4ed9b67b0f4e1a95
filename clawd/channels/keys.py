"""Which session a channel's message belongs to (docs/channels.md).

A direct message is ``agent:<id>:<channel>:dm:<userId>``: each person a session of their
own (``session.dmScope`` ``per-channel-peer``, the default), so nobody's messages land in
another's history. With ``main`` the owner's direct messages (the senders ``allowFrom``
names) go to the main session, ``agent:<id>:main``; everyone else keeps their own. A person
linked to their id (``clawd users link``) talks to their own agent, in its
``agent:<theirAgent>:<channel>:dm:<userId>``. A group is
``agent:<id>:<channel>:group:<chatId>``, a group session (no MEMORY.md, shareable paths
only: ``sessions.store.is_group_key``); a forum topic adds ``:topic:<n>``.
"""

from __future__ import annotations

from clawd.channels.base import Inbound


def session_key(agent_id: str, message: Inbound, *, dm_scope: str = "per-channel-peer",
                owner: bool = False) -> str:
    """The session key of ``message`` for agent ``agent_id``; ``owner``: the sender is the
    operator (for ``dm_scope`` ``main``)."""
    if message.chat_type == "group":
        key = f"agent:{agent_id}:{message.channel}:group:{message.chat_id}"
        return key + (f":topic:{message.thread}" if message.thread is not None else "")
    if dm_scope == "main" and owner:
        return f"agent:{agent_id}:main"
    return f"agent:{agent_id}:{message.channel}:dm:{message.sender_id}"
