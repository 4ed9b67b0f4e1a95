"""docs/hosting.md's backup and restore, run as written: ``pg_dump`` of clawd's database
without the rows that only mean something now (leases, turns under way, their lines,
lockouts), restored into a new database with ``pg_restore``, gives clawd back its people,
sessions, transcripts and notes, and no turn that would run again."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest

from clawd.storage.postgres.database import MIGRATIONS, Database
from clawd.storage.postgres.people import PgPeople

from conftest import _with_database, drop_database, pg_base_url

pytestmark = pytest.mark.slow  # the PostgreSQL tools as processes

HOSTING = Path(__file__).resolve().parents[2] / "docs" / "hosting.md"


def _tool(name: str) -> str:
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _documented_dump_flags() -> list[str]:
    """The ``pg_dump`` options docs/hosting.md gives (the output file aside)."""
    block = re.search(r"```sh\n# a database of clawd's own.*?```", HOSTING.read_text(), re.S)
    assert block, "the backup example is gone from docs/hosting.md"
    words = block.group(0).replace("\\\n", " ").split()
    return [w for w in words if w.startswith("--") and not w.startswith("--file")]


def _rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_a_documented_dump_restores_into_a_clawd_with_nothing_under_way(pg_url, tmp_path):
    db = Database(pg_url)
    try:
        person, _ = PgPeople(db).add("alice", ("alice",))
        storage = db.agent("alice")
        storage.files.create("MEMORY.md", "The gate code is 4711.\n")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("INSERT INTO sessions (agent_id, key, entry) VALUES ('alice', "
                         "'agent:alice:main', '{\"sessionId\": \"s1\"}')")
            conn.execute("INSERT INTO transcript_lines (agent_id, session_id, line) VALUES "
                         "('alice', 's1', '{\"type\": \"message\"}')")
            conn.execute("INSERT INTO gateway_turns (turn_id, agent_id, key, text_hash, worker, "
                         "state, text) VALUES ('t1', 'alice', 'agent:alice:main', 'x', 'w', "
                         "'queued', 'run me again')")
            conn.execute("INSERT INTO auth_failures (client, locked_until) VALUES "
                         "('203.0.113.7', 1e12)")
    finally:
        db.close()
    dump = tmp_path / "clawd.dump"
    flags = _documented_dump_flags()
    assert "--exclude-table-data=gateway_turns" in flags
    subprocess.run([_tool("pg_dump"), *flags, f"--file={dump}", pg_url], check=True,
                   timeout=120)
    name = f"clawd_restored_{uuid.uuid4().hex[:8]}"
    restored = _with_database(pg_base_url(), name)
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(restored, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        subprocess.run([_tool("pg_restore"), "--no-owner", "-d", restored, str(dump)],
                       check=True, timeout=120)
        again = Database(restored)  # clawd starts on it: nothing to migrate
        try:
            assert again.schema_version == len(MIGRATIONS)
            assert [p.name for p in PgPeople(again).all()] == [person.name]
            assert again.agent("alice").files.read("MEMORY.md", exact=True) == \
                "The gate code is 4711.\n"
        finally:
            again.close()
        assert _rows(restored, "SELECT count(*) FROM transcript_lines") == [(1,)]
        assert _rows(restored, "SELECT key FROM sessions") == [("agent:alice:main",)]
        for table in ("gateway_turns", "turn_events", "leases", "auth_failures"):
            assert _rows(restored, f"SELECT count(*) FROM {table}") == [(0,)], table
    finally:
        drop_database(restored)
