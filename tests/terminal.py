"""clawd in a real pseudo-terminal, for what only a terminal shows (the REPL's waiting line,
its status line, completion as the keys arrive): ``Terminal`` starts ``python -m clawd ARGS``
on a pty of a given size, answers the cursor-position queries a terminal answers, sends keys
and waits for text to appear in what it has drawn so far."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>]|\r")


def plain(data: bytes) -> str:
    """What was drawn, as text: escape sequences and carriage returns removed."""
    return ANSI.sub("", data.decode("utf-8", "replace"))


class Terminal:
    def __init__(self, *args: str, columns: int = 100, rows: int = 30,
                 env: dict[str, str] | None = None):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns),
                       "LINES": str(rows), **(env or {})}
        environment.pop("NO_COLOR", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "clawd", *args], stdin=slave,
                                     stdout=slave, stderr=slave, env=environment,
                                     start_new_session=True)
        os.close(slave)
        self.output = b""

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def read(self, seconds: float = 0.1) -> None:
        """Take in what the program drew in the next ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the program exited
                return
            if not chunk:
                return
            self.output += chunk
            for _ in range(chunk.count(b"\x1b[6n")):  # where is the cursor? (as a terminal
                self.send("\x1b[1;1R")                # answers: prompt-toolkit asks)

    def expect(self, pattern: str, timeout: float = 20.0, *, since: int = 0) -> re.Match[str]:
        """Wait until ``pattern`` (a regular expression) is in the plain output (of what
        came after ``since`` bytes of it)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if found := re.search(pattern, plain(self.output[since:])):
                return found
            self.read(0.05)
        raise AssertionError(f"{pattern!r} never appeared; the terminal showed:\n"
                             f"{plain(self.output)[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)
