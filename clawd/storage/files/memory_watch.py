"""The embedded memory files' watcher (``sync.watch``): re-index them shortly after they
change.

A daemon thread runs ``watchfiles.watch`` over the workspace (only ``MEMORY.md`` and
``memory/**.md`` pass the filter), the ``extraPaths`` and, with session memory on, the
transcripts directory. A burst of changes is collected for ``sync.watchDebounceMs``
(1500 ms) and then marks the index dirty and syncs it, so a note written by the model is
searchable a moment later. ``stop()`` ends the thread within about a second.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawd.config import MemorySearch
from clawd.memory.sources import extra_roots, is_under
from clawd.memory.target import SyncCancelled
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE

log = logging.getLogger(__name__)


class Watcher:
    """Calls ``on_change`` (mark the index dirty and sync it) after each burst of changes."""

    def __init__(self, workspace: Path, settings: MemorySearch, sessions_dir: Path | None,
                 on_change: Callable[[], None]):
        self.settings, self.sessions_dir, self.on_change = settings, sessions_dir, on_change
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.syncs = 0  # completed syncs triggered by changes
        self.ready = threading.Event()  # set once the watch is in place
        self.workspace = workspace.resolve()
        self.extras = extra_roots(workspace, settings)

    def roots(self) -> list[Path]:
        roots = [self.workspace]
        roots += [r for r in self.extras if not is_under(self.workspace, r)]
        memory, sessions = self.settings, self.sessions_dir
        if memory.experimental.session_memory and "sessions" in memory.sources \
                and sessions is not None and sessions.is_dir():
            roots.append(sessions.resolve())
        return roots

    def _relevant(self, _change: Any, path: str) -> bool:
        p = Path(path)
        if p.suffix == ".jsonl":
            return self.sessions_dir is not None
        # A new folder counts too: a note written into it before the watch on the folder is
        # in place raises no event of its own (a race under load); the sync scans the files.
        folder = p.suffix.lower() != ".md"
        if folder and not p.is_dir():
            return False
        try:
            rel = p.relative_to(self.workspace)
        except ValueError:
            return True  # under an extra path
        parts = rel.parts
        if folder:
            return bool(parts) and parts[0] == MEMORY_DIR \
                or any(is_under(r, p) for r in self.extras)
        return rel.as_posix() == MEMORY_FILE or (len(parts) > 1 and parts[0] == MEMORY_DIR) \
            or any(is_under(r, p) for r in self.extras)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="clawd-memory-watch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            import watchfiles
        except ImportError:
            log.warning("watchfiles is not installed; memory files are not watched")
            self.ready.set()
            return
        debounce = self.settings.sync.watch_debounce_ms
        try:
            for _changes in watchfiles.watch(
                    *self.roots(), watch_filter=self._relevant, debounce=debounce,
                    step=50, stop_event=self._stop, rust_timeout=500,
                    yield_on_timeout=True, raise_interrupt=False,
                    ignore_permission_denied=True):
                # The first (empty) yield comes after rust_timeout: the watch is in place.
                self.ready.set()
                if self._stop.is_set():
                    break
                if not _changes:
                    continue
                try:
                    self.on_change()
                    self.syncs += 1
                except SyncCancelled:
                    break  # the index is closing
                except Exception as exc:  # noqa: BLE001 - the watcher must outlive a bad sync
                    log.warning("memory sync after a file change failed: %s", exc)
        except Exception as exc:  # noqa: BLE001
            log.warning("memory watcher stopped: %s", exc)
        finally:
            self.ready.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
