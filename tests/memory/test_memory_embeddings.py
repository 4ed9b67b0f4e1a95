"""Remote embedding providers over their real wire formats (127.0.0.1 only), and the
choice of provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawd.memory.embeddings import EmbeddingError, create_embedder, resolve_provider
from clawd.memory.gemini import GeminiEmbedder
from clawd.memory.openai_embed import OpenAIEmbedder
from clawd.storage.files.memory import open_file_index

from fakeserver import FakeServer, Request, Response
from memory_fakes import FakeEmbedder, settings, write


def vector_for(text: str, dims: int = 8) -> list[float]:
    """A deterministic unnormalised vector: the client must normalise it."""
    base = [float((ord(c) % 7) + 1) for c in (text * dims)[:dims]]
    return [x * 3 for x in base]


def openai_embeddings(request: Request) -> Response:
    body = request.json()
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return Response.json({"object": "list", "model": body["model"],
                          "data": [{"object": "embedding", "index": i,
                                    "embedding": vector_for(t)} for i, t in enumerate(inputs)],
                          "usage": {"prompt_tokens": 1, "total_tokens": 1}})


@pytest.fixture
def server():
    with FakeServer() as srv:
        yield srv


def openai_settings(server, **extra):
    return settings(provider="openai", remote={"baseUrl": f"{server.url}/v1",
                                               "apiKey": "sk-test", **extra})


def test_openai_embeddings_through_the_sdk(server):
    server.default("POST", "/v1/embeddings", openai_embeddings)
    embedder = create_embedder("openai", openai_settings(
        server, headers={"X-Team": "memory"}, batch={"enabled": False}), env={})
    assert isinstance(embedder, OpenAIEmbedder)
    vectors = embedder.embed_documents(["alpha", "beta"])
    query = embedder.embed_query("alpha")
    assert embedder.dims == 8 and len(vectors) == 2
    assert abs(sum(x * x for x in query) - 1) < 1e-5
    assert list(query) == pytest.approx(list(vectors[0]))
    first = server.requests[0]
    assert first.path == "/v1/embeddings"
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.headers["x-team"] == "memory"
    assert first.json()["model"] == "text-embedding-3-small"
    assert first.json()["input"] == ["alpha", "beta"]


def test_openai_errors_become_embedding_errors(server):
    server.default("POST", "/v1/embeddings",
                   lambda r: Response.json({"error": {"message": "bad key"}}, 401))
    embedder = create_embedder("openai", openai_settings(server), env={})
    with pytest.raises(EmbeddingError, match="openai embeddings failed"):
        embedder.embed_query("x")


def test_openai_batch_api_with_polling(server):
    uploads: list[bytes] = []
    polls = {"n": 0}

    def upload(request: Request) -> Response:
        uploads.append(request.body)
        return Response.json({"id": "file-in", "object": "file", "bytes": 1, "created_at": 0,
                              "filename": "embeddings.jsonl", "purpose": "batch",
                              "status": "processed"})

    def batch_object(status: str) -> dict:
        return {"id": "batch_1", "object": "batch", "endpoint": "/v1/embeddings",
                "input_file_id": "file-in", "completion_window": "24h", "status": status,
                "created_at": 0, "output_file_id": "file-out" if status == "completed" else None}

    def poll(request: Request) -> Response:
        polls["n"] += 1
        return Response.json(batch_object("completed" if polls["n"] >= 2 else "in_progress"))

    def content(request: Request) -> Response:
        text = uploads[0].decode()
        start = text.index('{"custom_id"')
        lines = []
        for line in text[start:].split("\n"):
            if not line.startswith('{"custom_id"'):
                continue
            item = json.loads(line.strip().split("\r")[0])
            data = [{"object": "embedding", "index": i, "embedding": vector_for(t)}
                    for i, t in enumerate(item["body"]["input"])]
            lines.append(json.dumps({"id": "r", "custom_id": item["custom_id"], "error": None,
                                     "response": {"status_code": 200,
                                                  "body": {"data": data}}}))
        return Response(200, "\n".join(reversed(lines)).encode(),
                        {"content-type": "application/octet-stream"})

    server.default("POST", "/v1/files", upload)
    server.default("POST", "/v1/batches", lambda r: Response.json(batch_object("validating")))
    server.default("GET", "/v1/batches/batch_1", poll)
    server.default("GET", "/v1/files/file-out/content", content)
    embedder = create_embedder("openai", openai_settings(
        server, batch={"pollIntervalMs": 10, "concurrency": 2}), env={})
    embedder.batch_min_texts = 2
    texts = [f"text number {i}" for i in range(300)]  # three requests of up to 128 inputs
    vectors = embedder.embed_documents(texts)
    assert len(vectors) == 300 and polls["n"] >= 2
    expected = create_embedder("openai", openai_settings(server, batch={"enabled": False}),
                               env={})
    server.default("POST", "/v1/embeddings", openai_embeddings)
    assert list(vectors[299]) == pytest.approx(list(expected.embed_query("text number 299")))
    created = next(r for r in server.requests if r.path == "/v1/batches").json()
    assert created["endpoint"] == "/v1/embeddings" and created["input_file_id"] == "file-in"


def test_openai_batch_failure_and_timeout(server):
    def failed(r):
        return Response.json({"id": "b", "object": "batch", "endpoint": "/v1/embeddings",
                              "input_file_id": "f", "completion_window": "24h",
                              "status": "failed", "created_at": 0})

    server.default("POST", "/v1/files", lambda r: Response.json(
        {"id": "f", "object": "file", "bytes": 1, "created_at": 0, "filename": "x",
         "purpose": "batch", "status": "processed"}))
    server.default("POST", "/v1/batches", failed)
    embedder = create_embedder("openai", openai_settings(server), env={})
    embedder.batch_min_texts = 1
    with pytest.raises(EmbeddingError, match="ended failed"):
        embedder.embed_documents(["a"])


def test_openai_failure_falls_back_in_the_index(server, tmp_path: Path):
    server.default("POST", "/v1/embeddings",
                   lambda r: Response.json({"error": {"message": "quota"}}, 403))
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# M\n\nthe heron nests by the lake\n")
    memory = settings(provider="openai", fallback="local", sync={"watch": False},
                      remote={"baseUrl": f"{server.url}/v1", "apiKey": "sk"})
    index = open_file_index("main", ws, memory, tmp_path / "state", fallback=FakeEmbedder(), env={})
    result = index.search("heron lake")
    assert result["results"][0]["path"] == "MEMORY.md"
    assert result["fallback"]["from"] == "openai" and "quota" in result["fallback"]["reason"]
    assert result["provider"] == "fake"
    index.close()


def gemini_vectors(request: Request) -> Response:
    body = request.json()
    return Response.json({"embeddings": [{"values": vector_for(r["content"]["parts"][0]["text"])}
                                         for r in body["requests"]]})


def test_gemini_sync_endpoints(server):
    server.default("POST", "/v1beta/models/gemini-embedding-001:batchEmbedContents",
                   gemini_vectors)
    server.default("POST", "/v1beta/models/gemini-embedding-001:embedContent",
                   lambda r: Response.json({"embedding": {"values": vector_for(
                       r.json()["content"]["parts"][0]["text"])}}))
    memory = settings(provider="gemini", remote={"baseUrl": f"{server.url}/v1beta",
                                                 "headers": {"X-Proxy": "1"}})
    embedder = create_embedder("gemini", memory, env={"GEMINI_API_KEY": "g-key"})
    assert isinstance(embedder, GeminiEmbedder)
    docs = embedder.embed_documents(["one", "two"])
    query = embedder.embed_query("one")
    assert list(query) == pytest.approx(list(docs[0])) and embedder.dims == 8
    first = server.requests[0]
    assert first.headers["x-goog-api-key"] == "g-key" and first.headers["x-proxy"] == "1"
    assert first.json()["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    assert server.requests[1].json()["taskType"] == "RETRIEVAL_QUERY"


def test_gemini_async_batch(server):
    state = {"polls": 0, "requests": []}

    def create(request: Request) -> Response:
        state["requests"] = request.json()["batch"]["inputConfig"]["requests"]["requests"]
        return Response.json({"name": "batches/b1", "metadata": {"state": "BATCH_STATE_PENDING"}})

    def poll(request: Request) -> Response:
        state["polls"] += 1
        if state["polls"] < 2:
            return Response.json({"name": "batches/b1",
                                  "metadata": {"state": "BATCH_STATE_RUNNING"}})
        responses = [{"metadata": r["metadata"], "response": {"embedding": {
            "values": vector_for(r["request"]["content"]["parts"][0]["text"])}}}
            for r in reversed(state["requests"])]
        return Response.json({"name": "batches/b1", "done": True,
                              "metadata": {"state": "BATCH_STATE_SUCCEEDED"},
                              "response": {"inlinedResponses": {"inlinedResponses": responses}}})

    server.default("POST", "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent", create)
    server.default("GET", "/v1beta/batches/b1", poll)
    memory = settings(provider="gemini", remote={"baseUrl": f"{server.url}/v1beta",
                                                 "apiKey": "k",
                                                 "batch": {"pollIntervalMs": 10}})
    embedder = create_embedder("gemini", memory, env={})
    embedder.batch_min_texts = 2
    vectors = embedder.embed_documents(["first", "second", "third"])
    sync_embedder = create_embedder("gemini", settings(
        provider="gemini", remote={"baseUrl": f"{server.url}/v1beta", "apiKey": "k",
                                   "batch": {"enabled": False}}), env={})
    server.default("POST", "/v1beta/models/gemini-embedding-001:batchEmbedContents",
                   gemini_vectors)
    assert [list(v) for v in vectors] == [pytest.approx(list(v)) for v in
                                          sync_embedder.embed_documents(["first", "second",
                                                                         "third"])]
    assert state["polls"] == 2


def test_gemini_http_error(server):
    server.default("POST", "/v1beta/models/gemini-embedding-001:embedContent",
                   lambda r: Response.json({"error": {"message": "denied"}}, 403))
    embedder = create_embedder("gemini", settings(remote={"baseUrl": f"{server.url}/v1beta"}),
                               env={"GEMINI_API_KEY": "k"})
    with pytest.raises(EmbeddingError, match="HTTP 403"):
        embedder.embed_query("x")


@pytest.mark.parametrize("provider,env,remote_key,expected", [
    ("auto", {}, None, "local"),
    # a chat key in the environment never moves embeddings off the machine
    ("auto", {"OPENAI_API_KEY": "sk"}, None, "local"),
    ("auto", {"GEMINI_API_KEY": "g"}, None, "local"),
    ("auto", {"OPENAI_API_KEY": "sk", "GEMINI_API_KEY": "g"}, None, "local"),
    ("auto", {}, "sk-remote", "openai"),  # the memory config itself names a remote key
    ("openai", {"OPENAI_API_KEY": "sk"}, None, "openai"),
    ("local", {"OPENAI_API_KEY": "sk"}, None, "local"),
    ("gemini", {}, None, "gemini"),
])
def test_resolve_provider(provider, env, remote_key, expected):
    memory = settings(provider=provider, remote={"apiKey": remote_key} if remote_key else {})
    assert resolve_provider(memory, env) == expected


def test_missing_keys_and_unknown_models_say_what_to_set():
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        create_embedder("openai", settings(), env={})
    with pytest.raises(EmbeddingError, match="GEMINI_API_KEY"):
        create_embedder("gemini", settings(), env={})
    with pytest.raises(EmbeddingError, match="unknown local embedding model"):
        create_embedder("local", settings(model="nope"), env={})


def test_fingerprint_tracks_endpoint_not_key(server):
    a = create_embedder("openai", openai_settings(server), env={})
    b = create_embedder("openai", settings(provider="openai", remote={
        "baseUrl": f"{server.url}/v1", "apiKey": "another-key"}), env={})
    c = create_embedder("openai", settings(provider="openai", remote={
        "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "sk-test"}), env={})
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert "sk-test" not in a.fingerprint
