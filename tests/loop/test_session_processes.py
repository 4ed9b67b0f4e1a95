"""Two real processes on one session: counters add up, the transcript never interleaves, a
busy session is named with its holder's pid, and a crashed holder never blocks."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawd.core.messages import Usage
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider
from clawd.sessions import lock as session_lock

from conftest import make_runtime

pytestmark = pytest.mark.slow  # starts processes

KEY = "agent:main:main"

# A child clawd process: runs real Session turns on the shared state under tmp_path.
CHILD = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from conftest import make_runtime
from clawd.loop.session import Session
from clawd.core.messages import Usage
from clawd.providers.scripted import Reply, ScriptedProvider

tmp, name, turns = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def slow(request):
    time.sleep(0.05)  # widen any window two writers could interleave in
    return Reply(f"reply from {name}", usage=Usage(input_tokens=100, output_tokens=10))

provider = ScriptedProvider(default=slow)
session = Session.open(make_runtime(tmp, provider), "agent:main:main")
(tmp / f"{name}.ready").write_text("1")
seen = []
for i in range(turns):
    seen.append(len(session.history.messages))
    list(session.run_turn(f"{name} message {i}"))
(tmp / f"{name}.json").write_text(json.dumps(
    {"history_before": seen, "sent": [len(r.messages) for r in provider.requests]}))
hold = float(sys.argv[5]) if len(sys.argv) > 5 else 0
time.sleep(hold)
"""


def _child(tmp_path: Path, name: str, turns: int, hold: float = 0) -> subprocess.Popen:
    tests = str(Path(__file__).parents[1])
    return subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), name, str(turns),
                             tests, str(hold)], stderr=subprocess.PIPE)


def _wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def _first_session(tmp_path: Path) -> Path:
    """One turn in this process, then the session is let go (as a finished process would)."""
    provider = ScriptedProvider([Reply("hello", usage=Usage(input_tokens=100, output_tokens=10))])
    with Session.open(make_runtime(tmp_path, provider), KEY) as session:
        list(session.run_turn("first"))
    return session.transcript.path


HOLD = r"""
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from conftest import make_runtime
from clawd.providers.scripted import ScriptedProvider
from clawd.sessions.lock import SessionBusyError
runtime = make_runtime(Path(sys.argv[1]), ScriptedProvider())
try:
    runtime.storage.hold("agent:main:main", wait=0).release()
    print("free")
except SessionBusyError:
    print("busy")
"""


def _seen_by_another_process(tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path),
                           str(Path(__file__).parents[1])], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_session_is_held_from_open_to_close_and_not_by_its_constructor(tmp_path):
    """``Session.open`` takes the lease; the end of its ``with`` block lets it go at once
    (no collector involved, the object still referenced); a Session that failed to open
    holds nothing."""
    runtime = make_runtime(tmp_path, ScriptedProvider(default="hi"))
    with Session.open(runtime, KEY) as session:
        assert _seen_by_another_process(tmp_path) == "busy"
    assert _seen_by_another_process(tmp_path) == "free"
    session.close()  # a second close does nothing
    tiny = make_runtime(tmp_path, ScriptedProvider(default="hi"), window=100)
    with pytest.raises(Exception, match="window"):
        Session.open(tiny, KEY)  # the fixed layers do not fit: refused after the lease
    assert _seen_by_another_process(tmp_path) == "free"


def test_a_session_never_closed_is_let_go_when_collected_with_a_warning(tmp_path):
    session = Session.open(make_runtime(tmp_path, ScriptedProvider(default="hi")), KEY)
    assert _seen_by_another_process(tmp_path) == "busy"
    with pytest.warns(ResourceWarning, match="was not closed"):
        del session
        gc.collect()
    assert _seen_by_another_process(tmp_path) == "free"


def test_two_processes_add_up_and_never_interleave(tmp_path):
    transcript = _first_session(tmp_path)
    procs = [_child(tmp_path, name, 3) for name in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    store = json.loads((tmp_path / "state/agents/main/sessions/sessions.json").read_text())
    entry = store[KEY]
    assert entry["cumulativeInputTokens"] == 700  # 100 here + 3 turns × 100 in each process
    assert entry["cumulativeOutputTokens"] == 70
    assert entry["inputTokens"] == 100 and entry["totalTokens"] == 100  # the latest turn
    lines = [json.loads(line) for line in transcript.read_text().splitlines()[1:]]
    roles = [line["role"] for line in lines]
    assert roles == ["user", "assistant"] * 7  # never user, user, assistant, assistant
    for user, reply in zip(lines[::2], lines[1::2]):
        asked = user["content"][0]["text"]
        expected = "hello" if asked == "first" else f"reply from {asked.split()[0]}"
        assert reply["content"][0]["text"] == expected
    for name in ("a", "b"):
        seen = json.loads((tmp_path / f"{name}.json").read_text())
        # every request carried everything on disk before it, the other process's replies too
        assert seen["sent"] == [n + 1 for n in seen["history_before"]]
        assert seen["history_before"][0] in (2, 8)


def test_a_busy_session_names_its_holder_and_a_crashed_one_blocks_nobody(tmp_path,
                                                                           monkeypatch):
    _first_session(tmp_path)
    holder = _child(tmp_path, "holder", 0, hold=60)
    try:
        _wait_for(tmp_path / "holder.ready")
        monkeypatch.setattr(session_lock, "WAIT_SECONDS", 0.3)
        runtime = make_runtime(tmp_path, ScriptedProvider(default="hi"))
        with pytest.raises(session_lock.SessionBusyError) as busy:
            Session.open(runtime, KEY)
        message = str(busy.value)
        assert "\n" not in message and f"pid {holder.pid}" in message
        assert "agent:main:main" in message
        holder.send_signal(signal.SIGKILL)  # a crash: no clean-up runs
        holder.wait(10)
        start = time.monotonic()
        session = Session.open(runtime, KEY)  # the kernel dropped the dead holder's lock
        assert time.monotonic() - start < 1
        assert session.history.messages[0].text == "first"
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_second_process_waits_briefly_for_the_first(tmp_path):
    _first_session(tmp_path)
    first = _child(tmp_path, "a", 1, hold=1.0)  # keeps the session a second after its turn
    _wait_for(tmp_path / "a.ready")
    second = _child(tmp_path, "b", 1)
    for proc in (first, second):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    b = json.loads((tmp_path / "b.json").read_text())
    assert b["history_before"] == [4]  # it waited, then saw the first process's turn


BUMP = r"""
import sys
from pathlib import Path
from clawd.storage.files.sessions import SessionStore
store = SessionStore(Path(sys.argv[1]))
store.update("agent:main:main", lambda e: {**e, "cumulativeInputTokens":
                                           e["cumulativeInputTokens"] + 1000,
                                           "compactionCount": e["compactionCount"] + 1})
"""


def test_counters_are_added_to_what_is_on_disk(tmp_path):
    """Another process adds to the entry while this Session is open (a rebuild, a resume):
    the Session's next update adds to that instead of writing its stale copy back."""
    provider = ScriptedProvider(default=Reply("ok", usage=Usage(input_tokens=100,
                                                                 output_tokens=10)))
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("one"))
    store_path = session.store.path
    subprocess.run([sys.executable, "-c", BUMP, str(store_path)], check=True, timeout=60)
    list(session.run_turn("two"))
    entry = json.loads(store_path.read_text())[KEY]
    assert entry["cumulativeInputTokens"] == 1200
    assert entry["compactionCount"] == 1


def test_an_entry_deleted_under_a_running_session_comes_back(tmp_path):
    provider = ScriptedProvider(default=Reply("ok", usage=Usage(input_tokens=100,
                                                                 output_tokens=10)))
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("one"))
    os.remove(session.store.path)
    list(session.run_turn("two"))
    entry = json.loads(session.store.path.read_text())[KEY]
    assert entry["sessionId"] == session.entry["sessionId"]
    assert entry["cumulativeInputTokens"] >= 200


def test_a_session_in_use_is_not_deleted_under_its_holder(tmp_path):
    from clawd.storage.session_admin import delete, resolve

    transcript = _first_session(tmp_path)
    holder = _child(tmp_path, "holder", 0, hold=60)
    try:
        _wait_for(tmp_path / "holder.ready")
        storage = make_runtime(tmp_path, ScriptedProvider()).storage
        row = resolve(storage, "main", "main")
        with pytest.raises(session_lock.SessionBusyError, match=f"pid {holder.pid}.*leave"):
            delete(storage, row, purge=True)
        assert transcript.exists() and storage.sessions.get(KEY) is not None
    finally:
        holder.kill()
        holder.wait(10)
