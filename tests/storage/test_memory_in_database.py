"""The memory index as rows of PostgreSQL (``PgIndexStore``) against the SQLite file: the
same notes rank alike, forget purges rows and cache, the cache is shared, and two writers
or two agents never mix."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pytest

from clawd.memory.keywords import plan
from clawd.memory.search import compounds, query_terms
from clawd.storage.files.memory import open_file_index
from clawd.storage.postgres import database
from clawd.storage.postgres.memory import PgIndexStore

from memory_fakes import FakeEmbedder, settings, write

NOTES = {
    "MEMORY.md": "# People\n\nMy sister Ines lives in Porto and visits in March.\n"
                 "Sam leads the roadmap; the gateway runs on the Mac Studio.\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Decided: PostgreSQL 16 for tidepool\n"
                            "- Fixed bug a828e60 in the loader\n- The gateway was slow again\n",
    "memory/2026-11-21.md": "# 2026-11-21\n\n- Lunch with Sam about hiring\n"
                            "- OPENAI_API_KEY lives in 1Password\n- 会议改到下周三\n",
    "memory/2026-11-22.md": "# 2026-11-22\n\n## Move\n\n- Moving to Lisbon with the cat\n"
                            "- The cat hates the carrier; the cat sleeps all day\n",
}
QUERIES = ["gateway", "Sam roadmap hiring", "a828e60", "OPENAI_API_KEY", "会议",
           "where does my sister live", "the cat", "PostgreSQL tidepool decision",
           "Lisbon move", "nothing matches this"]


def workspace(root: Path) -> Path:
    for rel, text in NOTES.items():
        write(root, rel, text)
    return root


def make(ws: Path, tmp_path: Path, open_store=None, embedder=None):
    return open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state",
                           embedder=embedder or FakeEmbedder(), open_store=open_store)


@pytest.fixture
def db(pg_url):
    return database(pg_url)


@pytest.fixture
def pair(tmp_path, db):
    """The same notes in a SQLite index and in the database's."""
    ws = workspace(tmp_path / "ws")
    files = make(ws, tmp_path)
    rows = make(ws, tmp_path / "rows", partial(PgIndexStore, db, "main"))
    files.sync()
    rows.sync()
    yield files, rows
    files.close()
    rows.close()


def _places(index, hits):
    chunks = index.store.get_chunks(c for c, _ in hits)
    return [((chunks[c].path, chunks[c].start_line), round(s, 9)) for c, s in hits]


def test_keyword_ranking_is_fts5_bm25(pair):
    files, rows = pair
    for query in QUERIES + ["the", "cat cat carrier", "Mac Studio gateway"]:
        made = [plan(query_terms(q), compounds(q), s.fts_tokens, s.term_stats)
                for q, s in ((query, files.store), (query, rows.store))]
        assert made[0] == made[1], query  # the same tokens and term counts
        if made[0].match is None:
            continue
        expected = _places(files, files.store.fts_search(made[0].match, 50))
        assert _places(rows, rows.store.fts_search(made[1].match, 50)) == expected, query
        newest = _places(files, files.store.fts_search(made[0].match, 50, newest=2))
        assert _places(rows, rows.store.fts_search(made[1].match, 50, newest=2)) == newest


@pytest.mark.parametrize("mode", ["hybrid", "text", "vector"])
def test_search_results_are_those_of_the_file(pair, mode):
    files, rows = pair
    for query in QUERIES:
        a = files.search(query, max_results=6, min_score=0.0, mode=mode)
        b = rows.search(query, max_results=6, min_score=0.0, mode=mode)
        assert [(r["citation"], round(r["score"], 6)) for r in b["results"]] == \
            [(r["citation"], round(r["score"], 6)) for r in a["results"]], (query, mode)
        assert b["mode"] == a["mode"]


def test_status_and_doctor_name_the_database(pair, db):
    _, rows = pair
    status = rows.status()
    assert status["path"] == f"{db.location} (agent main)"
    assert status["vector"]["mode"] == "hnsw" and status["vector"]["extension"]
    assert status["chunks"] == status["embeddedChunks"] > 0
    checks = {what: (ok, detail) for ok, what, detail in rows.check()}
    assert checks["memory index"][0], checks
    assert not list((rows.path.parent).glob("*.sqlite"))  # no index file for the rows


def test_a_change_is_indexed_and_forget_purges_rows_and_cache(tmp_path, db):
    ws = workspace(tmp_path / "ws")
    embedder = FakeEmbedder()
    index = make(ws, tmp_path, partial(PgIndexStore, db, "main"), embedder)
    index.sync()
    write(ws, "memory/2026-11-23.md", "# 2026-11-23\n\n- The locksmith code is 4471\n")
    index.mark_dirty()
    assert index.sync()["indexed"] == 1  # the changed file only
    assert index.search("locksmith")["results"][0]["path"] == "memory/2026-11-23.md"
    before = index.status()["cacheEntries"]
    path = ws / "memory/2026-11-23.md"

    def edit():
        path.write_text("# 2026-11-23\n\n", encoding="utf-8")

    summary = index.forget({"memory/2026-11-23.md": [3]}, edit)
    assert summary["chunks"] == 1 and summary["cacheEntries"] >= 1
    assert not any("4471" in r["snippet"]
                   for r in index.search("locksmith 4471", min_score=0.0)["results"])
    with db.connection() as conn:
        left = conn.execute("SELECT count(*) FROM memory_chunks WHERE text LIKE '%%4471%%'"
                            ).fetchone()[0]
    assert left == 0
    assert index.status()["cacheEntries"] < before
    index.close()


def test_the_embedding_cache_is_shared_by_agents_and_hosts(tmp_path, db):
    ws = workspace(tmp_path / "ws")
    first, second = FakeEmbedder(), FakeEmbedder()
    one = make(ws, tmp_path / "a", partial(PgIndexStore, db, "main"), first)
    one.sync()
    assert first.embedded
    other = make(ws, tmp_path / "b", partial(PgIndexStore, db, "ines"), second)
    other.sync()
    assert second.embedded == []  # every text was embedded already, by another agent
    assert other.search("Lisbon")["results"][0]["path"] == "memory/2026-11-22.md"
    one.close()
    other.close()


def test_agents_never_see_each_others_chunks(tmp_path, db):
    mine = write(tmp_path / "mine", "MEMORY.md", "# Me\n\nThe safe code is 1234.\n").parent
    theirs = workspace(tmp_path / "theirs")
    for n in range(60):  # enough of the other agent's chunks to crowd an HNSW walk
        write(theirs, f"memory/2026-10-{n % 28 + 1:02d}-{n}.md", f"# {n}\n\nsafe code {n}\n")
    a = make(mine, tmp_path / "a", partial(PgIndexStore, db, "me"))
    b = make(theirs, tmp_path / "b", partial(PgIndexStore, db, "them"))
    a.sync()
    b.sync()
    for mode in ("hybrid", "text", "vector"):
        found = a.search("safe code", min_score=0.0, mode=mode)["results"]
        assert [r["path"] for r in found] == ["MEMORY.md"], mode
    assert all(r["path"] != "MEMORY.md" or "1234" not in r["snippet"]
               for r in b.search("safe code 1234", min_score=0.0)["results"])
    a.close()
    b.close()


class Slow(FakeEmbedder):
    """Embeds for long enough that two hosts' syncs would overlap."""

    def embed_documents(self, texts, progress=None):
        import time

        time.sleep(0.5)
        return super().embed_documents(texts, progress)


def test_two_hosts_syncing_at_once_write_and_embed_each_chunk_once(tmp_path, db):
    ws = workspace(tmp_path / "ws")
    embedders = [Slow(), Slow()]
    hosts = [make(ws, tmp_path / f"h{n}", partial(PgIndexStore, db, "main"), embedders[n])
             for n in range(2)]
    threads = [threading.Thread(target=h.sync) for h in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with db.connection() as conn:
        doubled = conn.execute("SELECT count(*) FROM (SELECT path, start_line FROM "
                               "memory_chunks GROUP BY path, start_line, end_line "
                               "HAVING count(*) > 1) d").fetchone()[0]
    assert doubled == 0
    embedded = embedders[0].embedded + embedders[1].embedded
    assert embedded and len(embedded) == len(set(embedded))  # nothing embedded twice
    assert hosts[1].search("Porto")["results"][0]["path"] == "MEMORY.md"
    for host in hosts:
        host.close()


def test_term_counts_follow_every_change(tmp_path, db):
    ws = workspace(tmp_path / "ws")
    index = make(ws, tmp_path, partial(PgIndexStore, db, "main"))
    index.sync()
    write(ws, "memory/2026-11-21.md", "# 2026-11-21\n\n- Lunch with Sam, then the cat\n")
    (ws / "memory/2026-11-20.md").unlink()
    write(ws, "memory/2026-11-24.md", "# 2026-11-24\n\n- The cat met the gateway\n")
    index.mark_dirty()
    index.sync()
    with db.connection() as conn:
        kept = dict(conn.execute("SELECT term, docs FROM memory_terms WHERE agent_id = 'main'"
                                 ).fetchall())
        counted = dict(conn.execute(
            "SELECT t, count(*) FROM memory_chunks, unnest(tsvector_to_array(terms)) t "
            "WHERE agent_id = 'main' GROUP BY t").fetchall())
    assert kept == counted and "tidepool" not in kept and kept["cat"] >= 2
    index.close()


def test_a_failed_vector_query_leaves_the_keyword_half(pair, monkeypatch, caplog):
    from clawd.memory.index_store import SearchFailed

    _, rows = pair

    def broken(query, k):
        raise SearchFailed("vector search in the database failed: the server went away")

    monkeypatch.setattr(rows.store, "vec_knn", broken)
    found = rows.search("a828e60")
    assert found["mode"] == "keyword" and found["results"][0]["path"] == "memory/2026-11-20.md"
    assert "keyword-only" in caplog.text


def test_a_pasted_blob_does_not_stop_the_sync(tmp_path, db):
    ws = workspace(tmp_path / "ws")
    write(ws, "memory/2026-11-25.md", "# Keys\n\n- backup blob " + "Qm9v" * 800 + "\n"
          "- the vault opens with the brass key\n")
    index = make(ws, tmp_path, partial(PgIndexStore, db, "main"))
    assert index.sync()["indexed"] == len(NOTES) + 1
    assert index.search("brass key vault")["results"][0]["path"] == "memory/2026-11-25.md"
    index.close()
