"""``GET /api/sessions`` a page at a time: ``limit`` and ``cursor`` in, ``nextCursor`` out;
odd values refused; a person's pages hold their sessions only; 10,000 sessions on
PostgreSQL walked page by page, each page one indexed query that stops at its limit."""

from __future__ import annotations

import base64

import pytest

from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.people import FilePeople
from clawd.storage.postgres.people import PgPeople

from conftest import make_runtime
from gateway_client import AUTH, gateway, send


def _walk(client, headers, limit, **params) -> tuple[list[dict], int]:
    """Every session, page by page; and how many pages it took."""
    found, cursor, pages = [], None, 0
    while True:
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        answer = client.get("/api/sessions", params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages += 1
        assert len(body["sessions"]) <= int(limit)
        found += body["sessions"]
        cursor = body["nextCursor"]
        if cursor is None:
            return found, pages


def test_pages_walk_every_session_once_newest_first(tmp_path, one_or_two_workers):
    provider = ScriptedProvider(default=lambda request: "ok")
    with gateway(tmp_path, provider) as client:
        for n in range(7):
            send(client, f"hello {n}", key=f"s{n}")
        found, pages = _walk(client, AUTH, 3)
        assert pages == 3
        keys = [s["key"] for s in found]
        assert sorted(keys) == sorted(f"agent:main:s{n}" for n in range(7))
        assert all("busy" in s and s["title"].startswith("hello") for s in found)
        whole = client.get("/api/sessions", headers=AUTH).json()  # default: 100 a page
        assert len(whole["sessions"]) == 7 and whole["nextCursor"] is None
        ended, _ = _walk(client, AUTH, 2, all="true")  # ended sessions too, paged as well
        assert sorted(s["key"] for s in ended) == sorted(keys)


@pytest.mark.parametrize(("limit", "status"), [
    ("0", 400), ("-1", 400), ("abc", 400), ("1.5", 400), ("1e3", 400), (" ", 400),
    ("99999999999999999999", 200),  # more than 500: cut to 500
    ("", 200),  # absent: 100
])
def test_odd_limits_are_refused_or_cut(tmp_path, limit, status):
    with gateway(tmp_path, ScriptedProvider(default=lambda request: "ok")) as client:
        send(client, "hi")
        answer = client.get("/api/sessions", params={"limit": limit}, headers=AUTH)
        assert answer.status_code == status, answer.text
        if status == 400:
            assert "limit must be a whole number" in answer.json()["error"]["message"]


@pytest.mark.parametrize("cursor", [
    "garbage!", "%00", "x" * 5000, base64.urlsafe_b64encode(b"[1,2]").decode(),
    base64.urlsafe_b64encode(b'["a\\u0000","b"]').decode()])
def test_a_cursor_the_gateway_did_not_give_is_a_json_400(tmp_path, cursor):
    with gateway(tmp_path, ScriptedProvider(default=lambda request: "ok")) as client:
        answer = client.get("/api/sessions", params={"cursor": cursor}, headers=AUTH)
        assert answer.status_code == 400
        assert "cursor" in answer.json()["error"]["message"]


def test_a_person_pages_through_their_own_sessions_only(tmp_path, one_or_two_workers):
    import dataclasses

    from clawd.storage.files.storage import FileStorage

    main = make_runtime(tmp_path, ScriptedProvider(default=lambda request: "ok"))
    db = getattr(main.storage, "db", None)
    workspace = tmp_path / "ws-alice"
    (workspace / "memory").mkdir(parents=True)
    storage = db.agent("alice") if db is not None else FileStorage(
        "alice", workspace, tmp_path / "state" / "agents" / "alice" / "sessions")
    alice_rt = dataclasses.replace(main, agent_id="alice", storage=storage,
                                   workspace=workspace)
    people = PgPeople(db) if db is not None else FilePeople(tmp_path / "people.json")
    alice = {"Authorization": f"Bearer {people.add('alice', ('alice',))[1]}"}
    with gateway(tmp_path, None, runtimes=[main, alice_rt], people=people) as client:
        for n in range(3):
            send(client, f"operator {n}", key=f"op{n}")
            assert client.post(f"/api/sessions/a{n}/messages", json={"text": "mine"},
                               headers=alice).status_code == 200
        found, _ = _walk(client, alice, 2)
        assert sorted(s["key"] for s in found) == [f"agent:alice:a{n}" for n in range(3)]
        # a cursor of the operator's list shows alice nothing of main's
        cursor = client.get("/api/sessions", params={"limit": 1}, headers=AUTH
                            ).json()["nextCursor"]
        theirs = client.get("/api/sessions", params={"cursor": cursor}, headers=alice).json()
        assert all(s["key"].startswith("agent:alice:") for s in theirs["sessions"])
        assert client.get("/api/sessions", params={"agent": "main", "limit": 1},
                          headers=alice).status_code == 403
        assert client.get("/api/sessions", params={"limit": 1}).status_code == 401


BULK = 10_000


def _bulk(db, source_key: str) -> None:
    """``BULK`` sessions cloned in the database from the session of ``source_key``: rows
    of ``sessions``, ``session_logs`` and ``transcript_lines`` as a conversation writes
    them; three sessions share each moment of activity, so the key decides among them."""
    with db.connection() as conn, conn.transaction():
        source = conn.execute("SELECT entry->>'sessionId' FROM sessions WHERE agent_id = "
                              "'main' AND key = %s", (source_key,)).fetchone()[0]
        conn.execute("INSERT INTO session_logs (agent_id, session_id) SELECT 'main', "
                     "'bulk' || g FROM generate_series(1, %s) g", (BULK,))
        conn.execute(
            "INSERT INTO transcript_lines (agent_id, session_id, line) SELECT 'main', "
            "'bulk' || g, CASE WHEN t.line::jsonb->>'type' = 'session' THEN (t.line::jsonb "
            "|| jsonb_build_object('id', 'bulk' || g))::json ELSE t.line END FROM "
            "generate_series(1, %s) g, (SELECT seq, line FROM transcript_lines WHERE "
            "agent_id = 'main' AND session_id = %s) t ORDER BY g, t.seq", (BULK, source))
        conn.execute(
            "INSERT INTO sessions (agent_id, key, entry) SELECT 'main', 'agent:main:bulk' "
            "|| g, entry || jsonb_build_object('sessionId', 'bulk' || g, 'updatedAt', "
            "to_char(timestamp '2026-01-01' + (g / 3) * interval '1 second', "
            "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) FROM sessions, generate_series(1, %s) g "
            "WHERE agent_id = 'main' AND key = %s", (BULK, source_key))
        conn.execute("ANALYZE sessions")


def _plan(db, limit: int, after) -> dict:
    import json

    from clawd.storage.postgres.sessions import page_query

    sql, args = page_query("main", limit, after)
    with db.connection() as conn:
        found = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", args).fetchone()[0]
    return (found if isinstance(found, list) else json.loads(found))[0]["Plan"]


@pytest.mark.slow
def test_ten_thousand_sessions_page_by_an_index_and_walk_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAWD_TEST_STORAGE", "postgresql")
    runtime = make_runtime(tmp_path, ScriptedProvider(default=lambda request: "ok"))
    db = runtime.storage.db
    with gateway(tmp_path, None, runtimes=[runtime]) as client:
        send(client, "the first of many")
        _bulk(db, "agent:main:main")
        first = client.get("/api/sessions", params={"limit": 100}, headers=AUTH).json()
        assert len(first["sessions"]) == 100 and first["nextCursor"]
        # one page is one walk of the index that stops at the page's end
        from clawd.sessions.paging import decode

        for after in (None, decode(first["nextCursor"])):
            plan = _plan(db, 101, after)
            assert plan["Node Type"] == "Limit" and plan["Actual Rows"] == 101
            scan = plan["Plans"][0]
            assert scan["Node Type"].startswith("Index") and \
                scan["Index Name"] == "sessions_recent", scan
            assert scan["Actual Rows"] <= 101  # not 10,001 rows read and sorted
        found, pages = _walk(client, AUTH, 500)
    keys = [s["key"] for s in found]
    assert len(keys) == BULK + 1 and len(set(keys)) == BULK + 1 and pages == 21
    # newest activity first (main's, then the bulk's latest moment), the key last first
    assert keys[:6] == ["agent:main:main", "agent:main:bulk9999", "agent:main:bulk10000",
                        "agent:main:bulk9998", "agent:main:bulk9997", "agent:main:bulk9996"]
    assert keys[-2:] == ["agent:main:bulk2", "agent:main:bulk1"]  # 2026-01-01 00:00:00
