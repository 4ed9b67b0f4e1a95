"""The session store: atomic locked updates, concurrent writers, corrupt files, keys."""

from __future__ import annotations

import json
import multiprocessing

from clawd.sessions.entry import new_entry
from clawd.sessions.store import is_group_key, main_key
from clawd.storage.files.sessions import SessionStore


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


# --- the store is an index over the transcripts ------------------------------------------------

def _two_sessions(tmp_path):
    """Sessions under two keys with a turn each; returns the runtime and the store as it was."""
    import gc

    from clawd.core.messages import Usage
    from clawd.loop.session import Session
    from clawd.providers.scripted import Reply, ScriptedProvider

    from conftest import make_runtime

    provider = ScriptedProvider(default=Reply("ok", usage=Usage(120, 7, 30, 5)))
    runtime = make_runtime(tmp_path, provider)
    for key in ("agent:main:main", "agent:main:work"):
        session = Session.open(runtime, key)
        list(session.run_turn(f"hello {key}"))
        list(session.run_turn("again"))
        session.close()
    del session
    gc.collect()
    return runtime, runtime.store.read()


COUNTED = ("sessionId", "sessionFile", "createdAt", "model", "cumulativeInputTokens",
           "cumulativeOutputTokens", "cumulativeCacheReadTokens", "cumulativeCacheWriteTokens",
           "compactionCount", "memoryFlushCount", "inputTokens", "outputTokens", "totalTokens",
           "totalTokensFresh")


def test_a_missing_store_is_rebuilt_from_the_transcripts(tmp_path, caplog):
    runtime, before = _two_sessions(tmp_path)
    runtime.store.path.unlink()
    after = runtime.store.entries()
    assert set(after) == {"agent:main:main", "agent:main:work"}
    for key in after:
        assert {f: after[key][f] for f in COUNTED} == {f: before[key][f] for f in COUNTED}
    assert after["agent:main:main"]["cumulativeInputTokens"] == 240
    assert after["agent:main:main"]["totalTokens"] == 155  # 120 + 30 + 5, the latest prompt
    assert "rebuilt 2 entries" in caplog.text
    assert json.loads(runtime.store.path.read_text()) == after  # and written back


def test_an_unreadable_store_is_set_aside_and_rebuilt(tmp_path):
    runtime, before = _two_sessions(tmp_path)
    runtime.store.path.write_text("{torn")
    after = runtime.store.entries()
    assert {k: e["sessionId"] for k, e in after.items()} == {
        k: e["sessionId"] for k, e in before.items()}
    aside = list(runtime.store.path.parent.glob("sessions.json.corrupt-*"))
    assert [p.read_text() for p in aside] == ["{torn"]


def test_rebuild_recounts_and_keeps_what_only_the_store_knows(tmp_path):
    runtime, before = _two_sessions(tmp_path)
    store = runtime.store
    store.update("agent:main:main", lambda e: {**e, "cumulativeInputTokens": 5,
                                               "modelOverride": "openai/gpt-4o"})
    store.update("agent:main:work", lambda e: None)  # dropped from the store
    assert store.rebuild() == (1, 1)
    after = store.read()
    assert after["agent:main:main"]["cumulativeInputTokens"] == 240
    assert after["agent:main:main"]["modelOverride"] == "openai/gpt-4o"
    assert after["agent:main:work"]["sessionId"] == before["agent:main:work"]["sessionId"]


def test_a_transcript_without_a_key_gets_its_own(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "old1.jsonl").write_text(
        '{"type":"session","version":1,"id":"old1","agentId":"main","timestamp":"2026-01-01T00:00:00Z"}\n'
        '{"type":"message","id":"m1","timestamp":"2026-01-01T00:00:01Z","role":"user",'
        '"content":[{"type":"text","text":"old times"}]}\n')
    (sessions / "notes.jsonl").write_text("not a transcript\n")
    store = SessionStore(sessions / "sessions.json")
    assert list(store.entries()) == ["agent:main:session-old1"]


def test_old_meanings_are_migrated_once_and_the_old_file_kept(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    transcript = sessions / "s1.jsonl"
    transcript.write_text(
        '{"type":"session","version":1,"id":"s1","agentId":"main","timestamp":"2026-01-01T00:00:00Z"}\n'
        '{"type":"message","id":"u","timestamp":"t","role":"user","content":"q1"}\n'
        '{"type":"message","id":"a","timestamp":"t","role":"assistant","content":"r1",'
        '"usage":{"input":900,"output":40,"cacheRead":0,"cacheWrite":0}}\n'
        '{"type":"message","id":"u2","timestamp":"t","role":"user","content":"q2"}\n'
        '{"type":"message","id":"a2","timestamp":"t","role":"assistant","content":"r2",'
        '"usage":{"input":1000,"output":60,"cacheRead":200,"cacheWrite":0}}\n')
    old = {"sessionId": "s1", "sessionFile": str(transcript), "model": "m",
           "inputTokens": 1900, "outputTokens": 100, "totalTokens": 2000,
           "contextTokens": 1300, "cacheReadTokens": 200, "cacheWriteTokens": 0,
           "compactionCount": 2, "memoryFlushCompactionCount": 2}
    path = sessions / "sessions.json"
    path.write_text(json.dumps({"agent:main:main": old}))
    entry = SessionStore(path).get("agent:main:main")
    assert entry["cumulativeInputTokens"] == 1900 and entry["cumulativeOutputTokens"] == 100
    assert entry["cumulativeCacheReadTokens"] == 200 and entry["contextUsedTokens"] == 1300
    assert entry["totalTokens"] == 1200 and entry["totalTokensFresh"] is True
    assert (entry["inputTokens"], entry["outputTokens"]) == (1000, 60)  # the latest turn
    assert entry["contextTokens"] is None  # the window: set when the session is next used
    assert entry["compactionCount"] == 2 and entry["memoryFlushCompactionCount"] == 2
    assert "cacheReadTokens" not in entry
    assert json.loads((sessions / "sessions.json.pre-migration").read_text()) == {
        "agent:main:main": old}
    again = SessionStore(path).get("agent:main:main")
    assert again == entry  # migrated once


def test_patch_adds_and_recreates(tmp_path):
    store = SessionStore(tmp_path / "sessions.json")
    base = new_entry("sid", tmp_path / "sid.jsonl", "m")
    assert store.patch("k", base=base, add={"compactionCount": 1})["compactionCount"] == 1
    assert store.patch("k", add={"compactionCount": 2})["compactionCount"] == 3
    assert store.read()["k"]["sessionId"] == "sid"


def test_an_older_transcript_gets_its_key_recorded_once_when_opened(tmp_path):
    import gc

    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider

    from conftest import make_runtime

    runtime = make_runtime(tmp_path, ScriptedProvider(default="ok"))
    sessions = runtime.storage.sessions_dir
    sessions.mkdir(parents=True, exist_ok=True)
    old = sessions / "old1.jsonl"
    old.write_text(
        '{"type":"session","version":1,"id":"old1","agentId":"main","timestamp":"2026-01-01T00:00:00Z"}\n'
        '{"type":"message","id":"m1","timestamp":"2026-01-01T00:00:01Z","role":"user",'
        '"content":[{"type":"text","text":"old times"}]}\n')
    entry = new_entry("old1", old, "m")
    runtime.store.path.write_text(json.dumps({"agent:main:work": entry}))
    for _ in range(2):
        session = Session.open(runtime, "agent:main:work")
        assert [m.text for m in session.history.messages][:1] == ["old times"]
        session.close()
        del session
        gc.collect()
    assert old.read_text().count('"session-key"') == 1
    runtime.store.path.unlink()
    assert runtime.store.get("agent:main:work")["sessionId"] == "old1"


def test_opening_a_session_is_not_activity(tmp_path):
    """Setting the window (contextTokens) or noting a torn line when a session opens leaves
    updatedAt alone: idle resets read it as the last activity."""
    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider

    from conftest import make_runtime

    runtime = make_runtime(tmp_path, ScriptedProvider(default="ok"))
    runtime.storage.sessions_dir.mkdir(parents=True, exist_ok=True)
    transcript = runtime.storage.sessions_dir / "sid.jsonl"
    transcript.write_text(
        '{"type":"session","version":1,"id":"sid","agentId":"main","timestamp":"t",'
        '"key":"agent:main:main"}\n{"torn')
    entry = {**new_entry("sid", transcript, "m", "2026-11-01T09:00:00.000+00:00"),
             "contextTokens": 1234}
    runtime.store.path.write_text(json.dumps({"agent:main:main": entry}))
    session = Session.open(runtime, "agent:main:main")
    stored = runtime.store.get("agent:main:main")
    assert stored["contextTokens"] == 200_000 and stored["invalidLines"] == [2]
    assert stored["updatedAt"] == "2026-11-01T09:00:00.000+00:00"
    session.close()


def test_the_typed_entry_names_every_field_the_docs_list():
    """``SessionEntry`` (what readers are type-checked against), the fields
    docs/sessions.md documents and the fields whose types are checked on load agree."""
    import re
    from pathlib import Path

    from clawd.sessions.entry import _FIELD_TYPES, SessionEntry, new_entry

    docs = (Path(__file__).parents[2] / "docs" / "sessions.md").read_text()
    table = docs[docs.index("| field | meaning |"):]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert set(SessionEntry.__annotations__) == documented
    assert set(_FIELD_TYPES) <= documented
    assert set(new_entry("s", Path("s.jsonl"), "m/x")) <= documented
