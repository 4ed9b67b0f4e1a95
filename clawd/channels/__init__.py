"""Channels: clawd where people already talk (docs/channels.md).

A channel is a front end: an adapter turns what arrives (a Telegram update) into an
``Inbound`` message and sends what the loop's events say back (``base.Channel``). The
policy around it is pure and shared by every adapter: who may talk (``access``), which
session a message belongs to (``keys``), what the model reads of it (``said``), how a reply
reads on a phone (``markup``, ``split``). ``service`` runs a channel inside ``clawd
serve``, every turn through the hub (``frontends.hub.Hub``, one writer per session, in
arrival order). Telegram comes first (``telegram``, on python-telegram-bot: the SDK is
imported there only).
"""
