"""What an operator asks a worker: ``/ready`` and ``/metrics``; and the request log's output.

``/ready`` (no token, like ``/health``) is 200 ``{"ready": true}`` while this worker can
reach its database and is not stopping, else 503 ``{"ready": false, "reason": ...}`` with
the reason ``stopping`` or ``database``, nothing more. ``/health`` says only that the process
answers; ``/ready`` is what a load balancer should send traffic by. The database is asked
``SELECT 1`` on a connection of the check's own (``Readiness``), on a thread, at most once a
``READY_CACHE_SECONDS`` (a probe storm costs one query a second) and given
``CHECK_SECONDS`` to answer; the moments it stops and starts answering are logged, once
each. With the embedded files there is no database: ready unless stopping.

``/metrics`` (the operator's token: one that reaches every agent; a person's is 403) is
``core.metrics`` in Prometheus' text format, each sample labelled with the worker's pid,
with what is read at that moment: readiness, the sessions and turns of this worker, and the
database pool's own statistics (``psycopg_pool``'s ``get_stats``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from clawd import __version__
from clawd.core.metrics import METRICS, Kind, Sample
from clawd.frontends.gateway.gatekeeper import error_body

log = logging.getLogger(__name__)

READY_CACHE_SECONDS = 1.0  # an answer is reused this long
CHECK_SECONDS = 2.0  # the database has this long to answer ``SELECT 1``
NO_STORE = {"Cache-Control": "no-store"}
EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"
# psycopg_pool's statistics that are levels, not running counts
POOL_GAUGES = frozenset({"pool_min", "pool_max", "pool_size", "pool_available",
                         "requests_waiting"})


class Readiness:
    """Whether this worker can take requests (see the module docstring)."""

    def __init__(self, url: str | None, stopping: Any):
        self.url, self.stopping = url, stopping
        self.ok, self.checked = True, -1e9  # the last answer, and when (monotonic)
        self._check: asyncio.Future[bool] | None = None
        self._conn: Any = None  # touched by one check at a time, on its thread
        self._told: bool | None = None  # what the log last said (None: nothing yet)
        self._guard = threading.Lock()

    async def state(self) -> tuple[bool, str | None]:
        """(ready, why not: ``stopping`` or ``database``)."""
        if self.stopping():
            return False, "stopping"
        if self.url is None:
            return True, None
        if time.monotonic() - self.checked >= READY_CACHE_SECONDS:
            await self._refresh()
        return (True, None) if self.ok else (False, "database")

    async def _refresh(self) -> None:
        if self._check is None or self._check.done():  # one check at a time
            self._check = asyncio.get_running_loop().run_in_executor(None, self._ask)
        try:
            self.ok = await asyncio.wait_for(asyncio.shield(self._check), CHECK_SECONDS)
        except TimeoutError:
            self.ok = False
            self._tell(False, f"no answer within {CHECK_SECONDS:g} s")
        self.checked = time.monotonic()

    def _ask(self) -> bool:
        """On a thread: ``SELECT 1`` on the check's connection (made again when lost)."""
        import psycopg

        with self._guard:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        str(self.url), autocommit=True, connect_timeout=max(2, int(CHECK_SECONDS)),
                        application_name=f"clawd ready {os.getpid()}",
                        keepalives=1, keepalives_idle=5, keepalives_interval=2,
                        keepalives_count=2, tcp_user_timeout=int(CHECK_SECONDS * 2000))
                self._conn.execute("SELECT 1")
            except psycopg.Error as exc:
                self._drop()
                self._tell(False, (str(exc).strip().splitlines() or [type(exc).__name__])[0])
                return False
        self._tell(True, "")
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _tell(self, ok: bool, why: str) -> None:
        """Log a change of answer, once."""
        if ok == self._told or (ok and self._told is None):
            return
        self._told = ok
        if ok:
            log.warning("ready again: the database answers")
        else:
            log.warning("not ready: the database does not answer (%s)", why)

    def close(self) -> None:
        if self._guard.acquire(blocking=False):  # a check stuck on the network keeps it
            try:
                self._drop()
            finally:
                self._guard.release()


async def ready(request: Request) -> Response:
    is_ready, why = await request.app.state.readiness.state()
    if is_ready:
        return JSONResponse({"ready": True}, headers=NO_STORE)
    return JSONResponse({"ready": False, "reason": why}, status_code=503, headers=NO_STORE)


async def metrics(request: Request) -> Response:
    if request.scope.get("state", {}).get("agents", False) is not None:
        return Response(error_body(403, "the metrics are the operator's: use the gateway's "
                                   "own token, not one that reaches only some agents",
                                   "forbidden"), status_code=403, media_type="application/json")
    gw = request.app.state.gateway
    is_ready, _ = await request.app.state.readiness.state()
    slots = list(gw.hub.slots.values())
    read: list[tuple[str, Kind, list[Sample]]] = [
        ("clawd_info", Kind("gauge", "This worker's version."),
         [("clawd_info", {"version": __version__}, 1.0)]),
        ("clawd_ready", Kind("gauge", "1 while /ready answers 200."),
         [("clawd_ready", {}, 1.0 if is_ready else 0.0)]),
        ("clawd_sessions_open", Kind("gauge", "Sessions this worker holds open."),
         [("clawd_sessions_open", {}, float(sum(1 for s in slots if s.chat is not None)))]),
        ("clawd_turns_running", Kind("gauge", "Turns running on this worker."),
         [("clawd_turns_running", {}, float(sum(1 for s in slots if s.running)))]),
        ("clawd_turns_queued", Kind("gauge", "Turns waiting in this worker's own queues "
                                    "(with several workers they wait in the database)."),
         [("clawd_turns_queued", {}, float(sum(len(s.queue) for s in slots)))]),
        ("process_start_time_seconds", Kind("gauge", "When this worker started (Unix time)."),
         [("process_start_time_seconds", {}, METRICS.started)]),
    ]
    read += _pool(gw.config.storage.effective_url())
    text = METRICS.render(read, pid=str(os.getpid()))
    return Response(text, media_type=EXPOSITION, headers=NO_STORE)


def _pool(url: str | None) -> list[tuple[str, Kind, list[Sample]]]:
    """The database pool's statistics (none on the embedded files)."""
    if not url:
        return []
    from clawd.storage.postgres.database import opened

    db = opened(url)
    if db is None:
        return []
    found: list[tuple[str, Kind, list[Sample]]] = []
    for name, value in sorted(db.pool.get_stats().items()):
        gauge = name in POOL_GAUGES
        metric = f"clawd_db_{name}" if gauge else f"clawd_db_{name}_total"
        kind = Kind("gauge" if gauge else "counter", f"psycopg_pool's {name}.")
        found.append((metric, kind, [(metric, {}, float(value))]))
    return found


ROUTES = [Route("/ready", ready, methods=["GET"]), Route("/metrics", metrics, methods=["GET"])]


def show_requests(stream: Any = None) -> None:
    """Write the request log (``clawd.access``, ``gatekeeper.access_line``) to ``stream``
    (stderr), each line as it is, not after the ``clawd:`` of other messages."""
    access = logging.getLogger("clawd.access")
    access.setLevel(logging.INFO)
    if not any(getattr(h, "clawd_requests", False) for h in access.handlers):
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.clawd_requests = True  # type: ignore[attr-defined]
        access.addHandler(handler)
    access.propagate = False


class LogCounter(logging.Handler):
    """Counts the warnings and errors written to clawd's log (``METRICS``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        METRICS.inc("clawd_log_messages_total", level=record.levelname.lower())


def count_log_messages() -> None:
    """Count clawd's warnings and errors from now on (once a process)."""
    root = logging.getLogger("clawd")
    if not any(isinstance(h, LogCounter) for h in root.handlers):
        root.addHandler(LogCounter())
