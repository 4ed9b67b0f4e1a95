"""Where an agent's sessions, transcripts, workspace files and records live.

``open_storage`` (and ``open_people``, ``open_channels``, ``open_jobs``, ``open_lockouts``
and ``status_lines``) is the one place that chooses: the embedded files (``storage.files``)
by default, or PostgreSQL (``storage.postgres``) when ``storage.url`` (or
``CLAWD_STORAGE_URL``) names a database. The rest of clawd sees only the interfaces
(``interface.AgentStorage``, ``people.People``, ``channels.ChannelState``, ``jobs.JobStore``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawd.core.messages import now_iso
from clawd.core.paths import state_dir

if TYPE_CHECKING:
    from clawd.config import AgentDefaults, Config
    from clawd.storage.channels import ChannelState
    from clawd.storage.interface import AgentStorage
    from clawd.storage.jobs import JobStore
    from clawd.storage.people import People


def sessions_dir(agent_id: str) -> Path:
    """The embedded home of an agent's sessions: ``~/.clawd/agents/<id>/sessions``."""
    return state_dir() / "agents" / agent_id / "sessions"


def open_database(url: str, *, migrate: bool = True) -> Any:
    """The ``Database`` at ``url`` (the process's, its schema brought up to date; with
    ``migrate=False`` one of its own, read as it is: close it after); without the
    PostgreSQL driver (``psycopg``, imported here, not first by ``Database``), a
    ``ConfigError`` that says how to install it."""
    try:
        import psycopg  # noqa: F401 - the driver and its pool: the postgres extra
        import psycopg_pool  # noqa: F401

        from clawd.storage.postgres import Database, database
    except ImportError as exc:
        from clawd.core.errors import ConfigError

        raise ConfigError(f"storage.url names a PostgreSQL database, but its driver is not "
                          f"installed ({exc.name}); pip install 'clawd[postgres]'") from None
    return database(url) if migrate else Database(url, migrate=False)


def open_storage(config: Config, agent_id: str, settings: AgentDefaults,
                 now: Callable[[], str] = now_iso) -> AgentStorage:
    """The storage of agent ``agent_id`` (``settings``: its resolved settings)."""
    url = config.storage.effective_url()
    if url:
        return open_database(url).agent(agent_id, now=now)
    from clawd.storage.files.storage import FileStorage

    return FileStorage(agent_id, Path(settings.workspace).expanduser().resolve(),
                       sessions_dir(agent_id), now=now)


def status_lines(config: Config) -> list[str]:
    """Which store is in use and what it holds (``clawd storage status``)."""
    url = config.storage.effective_url()
    if not url:
        from clawd.storage.files.home import status_lines as files_status

        return files_status(state_dir())
    db = open_database(url)
    return [f"store: PostgreSQL {db.location}",
            f"schema: version {db.schema_version} · vector extension {db.vector_version}",
            " · ".join(f"{name}: {value:,}" for name, value in db.counts().items())]


def open_people(config: Config) -> People:
    """The people of this clawd: ``people.json`` in the state folder, or the database's."""
    from clawd.storage.files.people import FilePeople
    from clawd.storage.postgres.people import PgPeople

    url = config.storage.effective_url()
    return PgPeople(open_database(url)) if url else FilePeople(state_dir() / "people.json")



def open_channels(config: Config) -> ChannelState:
    """What the channels keep: ``channels.json`` in the state folder, or the database's."""
    from clawd.storage.files.channels import FileChannels

    url = config.storage.effective_url()
    if not url:
        return FileChannels(state_dir() / "channels.json")
    from clawd.storage.postgres.channels import PgChannels

    return PgChannels(open_database(url))


def open_lockouts(config: Config) -> Any:
    """The gateway's sign-in lockouts as ``clawd users`` lists and lifts them:
    ``lockouts.json`` in the state folder, or the database's ``auth_failures``."""
    url = config.storage.effective_url()
    if url:
        from clawd.storage.postgres.auth import PgFailedAuth

        return PgFailedAuth(open_database(url), config.gateway.auth.rate_limit)
    from clawd.storage.files.lockouts import FILE, FileLockouts

    return FileLockouts(state_dir() / FILE)


def open_jobs(config: Config) -> JobStore:
    """Automation's jobs and runs: ``jobs.json`` and ``runs/`` in the state folder, or the
    database's ``jobs`` and ``job_runs``."""
    url = config.storage.effective_url()
    if url:
        from clawd.storage.postgres.jobs import PgJobs

        return PgJobs(open_database(url), keep=config.automation.keep_runs)
    from clawd.storage.files.jobs import FileJobs

    return FileJobs(state_dir(), keep=config.automation.keep_runs)
