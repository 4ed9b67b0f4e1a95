"""``clawd serve --workers N``: N worker processes on one listening socket, kept at N.

The parent binds the socket, then forks the workers before anything opens a connection
pool or starts a thread (each worker builds its own agents, hub and pools); the kernel
hands each new connection to one of them. Several workers share sessions, turns and
sign-in counts only through the database (``storage.url``), so without one a single worker
is all there may be.

The parent is a supervisor: a worker that ends while the parent is not stopping (killed,
crashed, or stopped on its own with SIGTERM) is started again in its place, after
``FIRST_BACKOFF`` seconds, doubling with each death in a row up to ``MAX_BACKOFF``; a worker
that stayed up ``STEADY_SECONDS`` starts the count again. Each death is one line (which
worker, its pid, its exit code or signal, when its successor starts), each restart one
more (the new pid). A worker that ends with exit code 2 could not start for a reason a
restart does not change (its configuration) and is not started again. The parent passes
SIGTERM and Ctrl-C on to every worker (each drains its turns as one ``clawd serve`` does)
and a second signal as SIGKILL; no worker is started once it is stopping; it exits when
they all have, with the worst exit code of that stop.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

FIRST_BACKOFF = 1.0  # seconds before a dead worker's first successor starts
MAX_BACKOFF = 30.0  # the longest wait between restarts of one worker
STEADY_SECONDS = 60.0  # a worker up this long: its next death waits FIRST_BACKOFF again
CONFIG_ERROR = 2  # a worker's exit code for "cannot start" (``clawd``'s ConfigError)
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on. Made as TCP by name: asyncio turns
    Nagle's algorithm off only on sockets whose protocol says TCP, and without that a reply
    written in two parts waits for the client's delayed acknowledgement (40 ms a response)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@dataclass
class Worker:
    """One of the N places: its process now (pid 0: none, one is due at ``due``)."""

    number: int
    pid: int = 0
    started: float = 0.0
    backoff: float = FIRST_BACKOFF
    due: float | None = None  # when its next process starts (None: it runs, or never)


def supervise(count: int, sock: socket.socket, serve: Callable[[socket.socket], int], *,
              first_backoff: float = FIRST_BACKOFF, max_backoff: float = MAX_BACKOFF,
              steady: float = STEADY_SECONDS) -> int:
    """Keep ``count`` workers running ``serve(sock)`` until a signal stops them all."""
    return Supervisor(count, sock, serve, first_backoff, max_backoff, steady).run()


class Supervisor:
    """See the module docstring."""

    def __init__(self, count: int, sock: socket.socket, serve: Callable[[socket.socket], int],
                 first_backoff: float, max_backoff: float, steady: float):
        self.sock, self.serve = sock, serve
        self.first, self.most, self.steady = first_backoff, max_backoff, steady
        self.workers = [Worker(n + 1, backoff=first_backoff) for n in range(count)]
        self.signals = 0
        self.worst = 0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)

    def run(self) -> int:
        old = {sig: signal.signal(sig, self._signal) for sig in SIGNALS}
        previous_fd = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        try:
            for worker in self.workers:
                self._start(worker)
            while any(w.pid for w in self.workers) or (
                    not self.signals and any(w.due is not None for w in self.workers)):
                self._reap()
                if not self.signals:
                    self._start_due()
                self._sleep()
        finally:
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in old.items():
                signal.signal(sig, handler)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self.sock.close()
        if not self.signals:  # every worker ended for good without being asked to
            return self.worst or 1
        return 0 if self.worst in (0, 143) else self.worst

    # --- signals ----------------------------------------------------------------------------

    def _signal(self, sig: int, frame: Any) -> None:
        if sig == signal.SIGCHLD:
            return  # the wakeup fd has woken the loop: it reaps
        self.signals += 1
        for worker in self.workers:
            worker.due = None  # nothing starts any more
            if worker.pid:
                with contextlib.suppress(ProcessLookupError):  # already gone
                    os.kill(worker.pid, signal.SIGTERM if self.signals == 1 else signal.SIGKILL)

    def _sleep(self) -> None:
        """Until a signal (a worker ended, or we are told to stop) or the next start."""
        if self.signals or not any(w.due is not None for w in self.workers):
            timeout: float | None = 1.0  # a lost wakeup costs a second at most
        else:
            due = min(w.due for w in self.workers if w.due is not None)
            timeout = max(0.0, min(1.0, due - time.monotonic()))
        with contextlib.suppress(InterruptedError):
            ready, _, _ = select.select([self._wake_r], [], [], timeout)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 512):
                        pass

    # --- workers ----------------------------------------------------------------------------

    def _start(self, worker: Worker) -> None:
        """Fork ``worker``'s process; the parent's signals are held meanwhile, so none is
        forwarded before the new pid is known, and none reaches the child's Python code
        before it has its own handlers."""
        worker.due = None
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            if self.signals:  # told to stop just now: nothing starts
                return
            pid = os.fork()
            if pid == 0:
                self._child()  # never returns
            worker.pid, worker.started = pid, time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)

    def _child(self) -> None:
        """In the worker: its own signals, as a lone ``clawd serve`` has; then serve."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            os.close(self._wake_r)
            os.close(self._wake_w)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
            code = self.serve(self.sock)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - said, then the worker ends
            code = _said(exc)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _reap(self) -> None:
        """Every worker that has ended: said in one line, its successor planned."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            worker = next((w for w in self.workers if w.pid == pid), None)
            if worker is not None:
                self._ended(worker, os.waitstatus_to_exitcode(status))

    def _ended(self, worker: Worker, code: int) -> None:
        pid, worker.pid = worker.pid, 0
        now = time.monotonic()
        if self.signals:  # stopping: the exit codes of this stop are the parent's
            self.worst = max(self.worst, _status(code))
            return
        serving = sum(1 for w in self.workers if w.pid)
        said = f"worker {worker.number} (pid {pid}) ended ({_why(code)}); {serving} still serving"
        if code == CONFIG_ERROR:
            self.worst = max(self.worst, code)
            _say(f"{said}; not started again (it could not start: see above)")
            return
        if now - worker.started >= self.steady:
            worker.backoff = self.first
        wait = worker.backoff
        worker.backoff = min(worker.backoff * 2, self.most)
        worker.due = now + wait
        at = datetime.now().astimezone().timestamp() + wait
        _say(f"{said}; a new worker {worker.number} starts in {wait:g} s (at "
             f"{datetime.fromtimestamp(at).astimezone().isoformat(timespec='seconds')})")

    def _start_due(self) -> None:
        now = time.monotonic()
        for worker in self.workers:
            if worker.due is not None and worker.due <= now:
                self._start(worker)
                if worker.pid:
                    _say(f"worker {worker.number} started again (pid {worker.pid})")


def _said(exc: BaseException) -> int:
    """A worker's exit code for ``exc``, told in one line (``clawd``'s own errors, as the
    command line tells them) or as a traceback (a bug)."""
    from clawd.core.errors import ClawdError, ConfigError

    if isinstance(exc, ClawdError):
        print(f"clawd: {exc}", file=sys.stderr)
        return CONFIG_ERROR if isinstance(exc, ConfigError) else 1
    if isinstance(exc, KeyboardInterrupt):
        return 130
    traceback.print_exc()
    return 1


def _say(text: str) -> None:
    stamp = datetime.now().astimezone().isoformat(timespec="milliseconds")
    print(f"{stamp} clawd serve: {text}", file=sys.stderr, flush=True)


def _status(code: int) -> int:
    """An exit code as a shell shows it (a signal N: 128 + N)."""
    return code if code >= 0 else 128 - code


def _why(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"signal {-code}, {name}"
    return f"exit code {code}"
