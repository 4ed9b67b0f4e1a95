"""``exec`` ends the command's whole process group on a timeout and on Ctrl-C (real processes:
an orphaned ``sleep`` must not survive)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawd.config import AgentDefaults
from clawd.core.errors import ToolError
from clawd.tools import exec as exec_module
from clawd.tools.exec import run_exec

from conftest import ctrl_c_as_in_a_terminal, disk_tool_context

pytestmark = [pytest.mark.slow,  # starts processes and signals them
              pytest.mark.skipif(os.name == "nt", reason="process groups are POSIX")]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _gone_soon(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _pid_from(path: Path, seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} never got a pid")


@pytest.fixture
def ctx(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    return disk_tool_context(ws, AgentDefaults(workspace=str(ws)), allow_exec=True)


@pytest.mark.parametrize("ignores_term", [False, True])
def test_timeout_ends_the_background_child(ctx, monkeypatch, ignores_term):
    monkeypatch.setattr(exec_module, "GRACE_SECONDS", 0.3)
    sleeper = "(trap '' TERM; exec sleep 30)" if ignores_term else "sleep 30"
    command = f"{sleeper} & echo $! > child.pid; echo started; wait"
    start = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 1s") as raised:
        run_exec({"command": command, "timeout": 1}, ctx)
    assert "started" in str(raised.value)  # the output so far is kept
    assert time.monotonic() - start < 10
    pid = _pid_from(ctx.workspace / "child.pid")
    try:
        assert _gone_soon(pid), f"sleep {pid} outlived the timeout"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


CHILD = """
import sys
from pathlib import Path
from clawd.config import AgentDefaults
from clawd.tools.base import ToolContext
from clawd.tools.exec import run_exec

ws = Path(sys.argv[1])
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.workspace import DiskFiles
ctx = ToolContext(ws, AgentDefaults(workspace=str(ws)), allow_exec=True, files=DiskFiles(ws),
                  backups=DiskBackups(ws))
try:
    run_exec({"command": "sleep 30 & echo $! > child.pid; wait", "timeout": 60}, ctx)
except KeyboardInterrupt:
    (ws / "interrupted").write_text("yes")
"""


def test_ctrl_c_ends_the_background_child(ctx):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ctx.workspace)],
                            preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        pid = _pid_from(ctx.workspace / "child.pid")
        assert _alive(pid)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers to clawd's process
        assert proc.wait(20) == 0
        assert (ctx.workspace / "interrupted").exists()
        try:
            assert _gone_soon(pid), f"sleep {pid} outlived Ctrl-C"
        finally:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_stop_from_another_thread_ends_the_command(ctx):
    """The turn's token (a stop over HTTP) is looked at while the command runs: the command
    and its background child end at once, not at the command's own end."""
    import threading

    from clawd.core.cancel import Cancelled

    pid_file = ctx.workspace / "child.pid"
    threading.Thread(target=lambda: (_pid_from(pid_file), ctx.cancel.cancel()),
                     daemon=True).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        run_exec({"command": "sleep 30 & echo $! > child.pid; wait", "timeout": 60}, ctx)
    assert time.monotonic() - start < 10
    pid = _pid_from(pid_file)
    try:
        assert _gone_soon(pid), f"sleep {pid} outlived the stop"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
