"""Where jobs and their runs are kept (docs/automation.md): ``JobStore``, on files or PostgreSQL.

A job is a JSON object (``automation.jobs``); a run is keyed by (job id, ``scheduledFor``),
so no occurrence is ever claimed twice. ``claim_due`` is the one way a run starts: under the
store's lock (files) or in one transaction over rows taken ``FOR UPDATE SKIP LOCKED``
(PostgreSQL), each due job's run is recorded as ``running`` and its ``nextRun`` moved on
before anything runs; a process killed after that leaves the run recorded, never repeated.
A job's history is bounded (``automation.keepRuns``, ``automation.runs.kept``): an older
run is dropped only once its occurrence is before the job's ``nextRun``, which no claim
reaches back past, and its delivery is done with.

The files are ``storage.files.jobs`` (``FileJobs``), the rows ``storage.postgres.jobs``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from clawd.automation.runs import Claimed

Change = Callable[[dict[str, Any]], dict[str, Any]]
INTERRUPTED = "interrupted: the process running it stopped before it ended"


class JobStore(Protocol):
    location: str

    def add(self, job: dict[str, Any]) -> dict[str, Any]: ...

    def all(self, agent_id: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, wanted: str) -> dict[str, Any]:
        """The job ``wanted`` names (an id, a unique prefix of one, or a name)."""
        ...

    def update(self, job_id: str, change: Change) -> dict[str, Any]: ...

    def remove(self, job_id: str) -> dict[str, Any]:
        """Remove a job and its runs."""
        ...

    def claim_due(self, now: datetime, agents: set[str] | None = None,
                  limit: int | None = None) -> list[Claimed]:
        """Claim due jobs' runs (agents: only those of these agents, lowercase), at most
        ``limit`` (a runner claims one at a time: a crash then cuts short one run only)."""
        ...

    def claim_now(self, job_id: str, now: datetime) -> Claimed | None:
        """A run of ``job_id`` at ``now`` (``clawd jobs run``); None if one is recorded."""
        ...

    def interrupted(self, now: datetime) -> list[dict[str, Any]]:
        """Close the runs left ``running`` by a process that is gone (killed, crashed) as
        ``error`` ("interrupted"): recorded, never run again; the runs so closed."""
        ...

    def save_run(self, run: dict[str, Any]) -> None:
        """Store ``run`` (keyed by its ``jobId`` and ``scheduledFor``) as it now is."""
        ...

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """A job's runs, newest ``scheduledFor`` first."""
        ...

    def history(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of ``job_id`` kept, oldest ``scheduledFor`` first."""
        ...

    def compact(self, job_id: str) -> int:
        """Cut ``job_id``'s history to what the bound keeps (``automation.runs.kept``: the
        newest ``automation.keepRuns`` and every run still needed); the runs dropped. A
        store also does it by itself as runs are saved."""
        ...

    def claim_deliveries(self, now: datetime, agents: set[str] | None = None,
                         kinds: frozenset[str] | None = None) -> list[Claimed]:
        """Take the runs whose delivery is due (``runs.deliverable``) for sending (kinds:
        only to targets of these kinds, ``web``, ``webhook``, ``cli``)."""
        ...
