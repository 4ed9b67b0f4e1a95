"""The embedding cache and pending batch jobs of the memory index in PostgreSQL.

``memory_embedding_cache`` is one cache for the whole database: vectors by provider, model,
endpoint fingerprint and text hash, whichever agent or host embedded the text, so a text is
embedded once for everyone and a new host embeds nothing its peers already did. Its least
recently used entries go first when it holds more than the ``maxEntries`` of the agent
writing to it. ``memory_batches`` holds an agent's batch jobs submitted without waiting.
``memory.PgIndexStore`` holds one ``CacheRows``, built on its connection (the open
transaction's, if any).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from psycopg.types.json import Jsonb

from clawd.memory.embedding_tables import BatchJobRow


class CacheRows:
    """The embedding cache, and the batch-job rows of one agent."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Any]], agent_id: str):
        self._conn, self.agent_id = connection, agent_id  # the store's connection

    def cache_get(self, provider: str, model: str, fingerprint: str,
                  hashes: Sequence[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "UPDATE memory_embedding_cache SET used_at = %s WHERE provider = %s AND "
                "model = %s AND fingerprint = %s AND hash = ANY(%s) RETURNING hash, embedding",
                (time.time(), provider, model, fingerprint, list(hashes))).fetchall()
        return {h: bytes(blob) for h, blob in rows}

    def cache_put(self, provider: str, model: str, fingerprint: str,
                  items: Iterable[tuple[str, int, bytes]], max_entries: int) -> None:
        now = time.time()
        rows = [(provider, model, fingerprint, h, dims, blob, now) for h, dims, blob in items]
        if not rows:
            return
        with self._conn() as conn, conn.transaction():
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO memory_embedding_cache (provider, model, fingerprint, hash, "
                    "dims, embedding, used_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (provider, model, fingerprint, hash) DO UPDATE SET "
                    "dims = EXCLUDED.dims, embedding = EXCLUDED.embedding, "
                    "used_at = EXCLUDED.used_at", rows)
            total = conn.execute("SELECT count(*) FROM memory_embedding_cache").fetchone()[0]
            if total > max_entries:  # least recently used entries go first
                conn.execute(
                    "DELETE FROM memory_embedding_cache WHERE ctid IN (SELECT ctid FROM "
                    "memory_embedding_cache ORDER BY used_at LIMIT %s)", (total - max_entries,))

    def cache_import(self, rows: Sequence[tuple[str, str, str, str, int, bytes]]) -> int:
        """Take in another cache's entries (provider, model, fingerprint, hash, dims,
        vector); an entry already here is kept. How many were new."""
        added = 0
        with self._conn() as conn, conn.transaction(), conn.cursor() as cursor:
            for start in range(0, len(rows), 1000):
                part = rows[start:start + 1000]
                cursor.executemany(
                    "INSERT INTO memory_embedding_cache (provider, model, fingerprint, hash, "
                    "dims, embedding, used_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT "
                    "DO NOTHING", [(*row, time.time()) for row in part], returning=False)
                added += max(cursor.rowcount, 0)
        return added

    def cache_delete(self, hashes: Sequence[str]) -> int:
        """Delete the entries of these text hashes, whatever their provider and model;
        how many there were."""
        with self._conn() as conn:
            return int(conn.execute("DELETE FROM memory_embedding_cache WHERE hash = ANY(%s)",
                                    (list(hashes),)).rowcount)

    # --- pending batch jobs -----------------------------------------------------------------

    def add_batch_job(self, provider: str, model: str, fingerprint: str, job: str,
                      hashes: Sequence[str], attempt: int, submitted_at: float) -> None:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO memory_batches (agent_id, provider, model, fingerprint, job, "
                "hashes, count, attempt, submitted_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                "%s) ON CONFLICT (agent_id, provider, job) DO UPDATE SET model = "
                "EXCLUDED.model, fingerprint = EXCLUDED.fingerprint, hashes = EXCLUDED.hashes, "
                "count = EXCLUDED.count, attempt = EXCLUDED.attempt, submitted_at = "
                "EXCLUDED.submitted_at", (self.agent_id, provider, model, fingerprint, job,
                                          Jsonb(list(hashes)), len(hashes), attempt,
                                          submitted_at))

    def batch_jobs(self, provider: str, model: str, fingerprint: str) -> list[BatchJobRow]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT provider, model, fingerprint, job, hashes, attempt, submitted_at FROM "
                "memory_batches WHERE agent_id = %s AND provider = %s AND model = %s AND "
                "fingerprint = %s ORDER BY submitted_at, job",
                (self.agent_id, provider, model, fingerprint)).fetchall()
        return [BatchJobRow(*row) for row in rows]

    def delete_batch_job(self, provider: str, job: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM memory_batches WHERE agent_id = %s AND provider = %s "
                         "AND job = %s", (self.agent_id, provider, job))

    def drop_batch_jobs_except(self, provider: str, model: str, fingerprint: str) -> int:
        with self._conn() as conn:
            return int(conn.execute(
                "DELETE FROM memory_batches WHERE agent_id = %s AND NOT (provider = %s AND "
                "model = %s AND fingerprint = %s)",
                (self.agent_id, provider, model, fingerprint)).rowcount)

    def batch_counts(self) -> tuple[int, int]:
        with self._conn() as conn:
            jobs, texts = conn.execute(
                "SELECT count(*), coalesce(sum(count), 0) FROM memory_batches "
                "WHERE agent_id = %s", (self.agent_id,)).fetchone()
        return int(jobs or 0), int(texts or 0)
