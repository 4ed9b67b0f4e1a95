"""The suites every storage implementation must pass: the session store (``SessionRecords``),
the transcript log (``TranscriptLog``), the memory index (``Memory``) and the workspace files
(``WorkspaceFiles``), and one agent's storage as a whole (``AgentStorage``: its transcripts,
records, lease, what the memory index reads through it and what ``clawd doctor`` asks).

Each suite runs over ``STORES``, ``LOGS``, ``MEMORIES``, ``FILES`` and ``BACKUPS``: factories
of the implementations. Today each has one, the embedded default (``sessions.json``, JSONL
files, SQLite, a folder of Markdown files, copies under ``.clawd/history``); a second
implementation (PostgreSQL for a hosted clawd) joins by adding its factory, and must pass the
same tests unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clawd.config import MemorySearch
from clawd.core.errors import ClawdError, SandboxError
from clawd.core.messages import Message, ToolCall
from clawd.memory import open_index
from clawd.memory.interface import Memory
from clawd.sessions.interface import SessionRecords, TranscriptLog
from clawd.sessions.transcript import begin, build_history
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.memory import open_file_index
from clawd.storage.files.sessions import SessionStore
from clawd.storage.files.transcripts import Transcript
from clawd.storage.files.workspace import DiskFiles
from clawd.workspace.interface import Backups, Stat, WorkspaceFiles


def _pg(url: str) -> Any:
    """Agent ``main``'s storage in the database ``url``."""
    from clawd.storage.postgres import database

    return database(url).agent("main")


def _pg_log(url: str) -> TranscriptLog:
    log = _pg(url).transcript("s1")
    begin(log, "main", key="agent:main:main")
    return log


# Each factory takes the test's folder and, for PostgreSQL, its own database's URL.
STORES: dict[str, Callable[[Path, str | None], SessionRecords]] = {
    "json": lambda root, url: SessionStore(root / "sessions.json"),
    "postgresql": lambda root, url: _pg(url).sessions,
}
LOGS: dict[str, Callable[[Path, str | None], TranscriptLog]] = {
    "jsonl": lambda root, url: Transcript.create(root / "s1.jsonl", "main",
                                                 key="agent:main:main"),
    "postgresql": lambda root, url: _pg_log(url),
}
def _pg_memory(workspace: Path, state: Path, url: str | None) -> tuple[Memory, Any]:
    storage = _pg(url)
    return open_index("main", workspace, MemorySearch(), state,
                      sources=storage.memory_sources, files=storage.files,
                      open_store=storage.memory_index), storage.files


# memory factories: (the index, the workspace files it reads)
MEMORIES: dict[str, Callable[[Path, Path, str | None], tuple[Memory, WorkspaceFiles]]] = {
    "sqlite": lambda workspace, state, url: (
        open_file_index("main", workspace, MemorySearch(), state, state / "sessions"),
        DiskFiles(workspace)),
    "postgresql": _pg_memory,
}


def _url(request) -> str | None:
    """The test's own database when its backend is PostgreSQL."""
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else None


@pytest.fixture(params=sorted(STORES))
def store(request, tmp_path) -> SessionRecords:
    return STORES[request.param](tmp_path, _url(request))


@pytest.fixture(params=sorted(LOGS))
def log(request, tmp_path) -> TranscriptLog:
    request.node.again = lambda: LOGS[request.param](tmp_path, _url(request))
    return LOGS[request.param](tmp_path, _url(request))


KEY = "agent:main:main"
BASE = {"sessionId": "s1", "sessionFile": "s1.jsonl", "compactionCount": 0,
        "cumulativeInputTokens": 0}


def _url_of(request, backend: str) -> str | None:
    return request.getfixturevalue("pg_url") if backend == "postgresql" else None


# --- the session store -------------------------------------------------------------------------

def test_a_store_starts_empty_and_keeps_what_it_is_given(store):
    assert store.entries() == {} and store.get(KEY) is None
    made = store.update(KEY, lambda e: dict(BASE))
    assert made is not None and made["sessionId"] == "s1" and made["updatedAt"]
    assert store.get(KEY)["sessionId"] == "s1"
    assert store.get("AGENT:Main:MAIN")["sessionId"] == "s1"  # keys are case-insensitive
    assert list(store.entries()) == [KEY]


def test_a_patch_sets_adds_and_copies_against_what_is_stored(store):
    store.update(KEY, lambda e: dict(BASE))
    store.patch(KEY, add={"cumulativeInputTokens": 100}, model="local/q")
    store.patch(KEY, add={"compactionCount": 1, "cumulativeInputTokens": 50},
                copy={"memoryFlushCompactionCount": "compactionCount"})
    entry = store.get(KEY)
    assert entry["cumulativeInputTokens"] == 150 and entry["model"] == "local/q"
    assert entry["compactionCount"] == 1 and entry["memoryFlushCompactionCount"] == 1


def test_a_patch_without_base_writes_nothing_and_with_one_recreates(store):
    assert store.patch(KEY, model="x") is None and store.get(KEY) is None
    assert store.patch(KEY, base=dict(BASE), model="x")["model"] == "x"


def test_touch_false_leaves_the_last_activity(store):
    first = store.update(KEY, lambda e: dict(BASE))["updatedAt"]
    store.patch(KEY, touch=False, contextTokens=8192)
    assert store.get(KEY)["updatedAt"] == first


def test_an_update_to_none_removes_the_entry(store):
    store.update(KEY, lambda e: dict(BASE))
    store.update(KEY, lambda e: None)
    assert store.get(KEY) is None


def test_concurrent_counters_never_lose_an_update(store, request, tmp_path):
    store.update(KEY, lambda e: dict(BASE))
    backend = request.node.callspec.params["store"]
    other = STORES[backend](tmp_path, _url_of(request, backend))  # a second handle

    def bump(target: SessionRecords) -> None:
        for _ in range(25):
            target.patch(KEY, add={"cumulativeInputTokens": 1})

    threads = [threading.Thread(target=bump, args=(s,)) for s in (store, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.get(KEY)["cumulativeInputTokens"] == 50


def test_a_counter_that_is_not_a_whole_number_counts_from_zero(store):
    store.update(KEY, lambda e: {**BASE, "a": 2.5, "b": True, "c": "7", "d": -3, "e": 2**40})
    entry = store.patch(KEY, add={"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1},
                        g=4, model="m")
    assert {k: entry[k] for k in "abcdefg"} == {"a": 1, "b": 1, "c": 1, "d": -2,
                                               "e": 2**40 + 1, "f": 1, "g": 5}
    assert store.get(KEY) == entry and entry["model"] == "m"


def test_a_patch_and_a_read_then_write_update_at_once_both_count(store, request, tmp_path):
    """A patch (on PostgreSQL one statement) and an ``update`` that reads, changes and
    writes the entry, side by side from two handles: neither undoes the other."""
    store.update(KEY, lambda e: dict(BASE))
    backend = request.node.callspec.params["store"]
    other = STORES[backend](tmp_path, _url_of(request, backend))

    def patches() -> None:
        for _ in range(40):
            store.patch(KEY, add={"cumulativeInputTokens": 1})

    def updates() -> None:
        for _ in range(40):
            other.update(KEY, lambda e: {**e, "compactionCount": e["compactionCount"] + 1,
                                         "cumulativeInputTokens": e["cumulativeInputTokens"]})

    threads = [threading.Thread(target=patches), threading.Thread(target=updates)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entry = store.get(KEY)
    assert (entry["cumulativeInputTokens"], entry["compactionCount"]) == (40, 40)


# --- the transcript log ----------------------------------------------------------------------

def test_a_log_keeps_entries_in_order_with_ids_and_times(log):
    log.append({"type": "note", "text": "first"})
    log.append_message(Message.user("hello"))
    call = ToolCall("c1", "read", {"path": "a.md"})
    log.append_message(Message.assistant("", [call]))
    log.append_message(Message.tool_result(call, "alpha"))
    loaded = log.load()
    assert loaded.header is not None and loaded.header["id"] == "s1"
    kinds = [(e["type"], e.get("role")) for e in loaded.entries]
    assert kinds == [("note", None), ("message", "user"), ("message", "assistant"),
                     ("message", "toolResult")]
    assert all(e["id"] and e["timestamp"] for e in loaded.entries)
    history = build_history(loaded.entries)
    assert [m.text for m in history.messages] == ["hello", "", "alpha"]
    assert history.messages[1].tool_calls == [call]


def test_a_message_round_trips_unchanged(log):
    message = Message.assistant("partial words", aborted=True, model="local/q")
    log.append_message(message)
    (entry,) = log.load().entries
    assert Message.from_entry(entry) == message


def test_a_log_read_again_sees_what_another_handle_wrote(log, request):
    log.append_message(Message.user("one"))
    again = request.node.again()
    again.append_message(Message.user("two"))
    assert [e["content"][0]["text"] for e in log.load().entries] == ["one", "two"]


def test_a_log_numbers_its_entries_by_their_lines(log):
    log.append_message(Message.user("one"))
    log.append({"type": "note", "text": "two"})
    loaded = log.load()
    assert loaded.numbers == [2, 3]  # the header is line 1
    assert loaded.lines == 4  # as a JSONL file holds it: its last line ends with a newline


# --- the memory index --------------------------------------------------------------------------

@pytest.fixture(params=sorted(MEMORIES))
def memory(request, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    index, files = MEMORIES[request.param](workspace, tmp_path / "state", _url(request))
    files.write("memory/2026-11-20.md", "# 2026-11-20\n\n- The NAS is called tern and runs "
                "Debian 12.\n- Ines arrives in Lisbon on May 14.\n")
    yield index, files
    index.close()


def test_memory_finds_a_note_by_its_words_and_says_where(memory):
    index, _ = memory
    index.sync()
    found = index.search("tern Debian")
    assert found["results"] and found["mode"] in ("hybrid", "keyword", "vector")
    hit = found["results"][0]
    assert hit["path"] == "memory/2026-11-20.md" and hit["startLine"] <= 3 <= hit["endLine"]
    assert "tern" in hit["snippet"] and 0 < hit["score"] <= 1 and hit["source"] == "memory"


def test_memory_takes_in_a_changed_note_after_mark_dirty(memory):
    index, files = memory
    index.sync()
    files.write("memory/2026-11-21.md", "- The router's admin port is 8443.\n")
    index.mark_dirty()
    index.sync()
    assert [h["path"] for h in index.search("router admin port 8443")["results"]][:1] == [
        "memory/2026-11-21.md"]
    assert index.status()["files"] == 2


def test_memory_forgets_lines_the_edit_removes_and_keeps_the_rest(memory):
    index, files = memory
    index.sync()
    note = "memory/2026-11-20.md"
    assert any("tern" in h["snippet"] for h in index.search("tern Debian")["results"])

    def edit() -> None:  # the front end's part: line 3 leaves the note
        lines = files.read(note).splitlines(keepends=True)
        files.write(note, "".join(lines[:2] + lines[3:]))

    done = index.forget({note: {3}}, edit)
    assert done["chunks"] == 1 and "tern" not in files.read(note)
    found = index.search("tern Debian", min_score=0.0)["results"]
    assert not [h for h in found if "tern" in h["snippet"]]
    assert [h["path"] for h in index.search("Ines Lisbon May")["results"]][:1] == [
        "memory/2026-11-20.md"]


def test_memory_refuses_an_empty_query(memory):
    index, _ = memory
    with pytest.raises(ValueError):
        index.search("   ")


def test_memory_checks_itself_for_the_doctor(memory):
    index, _ = memory
    index.sync()
    checks = list(index.check())
    assert checks and all(ok for ok, _, _ in checks)


# --- the workspace files -----------------------------------------------------------------------

FILES: dict[str, Callable[[Path, str | None], WorkspaceFiles]] = {
    "disk": lambda root, url: DiskFiles(root),
    "postgresql": lambda root, url: _pg(url).files,
}


@pytest.fixture(params=sorted(FILES))
def files(request, tmp_path) -> WorkspaceFiles:
    (tmp_path / "ws").mkdir()
    return FILES[request.param](tmp_path / "ws", _url(request))


def test_workspace_files_read_what_was_written_and_nothing_else(files):
    assert files.read("MEMORY.md") is None and files.listing("memory") == []
    files.append("memory/2026-11-22.md", "# 2026-11-22\n")
    files.append("memory/2026-11-22.md", "- Ines: May 14\n")
    assert files.read("memory/2026-11-22.md") == "# 2026-11-22\n- Ines: May 14\n"
    files.write("MEMORY.md", "old")
    files.write("MEMORY.md", "new ü")
    assert files.read("MEMORY.md") == "new ü"
    files.create("memory/2026-11-22-deploy.md", "saved")
    with pytest.raises(FileExistsError):
        files.create("memory/2026-11-22-deploy.md", "never over it")
    assert files.read("memory/2026-11-22-deploy.md") == "saved"
    assert files.listing("memory") == ["memory/2026-11-22-deploy.md", "memory/2026-11-22.md"]
    assert isinstance(files.location, str) and files.location


def test_workspace_files_name_paths_one_way_and_say_what_they_are(files):
    files.append("memory/2026-11-22.md", "- café\n")
    assert files.canonical("memory/./2026-11-22.md") == "memory/2026-11-22.md"
    assert files.canonical("memory/../MEMORY.md") == "MEMORY.md"
    assert files.canonical(".") == "."
    assert files.stat("memory") == Stat("folder", 0)
    assert files.stat("memory/2026-11-22.md") == Stat("file", len("- café\n".encode()))
    assert files.stat("memory/none.md") is None
    files.write("memory/people/ines.md", "- sister\n")
    assert files.entries("memory") == ["2026-11-22.md", "people/"]
    assert files.entries(".") == ["memory/"] and files.entries("memory/none") == []
    assert files.listing("memory") == ["memory/2026-11-22.md"]  # files only


@pytest.mark.parametrize("path", ["../outside.md", "/etc/passwd", "memory/../../x.md", ""])
def test_workspace_files_refuse_paths_outside_the_workspace(files, path):
    for act in (lambda: files.read(path), lambda: files.append(path, "x"),
                lambda: files.write(path, "x"), lambda: files.create(path, "x"),
                lambda: files.canonical(path), lambda: files.stat(path),
                lambda: files.entries(path)):
        with pytest.raises(SandboxError):
            act()


# --- earlier versions of the workspace files ----------------------------------------------------

BACKUPS: dict[str, Callable[[Path, str | None], tuple[WorkspaceFiles, Backups]]] = {
    "disk": lambda root, url: (DiskFiles(root), DiskBackups(root)),
    "postgresql": lambda root, url: (_pg(url).files, _pg(url).backups),
}
T0 = datetime(2026, 11, 23, 2, 45, 12)


@pytest.fixture(params=sorted(BACKUPS))
def kept(request, tmp_path) -> tuple[WorkspaceFiles, Backups]:
    (tmp_path / "ws").mkdir()
    return BACKUPS[request.param](tmp_path / "ws", _url(request))


def test_backups_keep_a_file_as_it_was_and_put_it_back(kept):
    files, backups = kept
    assert backups.versions() == [] and isinstance(backups.location, str)
    files.write("MEMORY.md", "- Lyon\n")
    first = backups.keep("MEMORY.md", T0)
    files.write("MEMORY.md", "- Porto\n")
    second = backups.keep("MEMORY.md", T0)  # the same second: numbered after it
    files.write("MEMORY.md", "")
    assert [v.ref for v in backups.versions("memory.md")] == [first.ref, second.ref]
    assert (first.name, first.size, backups.text(first)) == ("MEMORY.md", 7, "- Lyon\n")
    assert second.stamp == "20261123-024512-2" and isinstance(backups.where(second), str)
    assert backups.find("MEMORY.md") == second and backups.find(first.ref) == first
    saved = backups.restore(first, T0 + timedelta(seconds=1))
    assert files.read("MEMORY.md") == "- Lyon\n"
    assert saved is not None and backups.text(saved) == ""  # what it held, kept first


def test_backups_keep_notes_and_name_what_is_missing(kept):
    files, backups = kept
    files.write("memory/2026-11-20.md", "- the safe code\n")
    version = backups.keep("memory/2026-11-20.md", T0)
    assert [v.name for v in backups.versions()] == ["memory/2026-11-20.md"]
    assert backups.text(backups.find("memory/2026-11-20.md")) == "- the safe code\n"
    for ref in ("SOUL.md", f"{version.name}@20000101-000000", "notes.txt"):
        with pytest.raises(ClawdError):
            backups.find(ref)


# --- one agent's storage as a whole --------------------------------------------------------------

def _files_storage(root: Path, url: str | None) -> Any:
    from clawd.storage.files.storage import FileStorage

    return FileStorage("main", root / "ws", root / "state" / "agents" / "main" / "sessions")


STORAGES: dict[str, Callable[[Path, str | None], Any]] = {
    "files": _files_storage,
    "postgresql": lambda root, url: _pg(url),
}
# a child process holding session KEY until it is killed: prints "held" once it holds it
HOLDER = """
import sys, time
from pathlib import Path
kind, where = sys.argv[1], sys.argv[2]
if kind == "files":
    from clawd.storage.files.storage import FileStorage
    root = Path(where)
    storage = FileStorage("main", root / "ws", root / "state" / "agents" / "main" / "sessions")
else:
    from clawd.storage.postgres import database
    storage = database(where).agent("main")
lease = storage.hold(sys.argv[3])
print("held", flush=True)
time.sleep(60)
"""


def storage_root(storage) -> Path:
    return storage.root


@pytest.fixture(params=sorted(STORAGES))
def storage(request, tmp_path):
    made = STORAGES[request.param](tmp_path, _url(request))
    made.root = tmp_path
    made.where = str(tmp_path) if request.param == "files" else _url(request)
    return made


def test_transcripts_are_opened_by_id_listed_and_set_aside(storage):
    assert storage.session_ids() == [] and storage.kind in ("files", "postgresql")
    for session_id in ("b2", "a1", "c3"):
        begin(storage.transcript(session_id), "main", key=f"agent:main:{session_id}")
    storage.transcript("a1").append({"type": "note", "text": "kept"})
    assert storage.session_ids() == ["a1", "b2", "c3"]
    assert storage.session_file("a1").endswith("a1.jsonl")
    said = storage.set_aside("b2")
    assert "b2" in said and storage.session_ids() == ["a1", "c3"]
    storage.set_aside("c3", purge=True)
    assert storage.session_ids() == ["a1"] and storage.transcript("c3").load().entries == []
    assert [e["text"] for e in storage.transcript("a1").load().entries] == ["kept"]


@pytest.mark.parametrize("bad", ["../a1", "a/b", "", ".hidden", "x" * 200, "a\nb"])
def test_a_session_id_is_never_a_path(storage, bad):
    with pytest.raises(ClawdError):
        storage.transcript(bad)


def test_a_claim_is_taken_once_whatever_the_number_of_takers(storage, request):
    import threading

    backend = request.node.callspec.params["storage"]
    others = [STORAGES[backend](storage_root(storage), _url_of(request, backend))
              for _ in range(4)]  # handles of their own, as other workers have
    taken: list[bool] = []
    threads = [threading.Thread(target=lambda s=s: taken.append(
        s.records.claim("consolidation-day", "2026-11-27"))) for s in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(taken) == [False, False, False, True]
    assert storage.records.claim("consolidation-day", "2026-11-28") is True  # the next day


def test_records_keep_small_json_values(storage):
    assert storage.records.get("consolidation") is None
    storage.records.put("consolidation", {"lastRunDate": "2026-11-27"})
    storage.records.put("consolidation", {"lastRunDate": "2026-11-28", "n": 2})
    assert storage.records.get("consolidation") == {"lastRunDate": "2026-11-28", "n": 2}


def test_a_rebuild_recounts_entries_from_their_transcripts(storage):
    storage.sessions.update(KEY, lambda e: {**BASE, "sessionFile": storage.session_file("s1"),
                                            "modelOverride": "local/q"})
    log = storage.transcript("s1")
    begin(log, "main", key=KEY, model="local/q")
    log.append_message(Message.user("hello there"))
    begin(storage.transcript("s2"), "main", key="agent:main:other")
    assert storage.sessions.rebuild() == (1, 1)
    entries = storage.sessions.entries()
    assert entries[KEY]["modelOverride"] == "local/q"  # what only the store knows, kept
    assert entries["agent:main:other"]["sessionId"] == "s2"


def test_a_lease_is_one_process_at_a_time_and_counted_within_one(storage, request):
    import subprocess
    import sys

    from clawd.sessions.lock import SessionBusyError

    first = storage.hold(KEY)
    again = storage.hold(KEY)  # the same process: counted
    again.release()
    backend = request.node.callspec.params["storage"]
    child = subprocess.Popen([sys.executable, "-c", HOLDER, backend, storage.where, "other"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(SessionBusyError, match=f"pid {child.pid}"):
            storage.hold("other", wait=0.3)
        first.describe(None)
    finally:
        child.kill()
        child.wait(10)
    storage.hold("other", wait=5).release()  # the holder's end lets it go
    first.release()


# --- what the memory index reads through the store ----------------------------------------------

SESSION_MEMORY = {"sources": ["memory", "sessions"], "experimental": {"sessionMemory": True}}


def _notes_and_a_transcript(storage) -> None:
    storage.files.write("MEMORY.md", "# Memory\n\n- the boat is called Heron\n")
    storage.files.write("memory/2026-11-20.md", "- tern runs Debian\n")
    storage.files.write("notes.md", "not a memory file\n")
    log = storage.transcript("s1")
    begin(log, "main", key=KEY)
    log.append_message(Message.user("Where is the harbour?"))
    log.append({"type": "note", "text": "not said"})
    log.append_message(Message.assistant("By the old   lighthouse."))


def test_memory_sources_list_and_read_the_notes_and_transcripts(storage):
    from clawd.memory.sources import read_source

    _notes_and_a_transcript(storage)
    sources = storage.memory_sources
    found = {s.key: s for s in sources.sources(MemorySearch.model_validate(SESSION_MEMORY))}
    assert sorted(found) == ["MEMORY.md", "memory/2026-11-20.md", "sessions/s1.jsonl"]
    assert [found[k].source for k in sorted(found)] == ["memory", "memory", "sessions"]
    assert all(found[k].stat().st_size > 0 for k in found)
    assert read_source(found["memory/2026-11-20.md"]) == "- tern runs Debian\n"
    # one text line per transcript line: the header, the note and the end are blank
    assert read_source(found["sessions/s1.jsonl"]).split("\n") == [
        "", "User: Where is the harbour?", "", "Assistant: By the old lighthouse.", ""]
    assert sources.read("MEMORY.md") == b"# Memory\n\n- the boat is called Heron\n"
    assert sources.read("memory/none.md") is None
    # session memory off: the notes alone
    assert [s.key for s in sources.sources(MemorySearch())] == ["MEMORY.md",
                                                                  "memory/2026-11-20.md"]


def test_a_transcript_is_found_through_the_store_at_its_own_lines(storage, tmp_path):
    from memory_fakes import FakeEmbedder

    _notes_and_a_transcript(storage)
    index = open_index("main", tmp_path / "ws", MemorySearch.model_validate(
        {**SESSION_MEMORY, "sync": {"watch": False}}), tmp_path / "index",
        sources=storage.memory_sources, files=storage.files,
        open_store=storage.memory_index, embedder=FakeEmbedder())
    try:
        index.sync()
        hits = [h for h in index.search("harbour lighthouse")["results"]
                if h["source"] == "sessions"]
        assert hits and hits[0]["path"] == "sessions/s1.jsonl"
        assert hits[0]["startLine"] <= 2 and hits[0]["endLine"] >= 4
    finally:
        index.close()


def test_a_store_says_whether_its_workspace_exists_and_checks_itself(storage):
    storage.files.write("MEMORY.md", "# Memory\n")  # a folder is made by its first file
    assert storage.workspace_exists() is True
    lines = list(storage.check("rw"))
    assert lines and all(ok for ok, _, _ in lines)
    assert any(what == "workspace" for _, what, _ in lines)
    (_, _, said), = [line for line in storage.check("ro") if line[1] == "workspace"]
    assert "workspaceAccess 'ro'" in said


def test_the_files_workspace_does_not_exist_until_it_is_made(tmp_path):
    storage = _files_storage(tmp_path, None)
    assert storage.workspace_exists() is False
    [(ok, what, said)] = list(storage.check("rw"))
    assert (ok, what) == (False, "workspace") and "does not exist" in said


IDLE_HOLDER = """
import sys, time
from clawd.storage.postgres import database
db = database(sys.argv[1])
storage = db.agent("main")
lease = storage.hold(sys.argv[2])
lease.describe(time.time() + 30)  # a gateway worker, its turn done: it lets go in 30 s
lease.describe(None)  # a turn starts: nothing written, its gateway_turns row says so
print(db.worker, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("storage", ["postgresql"], indirect=True)
def test_a_waiter_is_told_when_an_idle_holder_lets_go_and_not_while_a_turn_runs(storage):
    """A gateway worker writes when it lets go of an idle session; a turn starting writes
    nothing (one write a turn, not two): its queued turn's row tells the waiter a turn runs,
    and then no time is promised."""
    import subprocess
    import sys

    import psycopg

    from clawd.sessions.lock import SessionBusyError

    child = subprocess.Popen([sys.executable, "-c", IDLE_HOLDER, storage.where, "idle"],
                             stdout=subprocess.PIPE, text=True)
    try:
        worker = child.stdout.readline().strip()
        with pytest.raises(SessionBusyError, match=r"lets it go at .* \(in (29|30) s\)"):
            storage.hold("idle", wait=0)
        with psycopg.connect(storage.where, autocommit=True) as conn:
            conn.execute("INSERT INTO gateway_turns (turn_id, agent_id, key, text_hash, worker, "
                         "state) SELECT 't1', agent_id, key, '', %s, 'running' FROM leases",
                         (worker,))
        with pytest.raises(SessionBusyError) as busy:
            storage.hold("idle", wait=0)
        assert "lets it go" not in str(busy.value) and f"pid {child.pid}" in str(busy.value)
    finally:
        child.kill()
        child.wait(10)
