"""Who may talk to clawd on a channel (docs/channels.md): a pure decision per message.

Direct messages follow ``dmPolicy``: ``pairing`` (the default) answers the senders
``allowFrom`` names and those an operator approved (``clawd pairing approve CODE``), and
gives anyone else a pairing code; ``allowlist`` answers ``allowFrom`` only; ``open``
anyone; ``disabled`` nobody. A person ``clawd users link`` links to the sender's id counts
as named by ``allowFrom`` (answered, no pairing; still not under ``disabled``). A group is
answered only when ``groups`` lists it (its chat id, or ``"*"``), and then, unless its rule
says ``requireMention: false``, only when the bot is mentioned, and only from a sender the
group's ``allowFrom`` names (``"*"``: anyone); a rule without one takes the channel's
``allowFrom`` (and the people linked to their ids), and when that is empty too anyone in
the group (``group_member``). Anything else in a group is ignored silently: a stranger in a
group is never answered, not even with a refusal. A refused sender is told once (the
service remembers whom it told) and never answered by the model.

``counted_as`` says whose turns (``gateway.quotas``) a message counts against: a linked
person's own (their turns through the API and through the channel share one budget), the
operator's for the senders ``allowFrom`` names (counted, as the operator's token is, only
with ``quotas.operator``), and for anyone else the sender's, as a person of their own.
"""

from __future__ import annotations

from typing import Literal

from clawd.channels.base import Inbound
from clawd.config.channels import ANYONE, GroupRule, Telegram
from clawd.frontends.hub.quotas import OPERATOR

Verdict = Literal["answer", "pair", "refuse", "ignore"]


def is_listed(sender_id: str, sender_name: str | None, allow_from: list[str]) -> bool:
    """Whether ``allowFrom`` names the sender, by id or by ``@name`` (any case)."""
    names = {entry.lower() for entry in allow_from}
    return sender_id in names or (sender_name is not None and sender_name.lower() in names)


def group_member(rule: GroupRule, allow_from: list[str], message: Inbound, linked: bool
                 ) -> bool:
    """Whether a group whose rule is ``rule`` answers the sender of ``message``: its
    ``allowFrom`` names them (or holds ``"*"``); without one, the channel's ``allowFrom``
    names them or they are a linked person, or that list is empty (anyone)."""
    if rule.allow_from is not None:
        return ANYONE in rule.allow_from or is_listed(message.sender_id, message.sender_name,
                                                      rule.allow_from)
    return not allow_from or linked or is_listed(message.sender_id, message.sender_name,
                                                 allow_from)


def verdict(rules: Telegram, message: Inbound, approved: set[str], linked: bool = False
            ) -> Verdict:
    """What to do with ``message``: answer it, offer pairing, refuse the sender (told
    once), or ignore it. ``approved``: the sender ids an operator let in by pairing;
    ``linked``: the sender is a person linked to their id (``clawd users link``)."""
    if message.chat_type == "group":
        rule = rules.groups.get(message.chat_id) or rules.groups.get("*")
        if rule is None or not (message.mentioned or not rule.require_mention):
            return "ignore"
        return "answer" if group_member(rule, rules.allow_from, message, linked) else "ignore"
    policy = rules.dm_policy
    if policy == "disabled":
        return "refuse"
    if policy == "open" or linked or is_listed(message.sender_id, message.sender_name,
                                               rules.allow_from):
        return "answer"
    if policy == "allowlist":
        return "refuse"
    return "answer" if message.sender_id in approved else "pair"


def counted_as(message: Inbound, person: str | None, allow_from: list[str], *,
               operator: bool) -> str | None:
    """Whose turns ``message`` counts against (None: nobody's, no limits). ``person``: the
    name of the person linked to the sender; ``operator``: ``quotas.operator``."""
    if person:
        return person
    if is_listed(message.sender_id, message.sender_name, allow_from):
        return OPERATOR if operator else None
    return f"{message.channel}:{message.sender_id}"
