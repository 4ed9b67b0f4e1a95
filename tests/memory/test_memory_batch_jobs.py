"""The life of batch jobs the index does not wait for (``remote.batch.wait: false``), with an
in-process embedder whose jobs the test finishes, fails or breaks step by step."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from clawd.memory import keywords
from clawd.memory.base import BatchStatus, EmbeddingError
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write

GATEWAY = "# Infra\n\nThe gateway runs on the Mac Studio in the office.\n"
BIRDS = "# Birds\n\nThe heron nests by the lake behind the boathouse.\n"


class ScriptedBatches(FakeEmbedder):
    """Bag-of-words vectors through three batch steps; jobs stay pending until ``finish``."""

    provider = "scripted"

    def __init__(self, memory: Any) -> None:
        super().__init__()
        self.settings = memory
        self.batch_min_texts = 1
        self.batch_job_texts = 10_000
        self.batch_job_bytes = None
        self.jobs: dict[str, dict[str, Any]] = {}
        self.polls: dict[str, int] = {}
        self.cancelled: list[str] = []
        self.submit_errors: dict[int, Exception] = {}  # nth submission -> error raised
        self.poll_errors: dict[str, Exception] = {}
        self._ids = itertools.count(1)

    def submit_batch_job(self, texts: Sequence[str]) -> tuple[str, BatchStatus]:
        n = next(self._ids)
        if n in self.submit_errors:
            raise self.submit_errors[n]
        job = f"job{n}"
        self.jobs[job] = {"texts": list(texts), "state": "pending", "vectors": None}
        self.polls[job] = 0
        return job, BatchStatus("pending", "validating")

    def poll_batch_job(self, job_id: str, count: int) -> BatchStatus:
        self.polls[job_id] += 1
        if job_id in self.poll_errors:
            raise self.poll_errors[job_id]
        job = self.jobs[job_id]
        if job["state"] == "pending":
            return BatchStatus("pending", "in_progress")
        return BatchStatus(job["state"], job["state"], job["vectors"])

    def cancel_batch_job(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def finish(self, job_id: str, state: str = "completed", upto: int | None = None) -> None:
        """End a job; with ``upto``, only its first ``upto`` texts have vectors."""
        job = self.jobs[job_id]
        job["vectors"] = [self._vector(t) if upto is None or i < upto else None
                          for i, t in enumerate(job["texts"])]
        job["state"] = state


def memory(**overrides: Any):
    batch = {"wait": False, **overrides.pop("batch", {})}
    return settings(provider="openai", fallback="none", sync={"watch": False},
                    remote={"apiKey": "sk-test", "batch": batch}, **overrides)


def open_scripted(tmp_path: Path, ws: Path, fallback=None, **overrides):
    mem = memory(**overrides)
    embedder = ScriptedBatches(mem)
    index = open_file_index("main", ws, mem, tmp_path / "state", embedder=embedder,
                            fallback=fallback, env={})
    return index, embedder


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "MEMORY.md", GATEWAY)
    return root


def paths(result) -> list[str]:
    return [r["path"] for r in result["results"]]


def test_job_no_chunk_needs_any_more_is_cancelled_and_forgotten(tmp_path, ws):
    index, embedder = open_scripted(tmp_path, ws, batch={"pollIntervalMs": 10})
    index.sync()
    embedder.finish("job1")
    index.sync()
    note = write(ws, "memory/birds.md", BIRDS)
    assert index.sync()["pendingBatches"] == 1  # job2: the heron note
    note.unlink()  # gone before its vectors came
    result = index.sync()
    assert embedder.cancelled == ["job2"]
    assert (result["pendingBatches"], result["pendingEmbeddings"]) == (0, 0)
    status = index.status()
    assert status["chunks"] == status["embeddedChunks"] == 1
    assert status["fullyEmbedded"] is True and status["pendingBatches"] == 0
    polls = embedder.polls["job2"]
    for _ in range(3):
        index._polled_at -= 1  # pollIntervalMs has passed
        assert paths(index.search("gateway studio")) == ["MEMORY.md"]
    assert embedder.polls["job2"] == polls  # searches do not sync for it


def test_text_edited_while_its_job_runs(tmp_path, ws):
    index, embedder = open_scripted(tmp_path, ws)
    index.sync()
    write(ws, "MEMORY.md", "# Infra\n\nThe gateway moved to the rack in the basement.\n")
    index.sync()
    assert embedder.cancelled == ["job1"] and index.status()["pendingBatches"] == 1
    write(ws, "MEMORY.md", GATEWAY)  # and back: its text is submitted again
    index.sync()
    assert embedder.cancelled == ["job1", "job2"]
    assert embedder.jobs["job3"]["texts"] == embedder.jobs["job1"]["texts"]
    embedder.finish("job3")
    index.sync()
    assert index.status()["fullyEmbedded"] is True


def test_search_polls_only_while_a_chunk_awaits_its_vector(tmp_path, ws):
    index, embedder = open_scripted(tmp_path, ws, batch={"pollIntervalMs": 10})
    index.sync()
    index._polled_at -= 1
    index.search("gateway")
    assert index.wait_synced(10) and embedder.polls["job1"] == 1
    embedder.finish("job1")
    index._polled_at -= 1
    index.search("gateway studio", mode="vector", min_score=0)
    assert index.wait_synced(10)
    assert paths(index.search("gateway studio", mode="vector", min_score=0)) == ["MEMORY.md"]
    assert embedder.polls["job1"] == 2 and index.status()["pendingBatches"] == 0


def test_upload_error_with_a_fallback_keeps_the_accepted_jobs(tmp_path, ws, caplog):
    write(ws, "memory/birds.md", BIRDS)
    fallback = FakeEmbedder()
    index, embedder = open_scripted(tmp_path, ws, fallback=fallback,
                                    batch={"concurrency": 1})
    embedder.batch_job_texts = 1  # one job per chunk
    embedder.submit_errors[2] = EmbeddingError("openai batch failed: HTTP 500 on upload")
    with caplog.at_level(logging.WARNING):
        result = index.sync()
    assert (result["provider"], result["pendingBatches"]) == ("scripted", 1)
    assert list(embedder.jobs) == ["job1"] and fallback.calls == []
    assert index.status()["embeddedChunks"] == 0
    assert caplog.text.count("HTTP 500 on upload") == 1
    result = index.sync()  # the refused text goes out again
    assert result["submitted"] == 1 and list(embedder.jobs) == ["job1", "job3"]
    embedder.finish("job1")
    embedder.finish("job3")
    index.sync()
    assert index.status()["fullyEmbedded"] is True
    assert paths(index.search("heron boathouse", mode="vector", min_score=0))[0] == \
        "memory/birds.md"


def test_upload_error_without_a_fallback_keeps_embeddings_on(tmp_path, ws):
    index, embedder = open_scripted(tmp_path, ws)
    embedder.submit_errors[1] = EmbeddingError("openai batch failed: connection reset")
    result = index.sync()
    assert result["provider"] == "scripted" and result["pendingBatches"] == 0
    write(ws, "memory/birds.md", BIRDS)
    result = index.sync()
    # One job per attempt: the gateway text's second, the heron text's first.
    assert result["submitted"] == 2 and list(embedder.jobs) == ["job2", "job3"]
    assert index.status()["embeddingError"] is None


def test_timed_out_job_keeps_its_finished_part(tmp_path, ws):
    write(ws, "memory/birds.md", BIRDS)
    index, embedder = open_scripted(tmp_path, ws)
    index.sync()
    assert len(embedder.jobs["job1"]["texts"]) == 2
    with index.store.lock:
        index.store.conn.execute(
            "UPDATE embedding_batches SET submitted_at = submitted_at - 24.5 * 3600")
    index.sync()
    assert embedder.cancelled == ["job1"] and list(embedder.jobs) == ["job1"]
    embedder.finish("job1", state="failed", upto=1)  # cancelled with its first text done
    result = index.sync()
    assert result["collected"] == 1
    assert embedder.jobs["job2"]["texts"] == embedder.jobs["job1"]["texts"][1:]
    assert index.status()["embeddedChunks"] == 1


def test_a_job_that_cannot_be_read_does_not_stop_the_others(tmp_path, ws, caplog):
    index, embedder = open_scripted(tmp_path, ws)
    index.sync()
    write(ws, "memory/birds.md", BIRDS)
    index.sync()
    embedder.finish("job1")
    embedder.finish("job2")
    embedder.poll_errors["job1"] = KeyError("output_file_id")
    with caplog.at_level(logging.WARNING, logger="clawd.memory.batches"):
        result = index.sync()
        index.sync()
    assert caplog.text.count("job1 could not be polled") == 1  # warned once
    assert result["collected"] == 1 and result["pendingBatches"] == 1
    assert index.status()["embeddedChunks"] == 1
    del embedder.poll_errors["job1"]
    index.sync()
    assert index.status()["fullyEmbedded"] is True


def test_collected_vectors_do_not_evict_cache_entries_the_sync_reads(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "memory/a.md", "# A\n\nalpha apple avocado\n")
    write(ws, "memory/b.md", "# B\n\nbeta banana blueberry\n")
    index, embedder = open_scripted(tmp_path, ws, cache={"maxEntries": 2})
    index.sync()
    embedder.finish("job1")
    index.sync()  # a and b embedded, and cached
    write(ws, "memory/c.md", "# C\n\ncherry coconut cranberry\n")
    index.sync()
    embedder.finish("job2")
    (ws / "memory/a.md").rename(ws / "memory/a2.md")  # same text, read from the cache
    result = index.sync()
    assert result["submitted"] == 0 and result["cached"] == 2
    status = index.status()
    assert status["embeddedChunks"] == 3 and status["pendingBatches"] == 0
    assert status["cacheEntries"] == 2


def test_chunk_awaiting_its_vector_ranks_among_the_embedded_ones(tmp_path):
    ws = tmp_path / "ws"
    # The best match by keywords and by meaning.
    write(ws, "memory/lake.md", "# Lake\n\nThe heron nests at the boathouse. The heron fishes "
                                "near the boathouse every morning; staff log the weather, "
                                "tides and visitors.\n")
    write(ws, "memory/zoo.md", "# Zoo\n\nA heron statue stands at the zoo entrance among "
                               "lions, tigers, bears, penguins and giraffes.\n")
    index, embedder = open_scripted(tmp_path, ws)
    index.sync()
    embedder.finish("job1")
    index.sync()
    # A weaker keyword match whose vector is still owed.
    write(ws, "memory/shopping.md", "# Shopping\n\nmilk, eggs, bread, a heron figurine from "
                                    "the boathouse shop, butter, cheese, apples, tea, rice\n")
    index.sync()
    text = {r["path"]: r["score"] for r in
            index.search("heron boathouse", mode="text", min_score=0)["results"]}
    assert text["memory/lake.md"] > text["memory/shopping.md"] > text["memory/zoo.md"]
    hybrid = index.search("heron boathouse", min_score=0)
    assert paths(hybrid) == ["memory/lake.md", "memory/shopping.md", "memory/zoo.md"]
    scores = {r["path"]: r["score"] for r in hybrid["results"]}
    # Its vector score is estimated as the mean of the keyword hits that have one.
    vector = {r["path"]: r["score"] for r in
              index.search("heron boathouse", mode="vector", min_score=0)["results"]}
    guess = (vector["memory/lake.md"] + vector["memory/zoo.md"]) / 2
    mix = 0.7 * guess + 0.3 * text["memory/shopping.md"] / text["memory/lake.md"]
    # ... unless its keywords alone earn more (it holds every word of the query)
    assert scores["memory/shopping.md"] == pytest.approx(max(mix, keywords.alone(1.0)),
                                                         abs=1e-3)
