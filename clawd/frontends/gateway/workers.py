"""``clawd serve --workers N``: N worker processes on one listening socket.

The parent binds the socket, then forks the workers before anything opens a connection
pool or starts a thread (each worker builds its own agents, hub and pools); the kernel
hands each new connection to one of them. Several workers share sessions, turns and
sign-in counts only through the database (``storage.url``), so without one a single worker
is all there may be. The parent passes SIGTERM and Ctrl-C on to every worker (each drains
its turns as one ``clawd serve`` does) and a second signal as SIGKILL; it exits when they
all have, with the worst exit code. A worker that dies is reported in one line; the others
keep serving.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any


def listen(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def supervise(count: int, sock: socket.socket, serve: Callable[[socket.socket], int]) -> int:
    """Fork ``count`` workers, each running ``serve(sock)``; wait for them all."""
    children: list[int] = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:  # a worker: its own signals, as a lone clawd serve has
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = 1
            try:
                code = serve(sock)
            except BaseException:  # noqa: BLE001 - said, then the worker ends
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)
    signals = {"count": 0}

    def forward(sig: int, frame: Any) -> None:
        signals["count"] += 1
        for pid in children:
            with contextlib.suppress(ProcessLookupError):  # a worker already gone
                os.kill(pid, signal.SIGTERM if signals["count"] == 1 else signal.SIGKILL)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    sock.close()
    worst = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid not in children:
            continue
        children.remove(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 and not signals["count"]:
            print(f"clawd serve: worker {pid} ended ({_why(code)}); {len(children)} still "
                  f"serving", file=sys.stderr, flush=True)
        worst = max(worst, code if code > 0 else 128 - code if code < 0 else 0)
    return 0 if signals["count"] and worst in (0, 143) else worst


def _why(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit code {code}"
