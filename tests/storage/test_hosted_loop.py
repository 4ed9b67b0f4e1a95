"""The loop with ``storage.url`` set, built by the composition root as ``clawd chat`` builds
it: a conversation, recall, ``memory search``, ``/new``, ``/compact`` with its flush,
consolidation and forget all work on PostgreSQL and write no session or note file; a note
another worker writes is found without a watcher; two processes never share a session."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from clawd.config import load_config
from clawd.core.events import ErrorEvent, Notice, TurnDone
from clawd.frontends.commands import Chat
from clawd.frontends.compose import build_runtime
from clawd.loop.consolidate import consolidate, last_run
from clawd.loop.runtime import fixed_models
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.sessions.lock import SessionBusyError
from clawd.storage.postgres import database

from loopmodel import is_flush

KEY = "agent:main:main"


@pytest.fixture
def hosted(isolated_home, pg_url, monkeypatch):
    """A config whose storage is the test's database (workspace ``~/ws``, never made)."""
    monkeypatch.setenv("CLAWD_STORAGE_URL", pg_url)
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text('{"agents": {"defaults": {"workspace": "~/ws"}}}')
    return isolated_home


def _runtime(provider: ScriptedProvider, profile: str = "weak"):
    rt = build_runtime(load_config(), None)
    return dataclasses.replace(rt, models=fixed_models(provider, 200_000, profile=profile))


def _files_written(home) -> list[str]:
    """Every file under the home but caches (the tokenizer's, onnxruntime's): no
    transcript, session store, note or memory index."""
    caches = {"cache", ".cache"}
    return sorted(p.relative_to(home).as_posix() for p in home.rglob("*")
                  if p.is_file() and not caches & set(p.relative_to(home).parts)
                  and p.name != "clawd.json")


def said(events) -> str:
    return "\n".join(e.text for e in events if isinstance(e, (Notice, TurnDone)))


def test_a_conversation_and_its_memory_live_in_the_database(hosted):
    summary = "Summary: the user keeps a NAS called tern."
    provider = ScriptedProvider([
        Reply("Noted.", [tool("write", path="memory/2026-11-22.md",
                              content="- The NAS is called tern and runs Debian 12.\n",
                              append=True)]),
        "Saved.", "It is called tern.",
    ], default=lambda request: "NO_REPLY" if is_flush(request) else summary)
    rt = _runtime(provider)
    chat = Chat.open(rt, KEY)
    list(chat.handle("Remember: the NAS is called tern, and it runs Debian 12."
                     + " It sits in the hall cupboard." * 60))  # enough that a summary helps
    found = rt.memory.search("tern Debian")["results"]
    assert found and found[0]["path"] == "memory/2026-11-22.md"
    # recall: the note answers the question, and is sent with it
    list(chat.handle("What is the NAS called, the one on Debian?"))
    assert "tern" in provider.requests[-1].messages[-1].text
    list(chat.handle("/compact"))
    assert chat.session.history.summary.startswith(summary)
    ended = chat.session.record.entry["sessionId"]
    list(chat.handle("/new"))
    storage = rt.storage
    assert ended in storage.session_ids() and storage.sessions.get(KEY)["sessionId"] != ended
    saved = [p for p in storage.files.listing("memory") if p != "memory/2026-11-22.md"]
    assert saved and "tern" in storage.files.read(saved[0])  # the /new hook's session note
    assert _files_written(hosted) == []  # no transcript, store or note on disk
    assert not (hosted / "ws").exists()
    chat.session.close()
    rt.memory.close()


def test_consolidation_and_forget_change_the_rows(hosted):
    provider = ScriptedProvider(["ADD Facts | The NAS is called tern | S1"])
    rt = _runtime(provider, profile="strong")
    rt.files.write("memory/2026-11-21.md", "# 2026-11-21\n\n- The NAS is called tern.\n"
                                            "- The safe code is Quillon 7731.\n")
    report = consolidate(rt, provider)
    assert report.written and "The NAS is called tern" in rt.files.read("MEMORY.md")
    assert last_run(rt) is not None and rt.storage.records.get("consolidation")
    chat = Chat.open(rt, KEY)
    events = list(chat.handle("/memory forget --yes quillon"))
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert "Quillon" not in rt.files.read("memory/2026-11-21.md")
    assert rt.backups.versions("memory/2026-11-21.md")  # kept before the change
    found = rt.memory.search("safe code Quillon 7731", min_score=0.0)["results"]
    assert not [h for h in found if "7731" in h["snippet"]]
    assert _files_written(hosted) == []
    chat.session.close()
    rt.memory.close()


def test_a_note_another_worker_writes_is_found_without_a_watcher(hosted, pg_url):
    rt = _runtime(ScriptedProvider([]))
    rt.files.write("memory/2026-11-20.md", "- Ines arrives in Lisbon on May 14.\n")
    assert rt.memory.search("Ines Lisbon")["results"]
    other = database(pg_url).agent("main")  # another process's handle on the same rows
    other.files.append("memory/2026-11-20.md", "- The router's admin port is 8443.\n")
    rt.memory.catch_up(5.0)
    hits = rt.memory.search("router admin port 8443")["results"]
    assert hits and "8443" in hits[0]["snippet"]
    rt.memory.close()


HOLD = """
import sys, time
from clawd.storage.postgres import database
lease = database(sys.argv[1]).agent("main").hold(sys.argv[2])
print("held", flush=True)
time.sleep(60)
"""


def test_two_processes_never_hold_one_session(hosted, pg_url):
    child = subprocess.Popen([sys.executable, "-c", HOLD, pg_url, KEY],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        rt = _runtime(ScriptedProvider(["hi"]))
        with pytest.raises(SessionBusyError, match=f"pid {child.pid}"):
            rt.storage.hold(KEY, wait=0.2)
    finally:
        child.kill()
        child.wait(10)
    chat = Chat.open(rt, KEY)  # its holder gone, the session opens
    list(chat.handle("hello"))
    assert [e["role"] for e in rt.storage.transcript(chat.session.record.entry["sessionId"])
            .load().entries if e["type"] == "message"] == ["user", "assistant"]
    chat.session.close()
    rt.memory.close()


def test_the_daily_consolidation_runs_once_over_every_worker(hosted):
    import threading
    import time

    from clawd.loop.consolidate import after_session

    def slow(request):  # both sessions end while the other's run is under way
        time.sleep(0.5)
        return "ADD Facts | The NAS is called tern | S1"

    first, second = ScriptedProvider(default=slow), ScriptedProvider(default=slow)
    workers = [_runtime(first, profile="strong"), _runtime(second, profile="strong")]
    workers[0].files.write("memory/2026-11-21.md", "# 2026-11-21\n\n- The NAS is called tern.\n")
    threads = [threading.Thread(target=lambda rt=rt, p=p: list(after_session(
        rt, rt.models("local/m"), p, private=True))) for rt, p in zip(workers, (first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(first.requests) + len(second.requests) == 1  # one worker took the day
    assert "The NAS is called tern" in workers[1].files.read("MEMORY.md")
    for rt in workers:
        rt.memory.close()


def test_memory_get_reads_the_store_not_the_disk(hosted, capsys):
    """A person's agent (its files in the database) reads with ``memory_get`` the MEMORY.md
    ``write`` just put there, in a turn and through ``/mcp``'s tool, and never a stale file
    left on disk where its workspace would be (as after ``storage migrate``)."""
    from clawd.frontends.cli import main
    from clawd.frontends.mcp_server import memory_tools_for_clients, run_tool

    assert main(["users", "add", "alice"]) == 0
    capsys.readouterr()
    stale = hosted / "ws-alice" / "memory"
    stale.mkdir(parents=True)
    (stale.parent / "MEMORY.md").write_text("- Alice rides a red bike (stale).\n")
    (stale / "2026-11-20.md").write_text("- an old note on disk\n")
    provider = ScriptedProvider([
        Reply("", [tool("write", path="MEMORY.md",
                        content="# Memory\n\n- Alice rides a green Brompton.\n")]),
        Reply("", [tool("memory_get", path="MEMORY.md")]),
        Reply("", [tool("memory_get", path="memory/2026-11-20.md")]), "Green."])
    rt = dataclasses.replace(build_runtime(load_config(), "alice"),
                             models=fixed_models(provider, 200_000, profile="strong"))
    chat = Chat.open(rt, "agent:alice:main")
    list(chat.handle("What bike do I ride?"))
    got, missing = (r.messages[-1].text for r in provider.requests[2:4])
    assert "green Brompton" in got and "stale" not in got
    assert "no such memory file: memory/2026-11-20.md" in missing
    text, is_error = run_tool(memory_tools_for_clients(True), rt, "memory_get",
                              {"path": "MEMORY.md", "from": 3}, True)
    assert not is_error and text == "- Alice rides a green Brompton."
    chat.session.close()
    rt.memory.close()


def test_a_session_taken_over_refuses_this_process_every_write(pg_url):
    """Once another process took the session (its epoch moved on) while this one still
    believes it holds it, neither a patch of its entry (one statement), an update (read,
    change, write) nor a transcript line is written: each raises ``LeaseLost``."""
    import psycopg

    from clawd.storage.postgres.fencing import LeaseLost

    storage = database(pg_url).agent("main")
    storage.sessions.update(KEY, lambda e: {"sessionId": "s1", "cumulativeInputTokens": 1})
    log = storage.transcript("s1", key=KEY)
    lease = storage.hold(KEY)
    storage.sessions.patch(KEY, add={"cumulativeInputTokens": 1})  # held: written
    with psycopg.connect(pg_url, autocommit=True) as conn:  # another took it since
        conn.execute("UPDATE leases SET epoch = epoch + 1 WHERE key = %s", (KEY,))
    with pytest.raises(LeaseLost):
        storage.sessions.patch(KEY, add={"cumulativeInputTokens": 1}, model="late")
    with pytest.raises(LeaseLost):
        storage.sessions.update(KEY, lambda e: {**e, "model": "late"})
    with pytest.raises(LeaseLost):
        log.append({"type": "note", "text": "late"})
    entry = storage.sessions.get(KEY)
    assert entry["cumulativeInputTokens"] == 2 and "model" not in entry
    assert "late" not in "".join(log.raw_lines())
    lease.release()
