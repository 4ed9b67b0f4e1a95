"""The memory index end to end with a deterministic embedder: sync, cache, rebuilds,
fallbacks, sources and the result shape."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from pathlib import Path

import apsw
import pytest

from clawd.memory import matrix as matrix_module
from clawd.memory import schema as schema_module
from clawd.memory import vectors
from clawd.memory.index import store_path
from clawd.memory.schema import MIGRATIONS
from clawd.storage.files.memory import open_file_index

from memory_fakes import BrokenEmbedder, FakeEmbedder, settings, write

GATEWAY = "# Infra\n\nThe gateway runs on the Mac Studio in the office.\n"
IDS = "# 2025-01-02\n\n- Fixed bug a828e60 in the loader\n- OPENAI_API_KEY lives in 1Password\n"
LUNCH = "# 2025-01-03\n\n- Lunch with Sam about the roadmap and hiring\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "MEMORY.md", GATEWAY)
    write(root, "memory/2025-01-02.md", IDS)
    write(root, "memory/2025-01-03.md", LUNCH)
    return root


def make(ws: Path, tmp_path: Path, embedder=None, backup=None, **overrides):
    """An index with a fake embedder; no real model is ever loaded (fallback "none")."""
    overrides.setdefault("sync", {"watch": False})
    overrides.setdefault("fallback", "none")
    return open_file_index("main", ws, settings(**overrides), tmp_path / "state",
                           embedder=embedder if embedder is not None else FakeEmbedder(),
                           fallback=backup, env={})


def paths(result) -> list[str]:
    return [r["path"] for r in result["results"]]


def test_sync_then_search_returns_the_spec_shape(ws, tmp_path):
    index = make(ws, tmp_path)
    summary = index.sync()
    assert summary["files"] == 3 and summary["indexed"] == 3 and summary["chunks"] == 3
    result = index.search("a828e60")
    assert set(result) >= {"results", "provider", "model", "fallback"}
    assert (result["provider"], result["model"], result["fallback"]) == ("fake", "bow-256", None)
    assert result["mode"] == "hybrid"
    top = result["results"][0]
    assert set(top) == {"path", "startLine", "endLine", "score", "snippet", "source",
                        "citation"}
    assert top["citation"] == f"{top['path']}#L{top['startLine']}-L{top['endLine']}"
    assert (top["path"], top["startLine"], top["endLine"]) == ("memory/2025-01-02.md", 1, 4)
    assert top["source"] == "memory" and "a828e60" in top["snippet"]
    assert 0 <= top["score"] <= 1
    index.close()


def test_the_templates_own_lines_are_no_memory(tmp_path):
    """A fresh MEMORY.md's "- (preferences, habits, how they like to work)" matched a question
    about preferences at 0.36; the template as laid down is not indexed, what you add is."""
    from clawd.workspace.init import template_files

    template = dict(template_files())
    root = tmp_path / "ws"
    write(root, "MEMORY.md", template["MEMORY.md"].read_text())
    daily = template["templates/daily.md"].read_text().replace("# YYYY-MM-DD", "# 2026-11-20", 1)
    write(root, "memory/2026-11-20.md", daily)
    index = make(root, tmp_path)
    index.sync()
    query = "preferences habits how they like to work decisions where to pick up"
    assert index.search(query, min_score=0.0)["results"] == []
    write(root, "MEMORY.md", template["MEMORY.md"].read_text().replace(
        "- (preferences, habits, how they like to work)", "- Prefers tabs over spaces"))
    write(root, "memory/2026-11-20.md", daily + "- 09:10 — the deploy moved to Thursdays\n")
    index.sync()
    assert {r["path"] for r in index.search("tabs deploy Thursdays", min_score=0.0)[
        "results"]} == {"MEMORY.md", "memory/2026-11-20.md"}
    index.close()


def test_values_consolidation_replaced_are_not_found(tmp_path):
    """The stand-in of scripts/bench_memory_weeks.py answered a stale date: the first
    result was MEMORY.md's ## Replaced section, which keeps older values as a record."""
    root = tmp_path / "ws"
    write(root, "MEMORY.md", "# Memory\n\n## Facts and references\n\n- Recital on 2026-04-18\n"
                             "\n## Replaced\n\n- Recital on 2026-03-21 — replaced on "
                             "2026-03-10 by: Recital on 2026-04-18\n\n## Lessons\n\n"
                             "- Book the recital hall early\n")
    index = make(root, tmp_path)
    index.sync()
    found = index.search("recital 2026-03-21 hall", min_score=0.0)["results"]
    assert found and all("2026-03-21" not in r["snippet"] for r in found)
    assert any("Book the recital hall early" in r["snippet"] for r in found)  # after it
    index.close()


def test_exact_tokens_and_limits(ws, tmp_path):
    index = make(ws, tmp_path)
    index.sync()
    assert paths(index.search("OPENAI_API_KEY"))[0] == "memory/2025-01-02.md"
    assert paths(index.search("roadmap hiring"))[0] == "memory/2025-01-03.md"
    assert len(index.search("the", max_results=1, min_score=0)["results"]) == 1
    assert index.search("Mac Studio gateway", min_score=1.01)["results"] == []
    index.close()


def test_vec0_is_the_vector_path_on_this_machine(ws, tmp_path, monkeypatch):
    index = make(ws, tmp_path)
    index.sync()
    status = index.status()
    assert status["vector"]["mode"] == "vec0" and status["vector"]["available"]
    assert status["vector"]["extension"].startswith("v")
    rows = index.store.conn.execute("SELECT count(*) FROM chunks_vec").fetchall()[0][0]
    assert rows == status["chunks"] == 3
    calls = []
    real_knn = index.store.vec_knn
    monkeypatch.setattr(index.store, "vec_knn", lambda q, k: calls.append(k) or real_knn(q, k))
    # The in-process matrix is not in step yet: vec0 answers while it loads.
    result = index.search("gateway Mac Studio office", mode="vector")
    assert calls == [6 * 4] and paths(result)[0] == "MEMORY.md"
    index.vectors.wait_loaded(10)
    # In step now: the matrix answers, with what vec0 answered.
    again = index.search("gateway Mac Studio office", mode="vector")
    assert calls == [6 * 4] and again["results"] == result["results"]
    # A sync commit puts it out of step again (in this process or another one); the few
    # vectors it changed are applied before the search, which the matrix still answers.
    write(ws, "memory/2025-01-09.md", "# Jan 9\n\n- moved the gateway to the rack\n")
    index.sync()
    assert "memory/2025-01-09.md" in paths(index.search("gateway rack", mode="vector"))
    assert calls == [6 * 4]
    # A larger catch-up happens in the background while vec0 answers.
    monkeypatch.setattr(matrix_module, "INLINE_ROWS", 0)
    write(ws, "memory/2025-01-10.md", "# Jan 10\n\n- the gateway got a new disk\n")
    index.sync()
    assert "memory/2025-01-10.md" in paths(index.search("gateway disk", mode="vector"))
    assert calls == [6 * 4, 6 * 4]
    index.vectors.wait_loaded(10)
    assert index.vectors.generation == index.store.generation()
    index.close()


def test_knn_query_uses_match_and_k(ws, tmp_path):
    index = make(ws, tmp_path)
    index.sync()
    traced = []
    index.store.readers.connection().exec_trace = \
        lambda cursor, sql, bindings: traced.append(sql) or True
    index.search("gateway", mode="vector")
    knn = [sql for sql in traced if "chunks_vec" in sql]
    assert knn and "MATCH ?" in knn[0] and "k = ?" in knn[0] and "ORDER BY" not in knn[0]
    index.close()


def test_unchanged_files_are_never_embedded_again(ws, tmp_path):
    fake = FakeEmbedder()
    index = make(ws, tmp_path, fake)
    index.sync()
    first = len(fake.embedded)
    assert index.sync()["indexed"] == 0 and len(fake.embedded) == first
    os.utime(ws / "MEMORY.md", (1, 1))  # touched, same content
    assert index.sync()["indexed"] == 0 and len(fake.embedded) == first
    write(ws, "memory/2025-01-03.md", LUNCH + "- Booked the venue\n")
    summary = index.sync()
    assert summary["indexed"] == 1
    assert all("Booked the venue" in t for t in fake.embedded[first:])
    forced = index.sync(force=True)
    assert forced["rebuilt"] and forced["embedded"] == 0 and forced["cached"] == 3
    assert index.status()["cacheEntries"] == 3 + 1
    index.close()


def test_cache_survives_reopening_and_is_bounded(ws, tmp_path):
    index = make(ws, tmp_path, cache={"maxEntries": 2})
    index.sync()
    assert index.status()["cacheEntries"] == 2
    index.close()
    fake = FakeEmbedder()
    again = make(ws, tmp_path, fake, cache={"maxEntries": 100})
    again.sync(force=True)
    assert len(fake.embedded) == 1  # two of three texts came from the cache
    again.close()


def test_a_new_model_rebuilds_the_index(ws, tmp_path):
    index = make(ws, tmp_path, FakeEmbedder(model="bow-a"))
    index.sync()
    index.close()
    fake_b = FakeEmbedder(model="bow-b", dims=32)
    index = make(ws, tmp_path, fake_b)
    summary = index.sync()
    assert summary["rebuilt"] and len(fake_b.embedded) == 3
    assert index.status()["vector"]["dims"] == 32
    assert index.search("gateway Mac Studio")["model"] == "bow-b"
    assert paths(index.search("gateway Mac Studio"))[0] == "MEMORY.md"
    index.close()


@pytest.mark.parametrize("change", [
    {"embedder": FakeEmbedder(fingerprint="other-endpoint")},
    {"embedder": FakeEmbedder(segment_tokens=5)},
    {"chunking": {"tokens": 200, "overlap": 40}},
])
def test_endpoint_segmenting_or_chunking_change_rebuilds(ws, tmp_path, change):
    make(ws, tmp_path).sync()
    index = make(ws, tmp_path, change.get("embedder"),
                 **({"chunking": change["chunking"]} if "chunking" in change else {}))
    assert index.sync()["rebuilt"]
    assert index.sync()["rebuilt"] is False
    index.close()


def test_failed_rebuild_leaves_the_old_index_whole(ws, tmp_path):
    make(ws, tmp_path).sync()

    class Exploding(FakeEmbedder):
        def embed_documents(self, texts, progress=None):
            raise RuntimeError("crash in the middle of a rebuild")

    index = make(ws, tmp_path, Exploding(model="new"))
    with pytest.raises(RuntimeError):
        index.sync()
    assert index.status()["chunks"] == 3 and index.status()["embeddedChunks"] == 3
    assert '"bow-256"' in index.store.get_meta("embedding")
    index.close()


def test_without_sqlite_vec_search_runs_in_process(ws, tmp_path, monkeypatch):
    index = make(ws, tmp_path, store={"vector": {"enabled": False}})
    index.sync()
    assert index.status()["vector"]["mode"] == "off"
    monkeypatch.setattr(index.store, "vec_knn", lambda *a: pytest.fail("vec0 used"))
    result = index.search("gateway Mac Studio office", mode="vector")
    assert result["mode"] == "vector" and paths(result)[0] == "MEMORY.md"
    index.close()


def test_a_broken_extension_path_falls_back_in_process(ws, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        index = make(ws, tmp_path, store={"vector": {"extensionPath": str(tmp_path / "nope")}})
        index.sync()  # the store opens on first use
    assert "sqlite-vec unavailable" in caplog.text
    assert index.status()["vector"] == {"enabled": True, "available": False,
                                        "mode": "in-process", "extension": None, "dims": 256}
    assert index.search("gateway Mac Studio")["mode"] == "hybrid"
    assert paths(index.search("gateway Mac Studio"))[0] == "MEMORY.md"
    index.close()


def test_without_fts5_search_is_vector_only(ws, tmp_path, monkeypatch):
    def no_fts(conn):
        raise apsw.SQLError("no such module: fts5")

    monkeypatch.setattr(schema_module, "_create_fts", no_fts)
    index = make(ws, tmp_path)
    index.sync()
    assert index.status()["fts"] == {"available": False}
    result = index.search("gateway Mac Studio office")
    assert result["mode"] == "vector" and paths(result)[0] == "MEMORY.md"
    index.close()


def test_without_embeddings_search_is_keyword_only(ws, tmp_path):
    index = make(ws, tmp_path, BrokenEmbedder())
    summary = index.sync()
    assert summary["chunks"] == 3 and summary["provider"] is None
    result = index.search("a828e60")
    assert result["mode"] == "keyword" and paths(result) == ["memory/2025-01-02.md"]
    assert result["results"][0]["score"] == 1.0
    status = index.status()
    assert status["embeddedChunks"] == 0 and "HTTP 500" in status["embeddingError"]
    index.close()


def test_a_remote_provider_without_key_is_keyword_only(ws, tmp_path):
    index = open_file_index("main", ws, settings(provider="openai", fallback="none",
                                            sync={"watch": False}),
                            tmp_path / "state", env={})
    index.sync()
    result = index.search("a828e60")
    assert result["mode"] == "keyword" and paths(result) == ["memory/2025-01-02.md"]
    assert "OPENAI_API_KEY" in index.status()["embeddingError"]
    index.close()


def test_provider_failure_switches_to_the_fallback_and_says_so(ws, tmp_path):
    fallback = FakeEmbedder(model="backup")
    index = make(ws, tmp_path, BrokenEmbedder(), backup=fallback, fallback="local")
    index.sync()
    result = index.search("gateway Mac Studio")
    assert result["provider"] == "fake" and result["model"] == "backup"
    assert result["fallback"]["from"] == "broken" and "HTTP 500" in result["fallback"]["reason"]
    assert result["mode"] == "hybrid" and paths(result)[0] == "MEMORY.md"
    assert index.status()["fallback"] == result["fallback"]
    index.close()


def test_vectors_are_filled_in_once_embeddings_work(ws, tmp_path):
    make(ws, tmp_path, BrokenEmbedder()).sync()
    write(ws, "memory/2025-01-03.md", LUNCH + "- and a changed line\n")
    fake = FakeEmbedder()
    index = make(ws, tmp_path, fake)
    summary = index.sync()
    assert summary["indexed"] == 1 and len(fake.embedded) == 3  # nothing embedded twice
    assert index.status()["embeddedChunks"] == 3
    vec_rows = index.store.conn.execute("SELECT count(*) FROM chunks_vec").fetchall()[0][0]
    assert vec_rows == 3
    assert index.search("gateway Mac Studio")["mode"] == "hybrid"
    index.close()


def test_dirty_index_syncs_on_search_and_drops_deleted_files(ws, tmp_path):
    index = make(ws, tmp_path)
    index.sync()
    write(ws, "memory/2025-02-01.md", "# Feb\n\n- zanzibar trip planned\n")
    (ws / "memory" / "2025-01-03.md").unlink()
    assert index.search("zanzibar")["results"] == []  # not dirty: no sync
    index.mark_dirty()
    index.search("zanzibar")  # starts a sync in the background, answers from the index
    assert index.wait_synced(10)
    assert paths(index.search("zanzibar")) == ["memory/2025-02-01.md"]
    assert "memory/2025-01-03.md" not in index.store.files()
    assert index.status()["dirty"] is False
    index.close()


def test_progress_counts_chunks(ws, tmp_path):
    seen = []
    index = make(ws, tmp_path)
    index.sync(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]  # per embedded batch, in chunks
    index.close()


def test_status_reports_what_the_cli_shows(ws, tmp_path):
    index = make(ws, tmp_path)
    before = index.status()
    assert before["files"] == 0 and before["dirty"] is True
    index.sync()
    status = index.status()
    assert {k: status[k] for k in ("agentId", "files", "chunks", "embeddedChunks", "provider",
                                   "model", "dirty", "watching")} == {
        "agentId": "main", "files": 3, "chunks": 3, "embeddedChunks": 3, "provider": "fake",
        "model": "bow-256", "dirty": False, "watching": False}
    assert status["fts"]["available"] and status["vector"]["available"]
    assert status["path"].endswith("main.sqlite") and status["lastSync"]["indexed"] == 3
    index.close()


def test_segment_embedding_scores_a_chunk_by_its_best_part(ws, tmp_path):
    fake = FakeEmbedder(segment_tokens=12)
    write(ws, "memory/mixed.md", "# Mixed\n\n" + "\n".join(
        ["- groceries milk eggs bread"] * 6 + ["- zebra crossing near school"]))
    index = make(ws, tmp_path, fake)
    index.sync()
    segments = index.store.conn.execute(
        "SELECT segments FROM chunks WHERE path = 'memory/mixed.md'").fetchall()[0][0]
    assert segments is not None and len(segments) > 256 * 4
    result = index.search("zebra crossing school", mode="vector")
    assert result["results"][0]["path"] == "memory/mixed.md"
    # the score is that of the best segment ("Mixed" heading + the zebra line), not the blur
    best = 3 / (3 ** 0.5 * 5 ** 0.5)
    assert result["results"][0]["score"] == pytest.approx(math.tanh(best), abs=1e-3)
    index.close()


def test_segments_are_tokenized_once_and_embedded_from_their_ids(ws, tmp_path):
    fake = FakeEmbedder(segment_tokens=4)
    tokenized, from_ids = [], []
    tokenize, embed_tokens = fake.tokenize, fake.embed_tokens
    fake.tokenize = lambda texts: tokenized.append(list(texts)) or tokenize(texts)
    fake.embed_tokens = lambda ids, progress=None: from_ids.append(len(ids)) or \
        embed_tokens(ids, progress)
    index = make(ws, tmp_path, fake)
    summary = index.sync()
    assert len(tokenized) == 1 and len(tokenized[0]) == len(set(tokenized[0]))
    assert sum(from_ids) == summary["embedded"] == len(fake.embedded) > summary["chunks"]
    assert paths(index.search("OPENAI_API_KEY 1Password", mode="vector"))[0] == \
        "memory/2025-01-02.md"
    index.close()


def test_cache_writes_overlap_the_next_embedding_batch(ws, tmp_path, monkeypatch):
    monkeypatch.setattr(vectors, "EMBED_STEP", 2)
    fake = FakeEmbedder()
    second_batch = threading.Event()
    embed = fake.embed_documents
    fake.embed_documents = lambda texts, progress=None: (
        second_batch.set() if fake.calls else None) or embed(texts, progress)
    index = make(ws, tmp_path, fake)
    put, waited = index.store.cache_put, []
    monkeypatch.setattr(index.store, "cache_put", lambda *args: (
        waited.append(second_batch.wait(10)), put(*args))[1])
    assert index.sync()["embedded"] == 3
    # The first batch's commit waited for the model to start on the second: on its own
    # thread, not in the way of the embedding.
    assert waited == [True, True] and index.status()["cacheEntries"] == 3
    index.close()


def test_a_failed_cache_write_fails_the_sync(ws, tmp_path, monkeypatch):
    index = make(ws, tmp_path)

    def full(*args):
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(index.store, "cache_put", full)
    with pytest.raises(apsw.FullError):
        index.sync()
    assert index.status()["chunks"] == 0
    index.close()


def test_extra_paths_and_sessions(ws, tmp_path):
    outside = tmp_path / "notes"
    write(outside, "ideas.md", "# Ideas\n\n- build a quokka feeder\n")
    sessions = tmp_path / "sessions"
    lines = [
        {"type": "session", "version": 1, "id": "abc"},
        {"type": "message", "id": "1", "role": "user",
         "content": [{"type": "text", "text": "remind me about the walrus invoice"}]},
        {"type": "message", "id": "2", "role": "assistant",
         "content": [{"type": "text", "text": "Noted."}]},
    ]
    write(sessions, "abc.jsonl", "\n".join(json.dumps(x) for x in lines) + "\ntorn line {")
    index = open_file_index("main", ws, settings(extraPaths=[str(outside)], sync={"watch": False},
                                            fallback="none"),
                            tmp_path / "state", sessions, embedder=FakeEmbedder())
    index.sync()
    assert paths(index.search("quokka feeder")) == [str((outside / "ideas.md").resolve())]
    assert index.search("walrus invoice")["results"] == []  # sessions are opt-in
    index.close()
    opted = open_file_index("main", ws, settings(extraPaths=[str(outside)], sync={"watch": False},
                                            sources=["memory", "sessions"],
                                            experimental={"sessionMemory": True},
                                            fallback="none"),
                            tmp_path / "state", sessions, embedder=FakeEmbedder())
    opted.sync()
    hit = opted.search("walrus invoice")["results"][0]
    assert (hit["path"], hit["source"], hit["startLine"], hit["endLine"]) == \
        ("sessions/abc.jsonl", "sessions", 2, 3)
    assert hit["snippet"].startswith("User: remind me about the walrus invoice")
    opted.close()


def test_symlinks_out_of_the_workspace_are_not_indexed(ws, tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nplatypus password\n")
    (ws / "memory" / "link.md").symlink_to(secret)
    index = make(ws, tmp_path)
    index.sync()
    assert "memory/link.md" not in index.store.files()
    assert all(r["path"] != "memory/link.md"
               for r in index.search("platypus password", min_score=0)["results"])
    index.close()


def test_store_path_and_migrations(ws, tmp_path):
    assert store_path("main", settings(), tmp_path) == tmp_path / "memory" / "main.sqlite"
    custom = settings(store={"path": str(tmp_path / "idx" / "{agentId}.db")})
    assert store_path("work", custom, tmp_path) == tmp_path / "idx" / "work.db"
    index = make(ws, tmp_path)
    version = index.store.conn.execute("PRAGMA user_version").fetchall()[0][0]
    assert version == len(MIGRATIONS)
    tables = {r[0] for r in index.store.conn.execute("SELECT name FROM sqlite_master")}
    index.sync()
    tables |= {r[0] for r in index.store.conn.execute("SELECT name FROM sqlite_master")}
    assert {"files", "chunks", "chunks_fts", "chunks_vec", "embedding_cache", "meta"} <= tables
    index.close()
    reopened = make(ws, tmp_path)
    assert reopened.sync()["indexed"] == 0
    reopened.close()


def test_agents_have_separate_indexes(ws, tmp_path):
    other_ws = tmp_path / "other"
    write(other_ws, "MEMORY.md", "# Other\n\nthe narwhal project\n")
    quiet = settings(sync={"watch": False}, fallback="none")
    a = open_file_index("a", ws, quiet, tmp_path / "state", embedder=FakeEmbedder())
    b = open_file_index("b", other_ws, quiet, tmp_path / "state", embedder=FakeEmbedder())
    a.sync(), b.sync()
    assert a.path != b.path
    assert a.search("narwhal project")["results"] == []
    assert paths(b.search("narwhal project")) == ["MEMORY.md"]
    a.close(), b.close()


def test_in_process_vectors_follow_a_sync_made_elsewhere(ws, tmp_path):
    # Two index objects on one file stand for two processes: the matrix of one catches up
    # with what the other committed from the store's vector log, never from its own state.
    reader, writer = make(ws, tmp_path), make(ws, tmp_path)
    writer.sync()
    reader.synced = True  # answer from the index as it is, as a running chat would
    reader.dirty = False
    reader.search("gateway", mode="vector")
    reader.vectors.wait_loaded(10)
    qvec = reader.embedders.get().embed_query("zanzibar trip")
    before = reader.vectors.nearest(reader.store, qvec, 10, wait=False)
    assert before is not None and len(before) == 3
    write(ws, "memory/2025-02-01.md", "# Feb\n\n- zanzibar trip planned\n")
    write(ws, "memory/2025-01-03.md", LUNCH + "- and the zanzibar budget\n")
    writer.mark_dirty()
    writer.sync()
    after = reader.vectors.nearest(reader.store, qvec, 10, wait=False)
    assert reader.vectors.generation == reader.store.generation()
    rows = reader.store.get_chunks(after)
    assert sorted(r.path for r in rows.values()) == sorted(
        ["MEMORY.md", "memory/2025-01-02.md", "memory/2025-01-03.md", "memory/2025-02-01.md"])
    assert rows[after[0]].path == "memory/2025-02-01.md"
    reader.close()
    writer.close()
