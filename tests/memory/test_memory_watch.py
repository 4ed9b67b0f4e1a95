"""The watcher re-indexes memory files shortly after they change."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write


def wait_for(condition, timeout: float = 30.0) -> bool:
    """Poll until ``condition()`` holds (the deadline only guards against hanging)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow  # a real file watcher and its debounce
def test_watcher_picks_up_a_new_file(tmp_path: Path):
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\nnothing yet\n")
    index = open_file_index("main", ws, settings(sync={"watchDebounceMs": 100}, fallback="none"),
                            tmp_path / "state", embedder=FakeEmbedder())
    index.sync()
    index.start_watcher()
    try:
        assert index.status()["watching"]
        watcher = index._watcher
        assert watcher.ready.wait(30)
        # memory/ does not exist yet: the folder and the note appear together, and under load
        # the note lands before the watch on the new folder is in place (only the folder's
        # own event reports it).
        write(ws, "memory/2025-03-01.md", "# March\n\n- the axolotl tank needs a heater\n")
        write(ws, "notes.txt", "not a memory file")
        # The file's creation and its content can arrive as two bursts: wait for the text.
        assert wait_for(lambda: index._watcher.syncs >= 1 and any(
            "axolotl" in row.text for row in index.store.get_chunks(range(1, 100)).values()
            if row.path == "memory/2025-03-01.md"))
        assert "notes.txt" not in index.store.files()
        assert wait_for(lambda: index.dirty is False)
        result = index.search("axolotl heater")
        assert result["results"][0]["path"] == "memory/2025-03-01.md"
    finally:
        index.close()
    # closing the index ends the watch: no watcher left, its thread gone
    assert index._watcher is None
    assert not any(t.name == "clawd-memory-watch" and t.is_alive()
                   for t in threading.enumerate())
    assert watcher._thread is None


def test_watch_off_starts_nothing(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    index = open_file_index("main", ws, settings(sync={"watch": False}, fallback="none"),
                            tmp_path / "state", embedder=FakeEmbedder())
    index.start_watcher()
    assert index.status()["watching"] is False
    index.close()
