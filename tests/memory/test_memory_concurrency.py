"""A search never waits for a sync's chunking or embedding: it reads the last committed
state. Closing the index (leaving a chat) is immediate; an unfinished sync resumes next time
from the embeddings it had cached."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clawd.memory import vectors
from clawd.storage.files.memory import open_file_index

from memory_fakes import FakeEmbedder, settings, write


class GatedEmbedder(FakeEmbedder):
    """Embeds documents only once ``gate`` is open; ``entered`` says a call is waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed_documents(self, texts, progress=None):
        self.entered.set()
        assert self.gate.wait(30)
        return super().embed_documents(texts, progress)


class SlowEmbedder(FakeEmbedder):
    """A few milliseconds per text, reporting each as done."""

    def embed_documents(self, texts, progress=None):
        vectors = []
        for text in texts:
            time.sleep(0.004)
            vectors.append(self._vector(text))
            self.calls.append([text])
            if progress:
                progress(1)
        return vectors


@pytest.mark.slow  # threads that wait on each other
def test_search_reads_the_committed_index_while_a_sync_embeds(tmp_path: Path):
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- The gateway runs on the Mac Studio.\n")
    embedder = GatedEmbedder()
    embedder.gate.set()
    index = open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state",
                            embedder=embedder, env={})
    index.sync()
    embedder.gate.clear()
    embedder.entered.clear()
    write(ws, "memory/2026-01-02.md", "# Jan\n\n- zanzibar trip planned\n")
    index.mark_dirty()
    index.sync_in_background()
    assert embedder.entered.wait(10)  # the sync is stuck in embedding
    started = time.monotonic()
    found = index.search("gateway Mac Studio")  # dirty, a sync running: no waiting
    assert time.monotonic() - started < 2
    assert found["results"][0]["path"] == "MEMORY.md"
    assert index.search("zanzibar")["results"] == []  # not committed yet
    embedder.gate.set()
    assert index.wait_synced(10)
    assert index.search("zanzibar")["results"][0]["path"] == "memory/2026-01-02.md"
    index.close()


@pytest.mark.slow  # threads that wait on each other
def test_closing_cancels_a_sync_at_once_and_the_next_one_resumes(tmp_path: Path):
    ws = tmp_path / "ws"
    for number in range(vectors.EMBED_STEP + 80):
        write(ws, f"memory/note-{number:03d}.md", f"# Note {number}\n\n- item {number}\n")
    embedder = SlowEmbedder()
    index = open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state",
                            embedder=embedder, env={})
    index.sync_in_background()
    deadline = time.monotonic() + 30
    while len(embedder.calls) < vectors.EMBED_STEP + 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    index.close()
    assert time.monotonic() - started < 2.0  # not the minutes a backfill takes
    assert index.wait_synced(5)  # the sync gave up at its next step
    again = SlowEmbedder()
    reopened = open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state",
                               embedder=again, env={})
    result = reopened.sync()
    assert result["indexed"] == vectors.EMBED_STEP + 80
    assert result["cached"] >= vectors.EMBED_STEP  # the first step is not embedded again
    assert len(again.calls) <= 80
    assert reopened.search("item 300")["results"][0]["path"] == "memory/note-300.md"
    reopened.close()
