"""``clawd storage migrate | export | status``: moving a files home into PostgreSQL and back,
and which store is in use (docs/hosting.md).

``migrate --to URL`` copies every agent's sessions, transcripts, records, workspace files
and kept versions, and automation's jobs and runs, into the database, verifies them and
prints what moved, and carries its memory index's embedding cache into the database's;
the files are left as they were (``--dry-run`` writes nothing, into the database either: on
a database with no schema yet it creates none, and counts everything as new). ``export
--to DIR`` writes the database back as the embedded layout: ``DIR/agents/<id>/sessions``
(``DIR`` serves as ``CLAWD_HOME``), ``DIR/jobs.json`` and ``DIR/runs/``, and
``DIR/workspaces/<id>``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from clawd.core.errors import ClawdError


def cmd_storage(args: argparse.Namespace) -> int:
    from clawd.config import load_config

    config = load_config()
    action = args.storage_command
    if action == "migrate":
        return _migrate(config, args.to, args.agent, dry_run=args.dry_run)
    if action == "export":
        return _export(config, args.to, args.agent)
    from clawd.storage import status_lines

    for line in status_lines(config):
        print(line)
    return 0


def _agents(config: Any, only: str | None) -> list[str]:
    """The agents of a files home: the config's and any with a folder of its own."""
    from clawd.core.paths import state_dir
    from clawd.storage.files.home import agent_ids

    if only:
        return [only]
    return list(dict.fromkeys([*config.agent_ids(), *agent_ids(state_dir())]))


def _settings(config: Any, agent_id: str) -> Any:
    """The agent's resolved settings, or None for an agent the config no longer names (its
    sessions only)."""
    from clawd.config import resolve_agent

    try:
        return resolve_agent(config, agent_id)[1]
    except ClawdError:
        return None


def _migrate(config: Any, url: str, agent: str | None, *, dry_run: bool) -> int:
    from clawd.core.paths import state_dir
    from clawd.memory.index import store_path
    from clawd.storage import open_database, sessions_dir
    from clawd.storage.files.jobs import FileJobs
    from clawd.storage.moving import Nothing, carry_vectors, migrate
    from clawd.storage.moving_jobs import migrate_jobs
    from clawd.storage.postgres.jobs import PgJobs

    db = open_database(url, migrate=not dry_run)  # a dry run creates no schema either
    started, problems = time.monotonic(), 0
    print(f"{'would copy' if dry_run else 'copying'} into {db.location} "
          f"({_schema(db, dry_run)}, vector {db.vector_version or 'not created yet'})")
    for agent_id in _agents(config, agent):
        settings = _settings(config, agent_id)
        workspace = Path(settings.workspace).expanduser().resolve() if settings else None
        target = db.agent(agent_id) if db.schema_version else Nothing(agent_id)
        moved = migrate(sessions_dir(agent_id), workspace or Path("/nonexistent"), target,
                        dry_run=dry_run)
        memory = (settings or config.agents.defaults).memory_search
        carry_vectors(store_path(agent_id, memory, state_dir()), target, moved,
                      dry_run=dry_run)
        problems += len(moved.problems)
        print(moved.line() + ("" if workspace else " (no workspace: the config does not "
                                                   "name this agent)"))
    jobs = migrate_jobs(FileJobs(state_dir()), PgJobs(db) if db.schema_version else None,
                        {agent.lower()} if agent else None, dry_run=dry_run)
    problems += len(jobs.problems)
    print(jobs.line())
    if dry_run:
        db.close()
    print(f"{'dry run: nothing written' if dry_run else 'verified by SHA-256'} in "
          f"{time.monotonic() - started:.1f} s; the files are left as they were"
          + ("" if dry_run else f"; to use the database set storage.url (or "
             f"CLAWD_STORAGE_URL) to {db.location}"))
    return 1 if problems else 0


def _schema(db: Any, dry_run: bool) -> str:
    """The schema as the first line of ``migrate`` names it (a dry run: what a run would
    do to it)."""
    from clawd.storage.postgres.database import MIGRATIONS

    if not dry_run or db.schema_version == len(MIGRATIONS):
        return f"schema {db.schema_version}"
    if not db.schema_version:
        return f"no schema yet: a run creates version {len(MIGRATIONS)}"
    return f"schema {db.schema_version}: a run brings it to {len(MIGRATIONS)}"


def _export(config: Any, to: str, agent: str | None) -> int:
    from clawd.storage import open_database
    from clawd.storage.moving import export
    from clawd.storage.moving_jobs import export_jobs
    from clawd.storage.postgres.jobs import PgJobs

    url = config.storage.effective_url()
    if not url:
        raise ClawdError("clawd storage export reads the database storage.url (or "
                         "CLAWD_STORAGE_URL) names; neither is set")
    db = open_database(url)
    home = Path(to).expanduser().resolve()
    for agent_id in [agent] if agent else db.agent_ids():
        moved = export(db.agent(agent_id), home, home / "workspaces" / agent_id)
        print(moved.line())
    print(export_jobs(PgJobs(db), home, {agent.lower()} if agent else None).line())
    print(f"wrote {home}: use it with CLAWD_HOME={home} and each agent's workspace set to "
          f"{home / 'workspaces'}/<id>")
    return 0


def add_parsers(command: Any, sub: Any) -> None:
    """The ``storage`` actions (``command`` adds one with the global options)."""
    migrate = command(sub, "migrate", "copy this files home (every agent's sessions, "
                      "transcripts, workspace and kept versions; the jobs and their runs) "
                      "into a database")
    migrate.add_argument("--to", required=True, metavar="URL", help="postgresql://…")
    migrate.add_argument("--dry-run", action="store_true", help="count, write nothing")
    export = command(sub, "export", "write the database back as the embedded layout")
    export.add_argument("--to", required=True, metavar="DIR",
                        help="a new folder: DIR/agents/<id>/sessions, DIR/workspaces/<id>, "
                        "DIR/jobs.json and DIR/runs/")
    command(sub, "status", "which store is in use: schema version, counts, vector extension")
