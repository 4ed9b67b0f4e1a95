"""Delete everything one agent holds in the database (``clawd users remove NAME --purge``):
its sessions, transcripts, workspace files and kept versions, records, leases, memory
index rows, the embedding-cache entries of its text that no other agent's text shares, and
the gateway's records of its turns; and the turn tickets of a person. One transaction: all
of it goes, or none. Nothing of any other agent is touched: every statement names the
agent (or, for the cache, hashes no other agent's chunk has)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

# what is kept per agent, in the order it is deleted
AGENT_TABLES = ("transcript_lines", "session_logs", "sessions", "workspace_files",
                "file_versions", "records", "leases", "memory_chunks", "memory_files",
                "memory_meta", "memory_terms", "memory_batches")


def purge_agent(db: Connections, agent_id: str, person: str | None = None) -> dict[str, int]:
    """Delete ``agent_id``'s rows (and ``person``'s turn tickets); rows deleted per table."""
    done: dict[str, int] = {}
    with db.connection() as conn, conn.transaction():
        done["turn_events"] = conn.execute(
            "DELETE FROM turn_events WHERE turn_id IN (SELECT turn_id FROM gateway_turns "
            "WHERE agent_id = %s)", (agent_id,)).rowcount
        done["gateway_turns"] = conn.execute("DELETE FROM gateway_turns WHERE agent_id = %s",
                                             (agent_id,)).rowcount
        done["memory_embedding_cache"] = conn.execute(
            "DELETE FROM memory_embedding_cache WHERE hash IN (SELECT hash FROM memory_chunks "
            "WHERE agent_id = %s) AND hash NOT IN (SELECT hash FROM memory_chunks WHERE "
            "agent_id <> %s)", (agent_id, agent_id)).rowcount
        for table in AGENT_TABLES:
            done[table] = conn.execute(f"DELETE FROM {table} WHERE agent_id = %s",
                                       (agent_id,)).rowcount
        if person is not None:
            done["quota_turns"] = conn.execute("DELETE FROM quota_turns WHERE person = %s",
                                               (person,)).rowcount
    return done
