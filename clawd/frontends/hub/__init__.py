"""The hub: every session's turn queue, for every front end that sends turns (the gateway's
routes, the channels). One writer per session: a message or a command becomes a turn queued
behind the session's others and run on a worker thread through ``Chat.handle``; its events
are a ``Feed`` any client follows.

``hub`` (the ``Hub``: slots, worker threads, abort, shutdown), ``coordination`` (what
differs between one process and several workers: the ``Coordination`` interface),
``local`` (one process's), ``postgres`` (several workers' on one database), ``feed`` (a
turn's event lines), ``stored`` (a turn followed through the lines another worker stored),
``sign_ins`` (one process's count of wrong tokens), ``quotas`` (each person's turns
counted as they are queued, for every front end), ``agents`` (what the hub needs of the
agents it serves).
"""

from __future__ import annotations

from clawd.config import Config
from clawd.frontends.hub.coordination import Coordination


def open_coordination(config: Config) -> Coordination:
    """One process's (the failed sign-ins kept in ``<state>/lockouts.json`` for ``clawd
    users unlock``), or with ``storage.url`` the database's, shared by every worker."""
    limit = config.gateway.auth.rate_limit
    url = config.storage.effective_url()
    if not url:
        from clawd.core.paths import state_dir
        from clawd.frontends.hub.local import LocalCoordination
        from clawd.frontends.hub.sign_ins import FailedAuth
        from clawd.storage.files.lockouts import FILE, FileLockouts

        return LocalCoordination(FailedAuth(limit, kept=FileLockouts(state_dir() / FILE)))
    from clawd.frontends.hub.postgres import PgCoordination
    from clawd.frontends.hub.stored import stopped_lines
    from clawd.storage import open_database
    from clawd.storage.postgres.auth import PgFailedAuth
    from clawd.storage.postgres.shared import PgShared

    db = open_database(url)
    return PgCoordination(PgShared(db, stopped_lines), PgFailedAuth(db, limit))
