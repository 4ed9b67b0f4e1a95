"""The session store: atomic locked updates, concurrent writers, corrupt files, keys."""

from __future__ import annotations

import json
import multiprocessing

from clawd.sessions import SessionStore, is_group_key, main_key, new_entry


def _bump(path: str, key: str, times: int) -> None:
    store = SessionStore(__import__("pathlib").Path(path))
    for _ in range(times):
        store.update(key, lambda e: {**(e or {}), "n": (e or {}).get("n", 0) + 1})


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "sessions.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(str(path), key, 40))
             for key in ("agent:main:a", "agent:main:b", "agent:main:a", "agent:main:c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    data = json.loads(path.read_text())
    assert data["agent:main:a"]["n"] == 80
    assert data["agent:main:b"]["n"] == 40 and data["agent:main:c"]["n"] == 40
    assert not list(tmp_path.glob("*.tmp"))


def test_entry_fields(tmp_path):
    entry = new_entry("sid", tmp_path / "sid.jsonl", "anthropic/x")
    for field in ("sessionId", "sessionFile", "createdAt", "updatedAt", "model", "inputTokens",
                  "outputTokens", "totalTokens", "contextTokens", "compactionCount",
                  "memoryFlushAt", "memoryFlushCompactionCount"):
        assert field in entry


def test_corrupt_store_is_moved_aside_not_lost(tmp_path, caplog):
    path = tmp_path / "sessions.json"
    path.write_text('{"agent:main:main": {"sessionId": "x"')  # torn
    store = SessionStore(path)
    assert store.get("agent:main:main") is None
    store.update("agent:main:main", lambda e: {"sessionId": "new"})
    assert json.loads(path.read_text())["agent:main:main"]["sessionId"] == "new"
    aside = list(tmp_path.glob("sessions.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"agent:main:main": {"sessionId": "x"'
    assert "could not be parsed" in caplog.text


def test_patch_and_remove(tmp_path):
    store = SessionStore(tmp_path / "sessions.json")
    assert store.patch("k", a=1) is None  # no entry: nothing created
    store.update("k", lambda e: {"a": 0})
    assert store.patch("k", a=2)["a"] == 2
    store.update("k", lambda e: None)
    assert store.read() == {}


def test_keys():
    assert main_key("main") == "agent:main:main"
    assert main_key("main", "work") == "agent:main:work"
    assert main_key("main", "agent:main:telegram:group:42") == "agent:main:telegram:group:42"
    assert is_group_key("agent:main:telegram:group:42")
    assert is_group_key("agent:main:discord:channel:7")
    assert not is_group_key("agent:main:main")


def test_malformed_entries_are_dropped_and_the_file_kept(tmp_path, caplog):
    path = tmp_path / "sessions.json"
    good = new_entry("sid", tmp_path / "sid.jsonl", "anthropic/x")
    original = json.dumps({"agent:main:main": good, "agent:main:a": "x",
                           "agent:main:b": {"sessionId": 5},
                           "agent:main:c": {"sessionId": "s2"}})
    path.write_text(original)
    store = SessionStore(path)
    assert store.get("agent:main:main")["sessionId"] == "sid"  # the good entry survives
    assert set(store.entries()) == {"agent:main:main"}
    aside = list(tmp_path.glob("sessions.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == original
    assert "dropped malformed entries" in caplog.text and "'agent:main:a'" in caplog.text
    assert set(json.loads(path.read_text())) == {"agent:main:main"}
