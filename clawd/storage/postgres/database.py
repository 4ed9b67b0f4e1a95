"""One PostgreSQL database as clawd's store: a connection pool, the schema and its migrations.

``database(url)`` opens (once per process and URL) a ``psycopg_pool.ConnectionPool`` and
brings the schema up to date: numbered migrations (``MIGRATIONS``), each run once, in order,
in one transaction, under an advisory lock so two workers starting together never run one
twice; the version is the row count of ``clawd_schema``. The ``vector`` extension (pgvector)
is created when the server has it; a server without it fails in one line that says what to
install (the memory index needs it).

The tables keep the embedded meanings: a ``sessions`` row is a ``sessions.json`` entry
(JSONB), a ``transcript_lines`` row a JSONL line as written (the ``json`` type keeps the text
byte for byte, which ``jsonb`` would not; a line that was already unreadable in a migrated
file is kept in ``torn``), a ``workspace_files`` row a file's bytes (and permission bits),
``file_versions`` its kept versions, ``records`` an agent's small JSON records, ``leases``
who holds a session, ``people`` who may use the gateway (their tokens' digests) and
``person_links`` their accounts on the channels; ``jobs``
and ``job_runs`` automation's jobs and runs (``storage.postgres.jobs``);
``gateway_turns``, ``turn_events`` and ``auth_failures`` what the gateway's workers share
(``storage.postgres.shared``), ``quota_turns`` the turns each person started
(``storage.postgres.quotas``); the ``memory_*`` tables the memory index
(``storage.postgres.memory``); the ``channel_*`` tables the channels
(``storage.postgres.channels``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

from clawd.core.errors import ClawdError, ConfigError, StoreUnavailable
from clawd.storage.postgres.errors import unreachable
from clawd.storage.postgres.pool import Freshness, open_pool

log = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sessions (
        agent_id text NOT NULL, key text NOT NULL, entry jsonb NOT NULL,
        PRIMARY KEY (agent_id, key));
    CREATE TABLE session_logs (
        agent_id text NOT NULL, session_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz,
        PRIMARY KEY (agent_id, session_id));
    CREATE TABLE transcript_lines (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        agent_id text NOT NULL, session_id text NOT NULL, line json, torn text,
        CHECK ((line IS NULL) <> (torn IS NULL)));
    CREATE INDEX transcript_lines_session ON transcript_lines (agent_id, session_id, seq);
    CREATE TABLE workspace_files (
        agent_id text NOT NULL, path text NOT NULL, data bytea NOT NULL,
        version integer NOT NULL DEFAULT 1, mtime timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (agent_id, path));
    CREATE TABLE file_versions (
        agent_id text NOT NULL, path text NOT NULL, stamp text NOT NULL, data bytea NOT NULL,
        PRIMARY KEY (agent_id, path, stamp));
    CREATE TABLE records (
        agent_id text NOT NULL, name text NOT NULL, value jsonb NOT NULL,
        PRIMARY KEY (agent_id, name));
    CREATE TABLE leases (
        agent_id text NOT NULL, key text NOT NULL, holder text NOT NULL, pid integer,
        until double precision, PRIMARY KEY (agent_id, key));
    """,
    """
    CREATE TABLE people (
        name text PRIMARY KEY, agents text[] NOT NULL, digest text NOT NULL UNIQUE,
        created text NOT NULL);
    """,
    """
    CREATE TABLE gateway_turns (
        turn_id text PRIMARY KEY, agent_id text NOT NULL, key text NOT NULL,
        idempotency text, text_hash text NOT NULL, worker text NOT NULL,
        state text NOT NULL, created timestamptz NOT NULL DEFAULT now());
    CREATE UNIQUE INDEX gateway_turns_idempotency ON gateway_turns (agent_id, key, idempotency)
        WHERE idempotency IS NOT NULL;
    CREATE INDEX gateway_turns_created ON gateway_turns (created);
    CREATE TABLE turn_events (
        turn_id text NOT NULL, seq integer NOT NULL, line json NOT NULL,
        PRIMARY KEY (turn_id, seq));
    CREATE TABLE auth_failures (
        client text PRIMARY KEY, failures double precision[] NOT NULL DEFAULT '{}',
        locked_until double precision);
    """,
    """
    CREATE TABLE memory_meta (
        agent_id text NOT NULL, key text NOT NULL, value text NOT NULL,
        PRIMARY KEY (agent_id, key));
    CREATE TABLE memory_files (
        agent_id text NOT NULL, path text NOT NULL, source text NOT NULL, hash text NOT NULL,
        mtime double precision NOT NULL, size bigint NOT NULL,
        indexed_at double precision NOT NULL, PRIMARY KEY (agent_id, path));
    CREATE TABLE memory_chunks (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        agent_id text NOT NULL, path text NOT NULL, source text NOT NULL,
        start_line integer NOT NULL, end_line integer NOT NULL, heading text NOT NULL,
        text text NOT NULL, hash text NOT NULL, line_tokens text NOT NULL,
        terms tsvector NOT NULL, length integer NOT NULL,
        embedding bytea, segments bytea, dims integer, vec vector);
    CREATE INDEX memory_chunks_path ON memory_chunks (agent_id, path);
    CREATE INDEX memory_chunks_terms ON memory_chunks USING gin (terms);
    CREATE INDEX memory_chunks_unembedded ON memory_chunks (agent_id, id)
        WHERE embedding IS NULL;
    CREATE TABLE memory_terms (
        agent_id text NOT NULL, term text NOT NULL, docs integer NOT NULL,
        PRIMARY KEY (agent_id, term));
    CREATE TABLE memory_embedding_cache (
        provider text NOT NULL, model text NOT NULL, fingerprint text NOT NULL,
        hash text NOT NULL, dims integer NOT NULL, embedding bytea NOT NULL,
        used_at double precision NOT NULL, PRIMARY KEY (provider, model, fingerprint, hash));
    CREATE INDEX memory_embedding_cache_used ON memory_embedding_cache (used_at);
    CREATE INDEX memory_embedding_cache_hash ON memory_embedding_cache (hash);
    CREATE TABLE memory_batches (
        agent_id text NOT NULL, provider text NOT NULL, model text NOT NULL,
        fingerprint text NOT NULL, job text NOT NULL, hashes jsonb NOT NULL,
        count integer NOT NULL, attempt integer NOT NULL,
        submitted_at double precision NOT NULL, PRIMARY KEY (agent_id, provider, job));
    """,
    # a workspace file's permission bits (NULL: a new file's default), so an export gives
    # back a script's x bit and a private file's 0600
    """
    ALTER TABLE workspace_files ADD COLUMN mode integer;
    """,
    # one queue per session over every worker: arrival order, the text until it is claimed
    """
    ALTER TABLE gateway_turns ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY,
        ADD COLUMN text text, ADD COLUMN ephemeral boolean NOT NULL DEFAULT false,
        ADD COLUMN started timestamptz, ADD COLUMN ended timestamptz;
    CREATE INDEX gateway_turns_queued ON gateway_turns (agent_id, key, seq)
        WHERE state = 'queued';
    """,
    # channels (docs/channels.md): updates taken (each answered once), pairing requests, the senders
    # let in, refused or told, and each channel's status
    """
    CREATE TABLE channel_updates (
        channel text NOT NULL, update_id bigint NOT NULL,
        seen timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (channel, update_id));
    CREATE TABLE channel_pairing (
        code text PRIMARY KEY, channel text NOT NULL, sender text NOT NULL, name text,
        chat text NOT NULL, created double precision NOT NULL);
    CREATE TABLE channel_senders (
        channel text NOT NULL, sender text NOT NULL, state text NOT NULL,
        PRIMARY KEY (channel, sender));
    CREATE TABLE channel_told (
        channel text NOT NULL, sender text NOT NULL, PRIMARY KEY (channel, sender));
    CREATE TABLE channel_status (
        channel text PRIMARY KEY, connected boolean NOT NULL, last_error text,
        messages_in bigint NOT NULL, messages_out bigint NOT NULL,
        updated double precision NOT NULL);
    """,
    # automation (docs/automation.md): jobs, and their runs keyed by (job, scheduled time) so
    # that no occurrence runs twice; due jobs are claimed FOR UPDATE SKIP LOCKED (storage.jobs)
    """
    CREATE TABLE jobs (
        id text PRIMARY KEY, agent_id text NOT NULL, job jsonb NOT NULL,
        next_run timestamptz, enabled boolean NOT NULL,
        created timestamptz NOT NULL DEFAULT now());
    CREATE INDEX jobs_due ON jobs (next_run) WHERE enabled;
    CREATE TABLE job_runs (
        job_id text NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        scheduled_for timestamptz NOT NULL, run jsonb NOT NULL,
        PRIMARY KEY (job_id, scheduled_for));
    CREATE INDEX job_runs_delivery ON job_runs (job_id)
        WHERE run->'delivery'->>'status' IN ('pending', 'failed', 'sending');
    """,
    # quotas per person: each turn a person started (its ticket, taken before the turn is
    # queued); and the session list read a page at a time, newest activity first
    """
    CREATE TABLE quota_turns (
        ticket text PRIMARY KEY, person text NOT NULL,
        started timestamptz NOT NULL DEFAULT now(), turn_id text);
    CREATE INDEX quota_turns_person ON quota_turns (person, started);
    CREATE INDEX sessions_recent ON sessions
        (agent_id, (coalesce(entry->>'updatedAt', '') COLLATE "C") DESC, key COLLATE "C" DESC);
    """,
    # fencing: each taking of a session's lease bumps its epoch; a write checks it
    """
    ALTER TABLE leases ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
    """,
    # a person's accounts on the channels (telegram:<userId>), each linked to one person
    """
    CREATE TABLE person_links (
        link text PRIMARY KEY,
        name text NOT NULL REFERENCES people (name) ON DELETE CASCADE);
    CREATE INDEX person_links_name ON person_links (name);
    """,
    # a turn whose sender answers its tools' questions (the web page), wherever it runs
    "ALTER TABLE gateway_turns ADD COLUMN asks boolean NOT NULL DEFAULT false;",
    # a job's run queued in its session (``scheduler.in_session.spec``), whichever worker runs it
    "ALTER TABLE gateway_turns ADD COLUMN job jsonb;",
)
MIGRATION_LOCK = 0x636C6177  # "claw": one migrator at a time
POOL_SIZE = 16  # a worker's turns at once that do not wait for a connection
# a request waits this long for a pooled connection, and a new connection this long for
# the server, before it is answered "the database does not answer" (503)
POOL_WAIT_SECONDS = 5.0
CONNECT_SECONDS = 3


class DatabaseError(ClawdError):
    """The database cannot be used (unreachable, no rights, no pgvector)."""


class SchemaTooNew(DatabaseError, ConfigError):
    """The database was brought up to a newer clawd's schema: this one may not use it (exit
    code 2, as for a configuration problem; a restart does not change it)."""


def shown(url: str) -> str:
    """``url`` without its password, for messages."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL psycopg cannot read is shown by its scheme
        return url.split("://", 1)[0] + "://…"
    host = parts.get("host") or "localhost"
    return (f"postgresql://{parts.get('user', '')}@{host}"
            f"{':' + str(parts['port']) if parts.get('port') else ''}/{parts.get('dbname', '')}")


class Database:
    """A pool of connections to one database whose schema is current."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE, migrate: bool = True):
        """``migrate=False`` (a dry run): the schema and the extension are read as they are,
        never created or changed (``schema_version`` 0: no schema yet)."""
        import psycopg

        self.url = url
        self.location = shown(url)
        # every connection of this process says who it is: another worker tells a live
        # worker's turn from a dead one's by it (``pg_stat_activity``)
        self.worker = f"clawd {socket.gethostname()}:{os.getpid()}"[:63]
        try:
            # one starter at a time (two workers starting together race otherwise)
            with psycopg.connect(url, autocommit=True, connect_timeout=10,
                                 application_name=self.worker) as conn, conn.transaction():
                if migrate:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    self.vector_version: str | None = _extension(conn, self.location)
                    self.schema_version = _migrate(conn)
                else:
                    self.vector_version, self.schema_version = _versions(conn)
        except psycopg.OperationalError as exc:
            raise DatabaseError(f"cannot reach the database {self.location}: "
                                f"{_first_line(exc)}") from None
        self._lease: Any = None
        self._lease_guard = threading.Lock()
        self.freshness = Freshness()
        self.pool = open_pool(url, pool_size, POOL_WAIT_SECONDS, {
            "autocommit": True, "connect_timeout": CONNECT_SECONDS,
            "application_name": self.worker}, self.freshness)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (``with db.connection() as conn``), in autocommit: a
        ``conn.transaction()`` block makes several statements one. A server that does not
        answer (down, restarting) is a ``StoreUnavailable`` within ``POOL_WAIT_SECONDS``."""
        try:
            with self.pool.connection() as conn:
                try:
                    yield conn
                finally:
                    self.freshness.used(conn)
        except Exception as exc:
            if not unreachable(exc):
                raise
            raise StoreUnavailable(f"the database {self.location} does not answer "
                                   f"({_first_line(exc)}); try again in a moment") from None

    def lease_connection(self) -> Any:
        """The connection this process's session leases are advisory locks on (made on
        first use; made again if it was lost, when every lock on it went with it)."""
        import psycopg

        with self._lease_guard:
            if self._lease is None or self._lease.closed:
                try:
                    self._lease = psycopg.connect(self.url, autocommit=True,
                                                  connect_timeout=CONNECT_SECONDS,
                                                  application_name=self.worker)
                except psycopg.OperationalError as exc:
                    raise StoreUnavailable(f"the database {self.location} does not answer "
                                           f"({_first_line(exc)}); try again in a moment"
                                           ) from None
            return self._lease

    def counts(self) -> dict[str, int]:
        """Rows per store: agents, sessions, transcripts, lines, files, versions, memory
        index chunks and embedding-cache entries."""
        with self.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(DISTINCT agent_id) FROM (SELECT agent_id FROM sessions "
                "UNION SELECT agent_id FROM session_logs UNION SELECT agent_id FROM "
                "workspace_files) a), (SELECT count(*) FROM sessions), (SELECT count(*) FROM "
                "session_logs), (SELECT count(*) FROM transcript_lines), (SELECT count(*) "
                "FROM workspace_files), (SELECT count(*) FROM file_versions), (SELECT count(*) "
                "FROM memory_chunks), (SELECT count(*) FROM memory_embedding_cache)").fetchone()
        return dict(zip(("agents", "sessions", "transcripts", "lines", "files", "versions",
                         "chunks", "cached vectors"), row or ()))

    def agent_ids(self) -> list[str]:
        """The agents the database holds anything of."""
        with self.connection() as conn:
            rows = conn.execute("SELECT agent_id FROM sessions UNION SELECT agent_id FROM "
                                "session_logs UNION SELECT agent_id FROM workspace_files "
                                "ORDER BY 1").fetchall()
        return [row[0] for row in rows]

    def agent(self, agent_id: str, **options: Any) -> Any:
        from clawd.storage.postgres.storage import PgStorage

        return PgStorage(self, agent_id, **options)

    def close(self) -> None:
        self.pool.close()
        if self._lease is not None:
            self._lease.close()


_open: dict[str, Database] = {}
_guard = threading.Lock()


def database(url: str) -> Database:
    """The process's ``Database`` for ``url`` (opened and migrated on first use)."""
    with _guard:
        if url not in _open:
            _open[url] = Database(url)
        return _open[url]


def opened(url: str) -> Database | None:
    """The process's ``Database`` for ``url`` if it has opened one (nothing is opened)."""
    with _guard:
        return _open.get(url)


def forget(url: str) -> None:
    """Close the process's pool on ``url``, if it has one."""
    with _guard:
        db = _open.pop(url, None)
    if db is not None:
        db.close()


def _extension(conn: Any, where: str) -> str:
    """The version of ``vector`` in the database, created if the server has it."""
    found = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                         ).fetchone()
    if found:
        return str(found[0])
    available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
                             ).fetchone()
    if not available:
        raise DatabaseError(f"{where}: the server has no pgvector; install it and run "
                            f"CREATE EXTENSION vector; in the database")
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as exc:  # noqa: BLE001 - no rights: say what an owner must run
        raise DatabaseError(f"{where}: the vector extension is not created and this user "
                            f"may not create it ({_first_line(exc)}); as the database's "
                            f"owner run CREATE EXTENSION vector;") from None
    return _extension(conn, where)  # created now: its version


def _versions(conn: Any) -> tuple[str | None, int]:
    """The ``vector`` extension's version (None: not created) and the schema's (0: none),
    read without changing anything."""
    found = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                         ).fetchone()
    schema = conn.execute("SELECT to_regclass('clawd_schema')").fetchone()[0]
    done = conn.execute("SELECT count(*) FROM clawd_schema").fetchone()[0] if schema else 0
    return (str(found[0]) if found else None), int(done)


def _migrate(conn: Any) -> int:
    """Run the migrations not run yet; the schema version (under ``MIGRATION_LOCK``)."""
    conn.execute("CREATE TABLE IF NOT EXISTS clawd_schema (version integer PRIMARY KEY, "
                 "applied_at timestamptz NOT NULL DEFAULT now())")
    with conn.transaction():
        done = conn.execute("SELECT count(*) FROM clawd_schema").fetchone()[0]
        if done > len(MIGRATIONS):
            raise SchemaTooNew(f"the database's schema is version {done}; this clawd knows "
                               f"{len(MIGRATIONS)}: upgrade clawd (docs/hosting.md, "
                               f"upgrades)")
        for number, sql in enumerate(MIGRATIONS[done:], start=done + 1):
            conn.execute(sql)
            conn.execute("INSERT INTO clawd_schema (version) VALUES (%s)", (number,))
            log.info("database schema: migration %d applied", number)
    return len(MIGRATIONS)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
