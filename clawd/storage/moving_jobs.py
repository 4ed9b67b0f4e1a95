"""Moving automation's jobs and runs with ``clawd storage migrate`` and ``export``.

The jobs are the state folder's, not an agent's: ``migrate_jobs`` copies ``jobs.json`` and
``runs/<jobId>.jsonl`` (every run as its last line has it) into the database's ``jobs`` and
``job_runs``, in the order the jobs were added, and reads them back to compare. A job or a
run already there with the same content is counted and left; one the database holds
differently (the server ran it on meanwhile, say) is reported and kept, so a second
migrate neither doubles a run nor undoes one. ``export_jobs`` writes them back: the jobs in
the database's order, each run file a line per run, oldest first (the form a compacted file
has), keys sorted as the files store writes them, so a round trip gives back ``jobs.json``
byte for byte and every run (a compacted run file byte for byte too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class MovedJobs:
    """What moving the jobs did (or, dry, would do)."""

    jobs: int = 0
    runs: int = 0
    unchanged: int = 0  # jobs and runs already there, the same
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        said = f"jobs: {_n(self.jobs, 'job')} ({_n(self.runs, 'run')})"
        if self.unchanged:
            said += f"; {self.unchanged} already there"
        return said + "".join(f"\n  problem: {p}" for p in self.problems)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _of(job: dict[str, Any], agents: set[str] | None) -> bool:
    return agents is None or str(job["agentId"]).lower() in agents


def migrate_jobs(source: Any, target: Any | None, agents: set[str] | None, *,
                 dry_run: bool) -> MovedJobs:
    """Copy the jobs of ``agents`` (lowercase; None: every job) and their runs from
    ``source`` (a ``FileJobs``) into ``target`` (a ``PgJobs``; None: a database with no
    schema yet, which holds nothing)."""
    moved = MovedJobs()
    there = {job["id"]: job for job in target.all()} if target is not None else {}
    new_jobs: list[dict[str, Any]] = []
    new_runs: list[dict[str, Any]] = []
    for job in source.all():
        if not _of(job, agents):
            continue
        had = there.get(job["id"])
        if had is not None and had != job:
            moved.problems.append(f"job {job['id']}: the database has another version of "
                                  f"it; kept that one and its runs")
            continue
        stored = {run["scheduledFor"]: run for run in target.history(job["id"])} if (
            target is not None and had is not None) else {}
        if had is None:
            new_jobs.append(job)
        else:
            moved.unchanged += 1
        for run in source.history(job["id"]):
            if run["scheduledFor"] not in stored:
                new_runs.append(run)
            elif stored[run["scheduledFor"]] == run:
                moved.unchanged += 1
            else:
                moved.problems.append(f"job {job['id']}: the database holds another record "
                                      f"of its run for {run['scheduledFor']}; kept it")
    moved.jobs, moved.runs = len(new_jobs), len(new_runs)
    if dry_run or target is None or not (new_jobs or new_runs):
        return moved
    target.restore(new_jobs, new_runs)
    for job in new_jobs:
        back = next((j for j in target.all(str(job["agentId"])) if j["id"] == job["id"]),
                    None)
        runs = [run for run in new_runs if run["jobId"] == job["id"]]
        if back != job or target.history(job["id"]) != runs:
            moved.problems.append(f"job {job['id']}: read back different; check the "
                                  f"database")
    return moved


def export_jobs(source: Any, state: Path, agents: set[str] | None) -> MovedJobs:
    """Write the jobs of ``agents`` (lowercase; None: every job) and their runs from
    ``source`` (a ``PgJobs``) as ``state/jobs.json`` and ``state/runs/``."""
    from clawd.storage.files.jobs import FileJobs

    moved = MovedJobs()
    jobs = [job for job in source.all() if _of(job, agents)]
    runs = [run for job in jobs for run in source.history(job["id"])]
    if jobs:
        FileJobs(state).restore(jobs, runs)
    moved.jobs, moved.runs = len(jobs), len(runs)
    return moved
