"""A PostgreSQL server of a test's own (pgserver's binaries in a folder of the test), so the
test can kill it as an outage does (``kill -9`` of the postmaster and its processes) and
start it again; the shared test server is never touched."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from pathlib import Path

import psutil


class OwnServer:
    """``url`` reaches it while it runs; ``kill`` and ``start`` make and end an outage."""

    def __init__(self) -> None:
        import pgserver

        # a folder of its own under /tmp: pgserver's own user must reach it
        folder = Path(tempfile.mkdtemp(prefix="clawd-pg-own-")) / "pg"
        self.server = pgserver.get_server(folder, cleanup_mode="stop")
        self.folder = folder
        self.url = self.server.get_uri()

    def kill(self) -> None:
        """Every process of the server killed at once, as a crash or an OOM kill does."""
        pid = int((self.folder / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        for process in [*postmaster.children(recursive=True), postmaster]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        psutil.wait_procs([postmaster], timeout=10)

    def start(self) -> None:
        """Started again on the same data (after crash recovery), same socket."""
        from pgserver._commands import pg_ctl

        socket_dir = self.url.split("host=")[1].split("&")[0]
        pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l",
                str(self.server.log), "start"], pgdata=self.folder,
               user=self.server.system_user, timeout=30)

    def stop(self) -> None:
        from pgserver._commands import pg_ctl

        if (self.folder / "postmaster.pid").exists():
            with contextlib.suppress(Exception):  # gone already
                pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.folder,
                       user=self.server.system_user, timeout=30)
        shutil.rmtree(self.folder.parent, ignore_errors=True)


def wait_for(condition, timeout: float = 30.0, what: str = "the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} not met in {timeout} s")

