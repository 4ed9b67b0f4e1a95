"""The hub: every session's turn queue, for every front end that sends turns (the gateway's
routes, the channels). One writer per session: a message or a command becomes a turn queued
behind the session's others and run on a worker thread through ``Chat.handle``; its events
are a ``Feed`` any client follows.

``hub`` (the ``Hub``: slots, worker threads, abort, shutdown), ``coordination`` (what
differs between one process and several workers: the ``Coordination`` interface),
``local`` (one process's), ``postgres`` (several workers' on one database), ``feed`` (a
turn's event lines), ``stored`` (a turn followed through the lines another worker stored),
``sign_ins`` (one process's count of wrong tokens), ``agents`` (what the hub needs of the
agents it serves).
"""
