"""The hub: every session's turn queue, for every front end that sends turns (the gateway's
routes, the channels). One writer per session: a message or a command becomes a turn queued
behind the session's others and run on a worker thread through ``Chat.handle``; its events
are a ``Feed`` any client follows.

``hub`` (the ``Hub``: queues, worker threads, abort, shutdown), ``feed`` (a turn's event
lines), ``agents`` (what the hub needs of the agents it serves), ``stored`` (a turn followed
through the lines another worker stored), ``shared_hub`` (the hub of one of several workers
on one database).
"""
