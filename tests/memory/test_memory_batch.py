"""Batch embedding jobs the index does not wait for (``remote.batch.wait: false``), through the
real OpenAI SDK and Gemini's REST wire format against a local fake server. The fake jobs
stay in progress until a test finishes them, so nothing here depends on timing."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import struct
from pathlib import Path

import pytest

from clawd.memory.base import normalise
from clawd.memory.chunker import Chunk
from clawd.memory.embeddings import create_embedder
from clawd.storage.files.memory import open_file_index

from fakeserver import FakeServer, Request, Response, openai_error
from memory_fakes import FakeEmbedder, settings, write

pytestmark = pytest.mark.slow  # batch jobs polled through a local server

WORD = re.compile(r"[a-z0-9]+")
GATEWAY = "# Infra\n\nThe gateway runs on the Mac Studio in the office.\n"
BIRDS = "# Birds\n\nThe heron nests by the lake behind the boathouse.\n"


def bow(text: str, dims: int = 64) -> list[float]:
    """Bag-of-words vector (unnormalised): shared words make vectors close."""
    vec = [0.0] * dims
    for word in WORD.findall(text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 2.0
    return vec


def b64(vector: list[float]) -> str:
    """An embedding as the API sends it with ``encoding_format: base64``."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def jsonl_requests(body: bytes) -> list[dict]:
    """The JSONL request lines inside a multipart upload."""
    text = body.decode()
    decoder = json.JSONDecoder()
    found = []
    for match in re.finditer(r'\{"custom_id"', text):
        item, _ = decoder.raw_decode(text, match.start())
        found.append(item)
    return found


class FakeOpenAIBatches:
    """The OpenAI Files + Batch API: jobs stay ``in_progress`` until ``complete``/``fail``."""

    def __init__(self, server: FakeServer, initial: str = "validating"):
        self.server = server
        self.initial = initial
        self.uploads: dict[str, list[dict]] = {}
        self.jobs: dict[str, dict] = {}
        self.polls: dict[str, int] = {}
        self.cancelled: list[str] = []
        server.default("POST", "/v1/files", self._upload)
        server.default("POST", "/v1/batches", self._create)
        server.default("POST", "/v1/embeddings", self._embeddings)

    def _upload(self, request: Request) -> Response:
        file_id = f"file-in-{len(self.uploads) + 1}"
        self.uploads[file_id] = jsonl_requests(request.body)
        return Response.json({"id": file_id, "object": "file", "bytes": len(request.body),
                              "created_at": 0, "filename": "embeddings.jsonl",
                              "purpose": "batch", "status": "processed"})

    def _object(self, job_id: str) -> dict:
        job = self.jobs[job_id]
        done = job["status"] in ("completed", "expired", "cancelled")
        return {"id": job_id, "object": "batch", "endpoint": "/v1/embeddings",
                "input_file_id": job["input"], "completion_window": "24h",
                "status": job["status"], "created_at": 0,
                "output_file_id": f"file-out-{job_id}" if done and job["output"] else None,
                "errors": {"object": "list", "data": [{"code": "bad", "message": job["error"]}]}
                if job["error"] else None}

    def _create(self, request: Request) -> Response:
        body = request.json()
        job_id = f"batch_{len(self.jobs) + 1}"
        self.jobs[job_id] = {"status": self.initial, "input": body["input_file_id"],
                             "output": None, "error": None}
        self.polls[job_id] = 0
        self.server.default("GET", f"/v1/batches/{job_id}", lambda r: self._retrieve(job_id))
        self.server.default("POST", f"/v1/batches/{job_id}/cancel",
                            lambda r: self._cancel(job_id))
        return Response.json(self._object(job_id))

    def _retrieve(self, job_id: str) -> Response:
        self.polls[job_id] += 1
        if self.jobs[job_id]["status"] == "validating":
            self.jobs[job_id]["status"] = "in_progress"
        return Response.json(self._object(job_id))

    def _cancel(self, job_id: str) -> Response:
        self.cancelled.append(job_id)
        self.jobs[job_id]["status"] = "cancelling"
        return Response.json(self._object(job_id))

    def _embeddings(self, request: Request) -> Response:
        body = request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return Response.json({"object": "list", "model": body["model"],
                              "data": [{"object": "embedding", "index": i, "embedding": bow(t)}
                                       for i, t in enumerate(inputs)],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    def texts(self, job_id: str) -> list[str]:
        return [t for r in self.uploads[self.jobs[job_id]["input"]] for t in r["body"]["input"]]

    def finish(self, job_id: str, status: str = "completed", error: str | None = None,
               output: bool = True) -> None:
        job = self.jobs[job_id]
        job.update(status=status, error=error)
        if not output:
            return
        lines = []
        for item in reversed(self.uploads[job["input"]]):  # the output file is unordered
            encode = b64 if item["body"].get("encoding_format") == "base64" else list
            data = [{"object": "embedding", "index": i, "embedding": encode(bow(t))}
                    for i, t in enumerate(item["body"]["input"])]
            lines.append(json.dumps({"id": "r", "custom_id": item["custom_id"], "error": None,
                                     "response": {"status_code": 200,
                                                  "body": {"object": "list", "data": data}}}))
        job["output"] = "\n".join(lines)
        self.server.default("GET", f"/v1/files/file-out-{job_id}/content",
                            lambda r: Response(200, job["output"].encode(),
                                               {"content-type": "application/octet-stream"}))

    def document_embeddings(self) -> list[list[str]]:
        """Chunks sent to the synchronous endpoint (queries are one line, chunks are not)."""
        out = []
        for r in self.server.requests:
            if r.path == "/v1/embeddings":
                inputs = r.json()["input"]
                inputs = inputs if isinstance(inputs, list) else [inputs]
                if any("\n" in t for t in inputs):
                    out.append(inputs)
        return out


@pytest.fixture
def server():
    with FakeServer() as srv:
        yield srv


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "MEMORY.md", GATEWAY)
    return root


def openai_memory(server: FakeServer, **batch):
    return settings(provider="openai", fallback="none", sync={"watch": False},
                    remote={"baseUrl": f"{server.url}/v1", "apiKey": "sk-test",
                            "batch": {"wait": False, "pollIntervalMs": 10, **batch}})


def open_openai(server, ws, tmp_path, **batch):
    memory = openai_memory(server, **batch)
    embedder = create_embedder("openai", memory, env={})
    embedder.batch_min_texts = 1  # every backfill goes through a batch job
    return open_file_index("main", ws, memory, tmp_path / "state", embedder=embedder, env={})


def paths(result) -> list[str]:
    return [r["path"] for r in result["results"]]


def test_wait_false_submits_returns_and_later_syncs_collect(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    first = index.sync()
    assert api.jobs.keys() == {"batch_1"} and api.polls["batch_1"] == 0  # not waited for
    assert (first["submitted"], first["embedded"]) == (1, 0)
    assert (first["pendingBatches"], first["pendingEmbeddings"]) == (1, 1)
    created = next(r for r in server.requests if r.path == "/v1/batches").json()
    assert created["endpoint"] == "/v1/embeddings" and created["completion_window"] == "24h"
    # Vectors come back as base64 (a quarter of the size of JSON floats).
    assert [r["body"]["encoding_format"] for r in api.uploads["file-in-1"]] == ["base64"]

    api.finish("batch_1")
    write(ws, "memory/birds.md", BIRDS)
    second = index.sync()
    assert api.polls["batch_1"] == 1  # polled once, then a new job for the new note
    assert second["collected"] == 1 and second["submitted"] == 1
    assert second["pendingBatches"] == 1 and set(api.jobs) == {"batch_1", "batch_2"}
    assert any("heron" in t for t in api.texts("batch_2"))
    assert api.polls["batch_2"] == 0

    status = index.status()
    assert (status["chunks"], status["embeddedChunks"]) == (2, 1)
    assert (status["pendingBatches"], status["pendingEmbeddings"]) == (1, 1)
    assert status["fullyEmbedded"] is False
    # The new note is found by its words at once, but has no vector yet.
    assert paths(index.search("heron boathouse", mode="text")) == ["memory/birds.md"]
    hybrid = index.search("heron boathouse")
    assert hybrid["mode"] == "hybrid" and paths(hybrid)[0] == "memory/birds.md"
    assert "memory/birds.md" not in paths(index.search("heron boathouse", mode="vector",
                                                       min_score=0))
    assert paths(index.search("gateway studio", mode="vector"))[0] == "MEMORY.md"
    assert api.document_embeddings() == []  # nothing went through the synchronous endpoint
    index.close()

    # The pending job survives a restart; the next sync collects it.
    reopened = open_openai(server, ws, tmp_path)
    assert reopened.status()["pendingBatches"] == 1
    assert reopened.sync()["collected"] == 0  # still running
    assert "memory/birds.md" not in paths(reopened.search("heron boathouse", mode="vector",
                                                          min_score=0))
    api.finish("batch_2")
    third = reopened.sync()
    assert third["collected"] == 1 and third["pendingBatches"] == 0 and third["indexed"] == 0
    status = reopened.status()
    assert status["embeddedChunks"] == 2 and status["fullyEmbedded"] is True
    assert status["pendingBatches"] == 0 and status["pendingEmbeddings"] == 0
    assert paths(reopened.search("heron boathouse", mode="vector"))[0] == "memory/birds.md"
    assert len(api.jobs) == 2 and api.document_embeddings() == []
    # With nothing pending a sync asks the provider nothing.
    before = len(server.requests)
    reopened.sync()
    assert len(server.requests) == before
    reopened.close()


def test_vectors_from_a_batch_equal_the_synchronous_ones(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    api.finish("batch_1")
    index.sync()
    blob = index.store.all_vectors()[0][1]
    direct = create_embedder("openai", openai_memory(server, enabled=False), env={})
    expected = direct.embed_documents(api.texts("batch_1"))[0]
    import numpy as np

    assert np.frombuffer(blob, dtype=np.float32) == pytest.approx(expected, abs=1e-6)
    index.close()


def test_failed_job_is_resubmitted_once_then_embedded_synchronously(server, ws, tmp_path,
                                                                     caplog):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    api.finish("batch_1", "failed", error="model not available for batch", output=False)
    with caplog.at_level(logging.WARNING, logger="clawd.memory.batches"):
        result = index.sync()
    assert "batch_1 ended failed: model not available for batch" in caplog.text
    assert "dropped" in caplog.text
    assert result["submitted"] == 1 and result["pendingBatches"] == 1
    assert api.texts("batch_2") == api.texts("batch_1")
    assert index.status()["embeddedChunks"] == 0

    api.finish("batch_2", "expired", output=False)
    result = index.sync()
    assert result["pendingBatches"] == 0 and result["embedded"] == 1
    assert len(api.jobs) == 2  # no third job: the synchronous endpoint took over
    assert api.document_embeddings() == [api.texts("batch_1")]
    assert index.status()["fullyEmbedded"] is True
    assert paths(index.search("gateway studio", mode="vector"))[0] == "MEMORY.md"
    index.close()


def test_expired_job_keeps_its_finished_part(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    api.finish("batch_1", "expired")  # expired, but its one request had finished
    result = index.sync()
    assert result["collected"] == 1 and result["pendingBatches"] == 0
    assert len(api.jobs) == 1 and index.status()["fullyEmbedded"] is True
    index.close()


def age_jobs(index, seconds: float) -> None:
    """Make the recorded jobs look ``seconds`` older."""
    with index.store.lock:
        index.store.conn.execute(
            "UPDATE embedding_batches SET submitted_at = submitted_at - ?", (seconds,))


def test_job_past_its_timeout_is_cancelled_then_collected_once_it_ends(server, ws, tmp_path,
                                                                        caplog):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path, timeoutMinutes=30)
    index.sync()
    age_jobs(index, 31 * 60)
    index.sync()
    # A job not waited for gets at least OpenAI's 24-hour completion window.
    assert api.cancelled == [] and len(api.jobs) == 1
    age_jobs(index, 24 * 3600)
    with caplog.at_level(logging.WARNING, logger="clawd.memory.batches"):
        result = index.sync()
    assert api.cancelled == ["batch_1"] and "cancelled" in caplog.text
    # Kept until the provider reports it ended: nothing is submitted twice meanwhile.
    assert result["submitted"] == 0 and result["pendingBatches"] == 1
    result = index.sync()  # still "cancelling": not cancelled again
    assert api.cancelled == ["batch_1"] and result["pendingBatches"] == 1
    api.finish("batch_1", "cancelled")  # its one request had finished before the cancel
    result = index.sync()
    assert result["collected"] == 1 and result["submitted"] == 0
    assert len(api.jobs) == 1 and index.status()["fullyEmbedded"] is True
    index.close()


def test_cancelled_job_without_output_is_resubmitted(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    age_jobs(index, 24.5 * 3600)
    index.sync()
    assert api.cancelled == ["batch_1"]
    api.finish("batch_1", "cancelled", output=False)
    result = index.sync()
    assert result["submitted"] == 1 and set(api.jobs) == {"batch_1", "batch_2"}
    assert api.texts("batch_2") == api.texts("batch_1")
    index.close()


def test_job_still_running_long_after_its_cancel_is_given_up(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    age_jobs(index, 24 * 3600 + 60)
    index.sync()
    assert api.cancelled == ["batch_1"] and len(api.jobs) == 1
    age_jobs(index, 3600)  # an hour later the provider still says "cancelling"
    result = index.sync()
    assert result["submitted"] == 1 and set(api.jobs) == {"batch_1", "batch_2"}
    index.close()


def test_job_refused_at_submission_is_embedded_synchronously(server, ws, tmp_path):
    api = FakeOpenAIBatches(server, initial="failed")
    index = open_openai(server, ws, tmp_path)
    result = index.sync()
    assert result["pendingBatches"] == 0 and result["embedded"] == 1
    assert len(api.document_embeddings()) == 1
    assert index.status()["fullyEmbedded"] is True
    index.close()


def test_search_polls_pending_jobs_after_poll_interval(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path, pollIntervalMs=3_600_000)
    index.sync()
    api.finish("batch_1")
    result = index.search("gateway studio", mode="vector")  # polled too recently
    assert api.polls["batch_1"] == 0 and paths(result) == []
    index._polled_at -= 3601
    index.search("gateway studio", mode="vector")  # polls in the background
    assert index.wait_synced(10) and api.polls["batch_1"] == 1
    assert paths(index.search("gateway studio", mode="vector")) == ["MEMORY.md"]
    index.close()


def test_provider_change_drops_pending_jobs(server, ws, tmp_path):
    FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    assert index.status()["pendingBatches"] == 1
    index.close()
    other = open_file_index("main", ws, openai_memory(server), tmp_path / "state",
                            embedder=FakeEmbedder(), env={})
    result = other.sync()
    assert result["rebuilt"] and result["pendingBatches"] == 0
    status = other.status()
    assert status["pendingBatches"] == 0 and status["fullyEmbedded"] is True
    other.close()


def test_force_rebuild_keeps_jobs_of_the_same_embedder(server, ws, tmp_path):
    api = FakeOpenAIBatches(server)
    index = open_openai(server, ws, tmp_path)
    index.sync()
    forced = index.sync(force=True)
    assert forced["rebuilt"] and forced["pendingBatches"] == 1 and forced["submitted"] == 0
    api.finish("batch_1")
    assert index.sync()["collected"] == 1 and index.status()["fullyEmbedded"] is True
    index.close()


def test_wait_true_sends_a_whole_backfill_as_one_job(server, tmp_path):
    api = FakeOpenAIBatches(server, initial="completed")
    root = tmp_path / "ws"
    for i in range(260):  # more chunks than one embedding step
        write(root, f"memory/note-{i:03}.md", f"# Note {i}\n\nitem number {i} here\n")
    memory = settings(provider="openai", fallback="none", sync={"watch": False},
                      remote={"baseUrl": f"{server.url}/v1", "apiKey": "sk-test",
                              "batch": {"pollIntervalMs": 10}})
    embedder = create_embedder("openai", memory, env={})
    embedder.batch_min_texts = 1

    original = api._create

    def create_and_finish(request: Request) -> Response:
        response = original(request)
        api.finish(f"batch_{len(api.jobs)}")
        return response

    server.default("POST", "/v1/batches", create_and_finish)
    index = open_file_index("main", root, memory, tmp_path / "state", embedder=embedder, env={})
    result = index.sync()
    assert len(api.jobs) == 1 and len(api.texts("batch_1")) == 260
    assert result["embedded"] == 260 and result["pendingBatches"] == 0
    assert index.status()["embeddedChunks"] == 260
    index.close()


def assert_vectors_match_chunks(index) -> None:
    """Every chunk holds the (normalised) vector of its own text."""
    import numpy as np

    rows = index.store.conn.execute("SELECT heading, text, embedding FROM chunks").fetchall()
    assert rows
    for heading, text, blob in rows:
        assert blob is not None, text
        want = normalise([bow(Chunk(0, 0, text, heading).context_text())])[0]
        assert np.frombuffer(blob, dtype=np.float32) == pytest.approx(want, abs=1e-5), text


def test_openai_jobs_stay_within_the_batch_api_limits(server, tmp_path):
    api = FakeOpenAIBatches(server)
    memory = openai_memory(server, concurrency=2)
    embedder = create_embedder("openai", memory, env={})
    # The Batch API takes at most 50,000 embedding inputs and 200 MB per input file.
    assert embedder.batch_job_texts <= 50_000
    assert embedder.batch_job_bytes <= 100_000_000
    root = tmp_path / "ws"
    for i in range(12):
        write(root, f"memory/n{i:02}.md", f"# N{i}\n\n" + f"alpha{i} beta{i * 7} " * 100 + "\n")
    embedder.batch_min_texts = 1
    embedder.batch_job_bytes = 6000  # room for two or three of these chunks per upload
    index = open_file_index("main", root, memory, tmp_path / "state", embedder=embedder, env={})
    index.sync()
    assert len(api.jobs) >= 4
    for requests in api.uploads.values():
        assert sum(len(json.dumps(r)) + 1 for r in requests) <= 6000
    assert sorted(t for job in api.jobs for t in api.texts(job)) == sorted(
        Chunk(0, 0, text, heading).context_text() for heading, text in
        index.store.conn.execute("SELECT heading, text FROM chunks"))
    for job in list(api.jobs):
        api.finish(job)  # base64 vectors, each output file in reverse order
    index.sync()
    assert index.status()["fullyEmbedded"] is True
    assert_vectors_match_chunks(index)
    index.close()


def test_wait_false_upload_error_leaves_its_texts_to_the_next_sync(server, ws, tmp_path,
                                                                   caplog):
    api = FakeOpenAIBatches(server)
    write(ws, "memory/birds.md", BIRDS)
    memory = openai_memory(server, concurrency=1)
    embedder = create_embedder("openai", memory, env={})
    embedder.batch_min_texts = 1
    embedder.batch_job_texts = 1  # one job per chunk
    fallback = FakeEmbedder()
    index = open_file_index("main", ws, memory, tmp_path / "state", embedder=embedder,
                            fallback=fallback, env={})
    server.queue("POST", "/v1/files", lambda r: openai_error(400, "upload refused"))
    with caplog.at_level(logging.WARNING):
        result = index.sync()
    # The accepted job is recorded; the other chunk waits for the next sync. No failover.
    assert result["provider"] == "openai"
    assert (result["submitted"], result["pendingBatches"]) == (1, 1)
    assert fallback.calls == [] and index.status()["fallback"] is None
    assert caplog.text.count("could not be submitted (") == 1 and "upload refused" in caplog.text
    [accepted] = api.texts("batch_1")
    other = next(c for c in (GATEWAY, BIRDS) if c.strip().split("\n")[-1] not in accepted)

    server.queue("POST", "/v1/files", lambda r: openai_error(400, "upload refused"))
    result = index.sync()  # submitted again, refused again
    assert result["submitted"] == 0 and result["pendingBatches"] == 1
    result = index.sync()  # a third time: through the synchronous endpoint
    assert result["embedded"] == 1 and len(api.jobs) == 1
    assert [other.strip().split("\n")[-1] in t for [t] in api.document_embeddings()] == [True]
    api.finish("batch_1")
    index.sync()
    assert index.status()["fullyEmbedded"] is True
    assert_vectors_match_chunks(index)
    index.close()


def test_wait_true_keeps_each_job_that_completed_when_a_later_one_fails(server, tmp_path):
    api = FakeOpenAIBatches(server, initial="completed")
    root = tmp_path / "ws"
    for i in range(300):
        write(root, f"memory/note-{i:03}.md", f"# Note {i}\n\nitem number {i} here\n")
    memory = settings(provider="openai", fallback="none", sync={"watch": False},
                      remote={"baseUrl": f"{server.url}/v1", "apiKey": "sk-test",
                              "batch": {"pollIntervalMs": 10, "concurrency": 1}})

    def open_backfill():
        embedder = create_embedder("openai", memory, env={})
        embedder.batch_min_texts = 1
        embedder.batch_job_texts = 100  # three jobs
        return open_file_index("main", root, memory, tmp_path / "state", embedder=embedder,
                               env={})

    original = api._create

    def create_and_finish(request: Request) -> Response:
        response = original(request)
        n = len(api.jobs)
        if n == 3:
            api.finish(f"batch_{n}", "failed", error="boom", output=False)
        else:
            api.finish(f"batch_{n}")
        return response

    server.default("POST", "/v1/batches", create_and_finish)
    seen: list[int] = []
    index = open_backfill()
    index.sync(progress=lambda done, total: seen.append(done))
    assert len(api.jobs) == 3
    assert seen == [0, 100, 200, 300]  # progress per job
    status = index.status()
    assert status["embeddedChunks"] == 0 and status["cacheEntries"] == 200
    index.close()
    # The next run resumes from the cache: only the third job's texts go out again.
    index = open_backfill()
    result = index.sync()
    assert len(api.jobs) == 4 and api.texts("batch_4") == api.texts("batch_3")
    assert (result["cached"], result["embedded"]) == (200, 100)
    assert index.status()["fullyEmbedded"] is True
    index.close()


# --- Gemini -------------------------------------------------------------------------------

GEMINI = "/v1beta/models/gemini-embedding-001"


class FakeGeminiBatches:
    """Gemini's async batch endpoint: jobs stay RUNNING until ``finish``."""

    def __init__(self, server: FakeServer):
        self.server = server
        self.jobs: dict[str, dict] = {}
        server.default("POST", f"{GEMINI}:asyncBatchEmbedContent", self._create)
        server.default("POST", f"{GEMINI}:embedContent", lambda r: Response.json(
            {"embedding": {"values": bow(r.json()["content"]["parts"][0]["text"])}}))
        server.default("POST", f"{GEMINI}:batchEmbedContents", lambda r: Response.json(
            {"embeddings": [{"values": bow(q["content"]["parts"][0]["text"])}
                            for q in r.json()["requests"]]}))

    def _create(self, request: Request) -> Response:
        name = f"batches/g{len(self.jobs) + 1}"
        requests = request.json()["batch"]["inputConfig"]["requests"]["requests"]
        self.jobs[name] = {"state": "BATCH_STATE_PENDING", "requests": requests, "polls": 0}
        self.server.default("GET", f"/v1beta/{name}", lambda r: self._get(name))
        return Response.json({"name": name, "metadata": {"state": "BATCH_STATE_PENDING"}})

    def _get(self, name: str) -> Response:
        job = self.jobs[name]
        job["polls"] += 1
        if job["state"] == "BATCH_STATE_PENDING":
            job["state"] = "BATCH_STATE_RUNNING"
        body: dict = {"name": name, "metadata": {"state": job["state"]}}
        if job["state"] == "BATCH_STATE_SUCCEEDED":
            body["done"] = True
            body["response"] = {"inlinedResponses": {"inlinedResponses": [
                {"metadata": r["metadata"], "response": {"embedding": {
                    "values": bow(r["request"]["content"]["parts"][0]["text"])}}}
                for r in reversed(job["requests"])]}}
        elif job["state"] == "BATCH_STATE_FAILED":
            body["done"] = True
            body["error"] = {"code": 3, "message": "invalid"}
        return Response.json(body)

    def texts(self, name: str) -> list[str]:
        return [r["request"]["content"]["parts"][0]["text"] for r in self.jobs[name]["requests"]]


def test_gemini_wait_false(server, ws, tmp_path, caplog):
    api = FakeGeminiBatches(server)
    memory = settings(provider="gemini", fallback="none", sync={"watch": False},
                      remote={"baseUrl": f"{server.url}/v1beta", "apiKey": "g-key",
                              "batch": {"wait": False}})
    embedder = create_embedder("gemini", memory, env={})
    embedder.batch_min_texts = 1
    write(ws, "memory/birds.md", BIRDS)
    index = open_file_index("main", ws, memory, tmp_path / "state", embedder=embedder, env={})
    result = index.sync()
    assert result["submitted"] == 2 and result["pendingBatches"] == 1
    assert list(api.jobs) == ["batches/g1"] and api.jobs["batches/g1"]["polls"] == 0
    assert paths(index.search("heron boathouse", mode="text")) == ["memory/birds.md"]
    assert index.status()["pendingEmbeddings"] == 2

    api.jobs["batches/g1"]["state"] = "BATCH_STATE_FAILED"
    with caplog.at_level(logging.WARNING, logger="clawd.memory.batches"):
        result = index.sync()
    assert "batches/g1 ended BATCH_STATE_FAILED" in caplog.text
    assert list(api.jobs) == ["batches/g1", "batches/g2"] and result["pendingBatches"] == 1
    assert sorted(api.texts("batches/g2")) == sorted(api.texts("batches/g1"))

    api.jobs["batches/g2"]["state"] = "BATCH_STATE_SUCCEEDED"
    result = index.sync()
    assert result["collected"] == 2 and result["pendingBatches"] == 0
    assert index.status()["fullyEmbedded"] is True
    assert paths(index.search("heron boathouse", mode="vector", min_score=0))[0] == \
        "memory/birds.md"
    assert not any(r.path.endswith(":batchEmbedContents") for r in server.requests)
    index.close()


def test_an_index_from_before_batch_jobs_is_migrated(tmp_path):
    import apsw

    from clawd.memory.schema import MIGRATIONS
    from clawd.memory.store import Store

    path = tmp_path / "old.sqlite"
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute(MIGRATIONS[0])
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO meta(key, value) VALUES ('chunking', 'x')")
    conn.close()
    store = Store(path, vector_enabled=False)
    assert store.conn.execute("PRAGMA user_version").fetchall()[0][0] == len(MIGRATIONS)
    assert store.get_meta("chunking") == "x" and store.batch_counts() == (0, 0)
    store.add_batch_job("openai", "m", "fp", "batch_9", ["h1", "h2"], 1, 100.0)
    assert store.batch_counts() == (1, 2)
    [job] = store.batch_jobs("openai", "m", "fp")
    assert (job.job, job.hashes, job.attempt, job.submitted_at) == ("batch_9", ["h1", "h2"], 1,
                                                                   100.0)
    assert store.drop_batch_jobs_except("gemini", "m", "fp") == 1
    assert store.batch_counts() == (0, 0)
    store.close()
