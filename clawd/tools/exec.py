"""The ``exec`` tool: run a shell command in the workspace, with approval and a timeout.

In the REPL every command is shown to the user for approval first; in scripted and one-shot
runs ``exec`` is refused unless ``tools.exec.allowInScripts`` or ``--allow-exec`` allows it.
Output (stdout and stderr together) and the exit code go back to the model; the loop caps
the size of what enters the transcript.
"""

from __future__ import annotations

import subprocess
from typing import Any

from clawd.errors import ToolError
from clawd.messages import ToolSpec
from clawd.tools.base import Tool, ToolContext, arg, schema

MAX_TIMEOUT = 3600.0


def run_exec(args: dict[str, Any], ctx: ToolContext) -> str:
    command = arg(args, "command", str)
    timeout = min(arg(args, "timeout", float, ctx.settings.tools.exec.timeout_seconds),
                  MAX_TIMEOUT)
    if not command.strip():
        raise ToolError("command is empty")
    if ctx.approve is not None:
        if not ctx.approve(command):
            raise ToolError("the user declined to run this command")
    elif not ctx.allow_exec:
        raise ToolError("exec is disabled in non-interactive runs (enable it with "
                        "--allow-exec or tools.exec.allowInScripts)")
    try:
        done = subprocess.run(command, shell=True, cwd=ctx.workspace, capture_output=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        output = _decode((exc.stdout or b"") + (exc.stderr or b""))
        raise ToolError(f"command timed out after {timeout:g}s\n{output}".rstrip()) from None
    output = _decode(done.stdout + done.stderr)
    return f"{output.rstrip()}\n[exit code {done.returncode}]".lstrip()


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def exec_tool() -> Tool:
    return Tool(ToolSpec("exec", "Run a shell command in the workspace directory and return "
                         "its output and exit code.",
                         schema({"command": {"type": "string"},
                                 "timeout": {"type": "number", "minimum": 1,
                                             "description": "seconds"}}, ["command"])),
                run_exec)
