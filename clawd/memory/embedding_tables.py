"""The embedding cache and the pending batch jobs: the two tables of the memory index that
outlive its chunks.

``embedding_cache`` holds vectors by provider, model, endpoint fingerprint and text hash, so
unchanged text is never embedded twice; the least recently used entries go first when it is
full. ``embedding_batches`` holds the batch jobs submitted without waiting
(``remote.batch.wait: false``): the job id, the embedder it belongs to, and the text hashes
it embeds, in order. ``store.Store`` holds one ``EmbeddingTables``, built on its writer
connection and its lock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from clawd.memory.schema import batched


@dataclass(slots=True)
class BatchJobRow:
    """A batch job that was submitted and not yet collected."""

    provider: str
    model: str
    fingerprint: str
    job: str
    hashes: list[str]
    attempt: int
    submitted_at: float


class EmbeddingTables:
    """The cache and batch-job rows of one index file, read and written through the store's
    writer connection while holding its lock."""

    def __init__(self, conn: apsw.Connection, lock: Any):
        self.conn, self.lock = conn, lock

    def cache_get(self, provider: str, model: str, fingerprint: str,
                  hashes: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        now = time.time()
        with self.lock:
            for part, marks in batched(hashes):
                key = (provider, model, fingerprint)
                rows = self.conn.execute(
                    "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND "
                    f"model = ? AND fingerprint = ? AND hash IN ({marks})", (*key, *part))
                found.update({h: blob for h, blob in rows})
                if found:
                    self.conn.execute(
                        "UPDATE embedding_cache SET used_at = ? WHERE provider = ? AND "
                        f"model = ? AND fingerprint = ? AND hash IN ({marks})",
                        (now, *key, *part))
        return found

    def cache_put(self, provider: str, model: str, fingerprint: str,
                  items: Iterable[tuple[str, int, bytes]], max_entries: int) -> None:
        now = time.time()
        with self.lock, self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache(provider, model, fingerprint, hash, "
                "dims, embedding, used_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(provider, model, fingerprint, h, dims, blob, now) for h, dims, blob in items])
            total = int(self.conn.execute("SELECT count(*) FROM embedding_cache")
                        .fetchall()[0][0] or 0)
            if total > max_entries:
                # Least recently used entries go first.
                self.conn.execute(
                    "DELETE FROM embedding_cache WHERE rowid IN (SELECT rowid FROM "
                    "embedding_cache ORDER BY used_at ASC LIMIT ?)", (total - max_entries,))

    def cache_delete(self, hashes: Sequence[str]) -> int:
        """Delete the entries of these text hashes, whatever their provider and model (a
        forgotten text); how many there were. Callers wrap it in a transaction."""
        deleted = 0
        with self.lock:
            for part, marks in batched(hashes):
                self.conn.execute(f"DELETE FROM embedding_cache WHERE hash IN ({marks})", part)
                deleted += self.conn.changes()
        return deleted

    # --- pending batch jobs -----------------------------------------------------------------

    def add_batch_job(self, provider: str, model: str, fingerprint: str, job: str,
                      hashes: Sequence[str], attempt: int, submitted_at: float) -> None:
        """Record a submitted job at once (its own transaction): it must survive a crash."""
        with self.lock, self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO embedding_batches(provider, model, fingerprint, job, "
                "hashes, count, attempt, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (provider, model, fingerprint, job, json.dumps(list(hashes)), len(hashes),
                 attempt, submitted_at))

    def batch_jobs(self, provider: str, model: str, fingerprint: str) -> list[BatchJobRow]:
        """The pending jobs of one embedder, oldest first."""
        with self.lock:
            rows = list(self.conn.execute(
                "SELECT provider, model, fingerprint, job, hashes, attempt, submitted_at "
                "FROM embedding_batches WHERE provider = ? AND model = ? AND fingerprint = ? "
                "ORDER BY submitted_at, rowid", (provider, model, fingerprint)))
        return [BatchJobRow(p, m, f, j, json.loads(h), a, t) for p, m, f, j, h, a, t in rows]

    def delete_batch_job(self, provider: str, job: str) -> None:
        with self.lock:
            self.conn.execute("DELETE FROM embedding_batches WHERE provider = ? AND job = ?",
                              (provider, job))

    def drop_batch_jobs_except(self, provider: str, model: str, fingerprint: str) -> int:
        """Forget the jobs of every other embedder; how many there were."""
        with self.lock:
            self.conn.execute(
                "DELETE FROM embedding_batches WHERE NOT (provider = ? AND model = ? AND "
                "fingerprint = ?)", (provider, model, fingerprint))
            return self.conn.changes()

    def batch_counts(self) -> tuple[int, int]:
        """(pending jobs, texts they embed)."""
        with self.lock:
            jobs, texts = self.conn.execute(
                "SELECT count(*), coalesce(sum(count), 0) FROM embedding_batches").fetchall()[0]
        return int(jobs or 0), int(texts or 0)
