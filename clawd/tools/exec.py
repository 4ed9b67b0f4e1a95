"""The ``exec`` tool: run a shell command in the workspace, with approval and a timeout.

In the REPL every command is shown to the user for approval first; in scripted and one-shot
runs ``exec`` is refused unless ``tools.exec.allowInScripts`` or ``--allow-exec`` allows it.
Output (stdout and stderr together) and the exit code go back to the model; the loop caps
the size of what enters the transcript. Each command runs in its own process group, and on a
timeout or a stop of the turn (Ctrl-C, a stop over HTTP: the turn's token, looked at every
quarter second) the whole group is ended (TERM, then KILL after a grace period), so no child
it started is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import Annotated

from clawd.core.cancel import Cancelled
from clawd.core.errors import ToolError
from clawd.tools.base import Param, Tool, ToolContext, tool

MAX_TIMEOUT = 3600.0
GRACE_SECONDS = 2.0  # between TERM and KILL for a group that ignores TERM
POLL_SECONDS = 0.25  # between two looks at the turn's token while a command runs


@tool("exec", "Run a shell command in the workspace directory and return its output and exit "
      "code.")
def run_exec(ctx: ToolContext, *, command: str,
             timeout: Annotated[float | None, Param("seconds", minimum=1)] = None) -> str:
    timeout = min(timeout or ctx.settings.tools.exec.timeout_seconds, MAX_TIMEOUT)
    if not command.strip():
        raise ToolError("command is empty")
    if ctx.approve is not None:
        if not ctx.approve(command):
            raise ToolError("the user declined to run this command")
    elif not ctx.allow_exec:
        raise ToolError("exec is disabled in non-interactive runs (enable it with "
                        "--allow-exec or tools.exec.allowInScripts)")
    return _run(command, ctx, timeout)


def _run(command: str, ctx: ToolContext, timeout: float) -> str:
    process, interrupted = _start(command, ctx)
    deadline = time.monotonic() + timeout
    try:
        if interrupted:
            raise Cancelled()
        while True:
            ctx.cancel.check()
            try:
                out, _ = process.communicate(
                    timeout=min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
    except subprocess.TimeoutExpired:
        output = _decode(_end_group(process))
        raise ToolError(f"command timed out after {timeout:g}s\n{output}".rstrip()) from None
    except BaseException:  # a stop: nothing the command started outlives it
        _end_group(process)
        raise
    return f"{_decode(out).rstrip()}\n[exit code {process.returncode}]".lstrip()


def _start(command: str, ctx: ToolContext) -> tuple[subprocess.Popen, bool]:
    """Start the command; whether a Ctrl-C came while it was starting.

    A Ctrl-C that lands inside ``Popen`` (the child is already running, but no process
    object exists yet to end it with) would orphan the command, so in the main thread it is
    held back until ``Popen`` returns and then reported, to be handled like any other.
    """
    caught: list[int] = []
    hold = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not None)
    previous = signal.signal(signal.SIGINT, lambda *_: caught.append(1)) if hold else None
    try:
        process = subprocess.Popen(command, shell=True, cwd=ctx.workspace,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if hold:
            signal.signal(signal.SIGINT, previous)
    return process, bool(caught)


def _end_group(process: subprocess.Popen) -> bytes:
    """End the command's whole process group; return the output it wrote until then."""
    out = b""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, None)):
        _signal_group(process, sig)
        try:
            out, _ = process.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # a member that ignores TERM and let go of the output pipe is still in the group
    _signal_group(process, signal.SIGKILL)
    return out or b""


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    if os.name == "nt":  # no process groups to signal: end the command itself
        process.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(process.pid, sig)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def exec_tool() -> Tool:
    return run_exec
