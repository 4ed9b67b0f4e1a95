"""``JobStore`` on files (``storage.jobs``): ``<state>/jobs.json`` holds the jobs (replaced
whole, under ``jobs.json.lock``, as ``sessions.json`` is) and ``<state>/runs/<jobId>.jsonl``
each job's runs, a line per change of a run (the last line of a ``scheduledFor`` is the
run); the run is appended before ``jobs.json`` moves on, so a crash between the two finds the
claim and does not run again. A torn last line (a write cut short) is skipped with a
warning, and the next line starts on a line of its own.

A run file is compacted under the same lock: when the lines it could lose number
``automation.keepRuns`` or more (or it has a torn line), it is written again beside itself
and renamed over itself, a line per run the bound keeps (``automation.runs.kept``). That is
done when a run is saved, against the ``nextRun`` on disk, never inside a claim whose new
``nextRun`` is not written yet. Each job and run is written with its keys sorted, as
``clawd storage export`` writes what the database gives back (whose ``jsonb`` keeps no key
order), so a files home moved there and back comes back byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from clawd.automation import runs as runlog
from clawd.automation.jobs import find
from clawd.automation.runs import Claimed
from clawd.core.errors import ClawdError
from clawd.storage.files.jsondoc import locked, read_json, write_private
from clawd.storage.jobs import INTERRUPTED, Change

log = logging.getLogger(__name__)
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # who claimed a run
_TOLD: set[tuple[str, int]] = set()  # torn lines warned of (file, line number)


class FileJobs:
    """``JobStore`` as ``jobs.json`` and ``runs/<jobId>.jsonl`` in the state folder."""

    def __init__(self, state: Path, keep: int = runlog.KEEP_RUNS):
        self.path = state / "jobs.json"
        self.runs_dir = state / "runs"
        self.location = str(self.path)
        self.keep = keep  # runs kept per job besides those still needed

    # --- jobs ---

    def add(self, job: dict[str, Any]) -> dict[str, Any]:
        with self._changing() as jobs:
            if job["id"] in jobs:
                raise ClawdError(f"there is a job {job['id']} already")
            jobs[job["id"]] = job
        return job

    def all(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        jobs = list(self._read().values())  # in the order they were added
        return [j for j in jobs if agent_id is None
                or str(j["agentId"]).lower() == agent_id.lower()]

    def get(self, wanted: str) -> dict[str, Any]:
        return find(self.all(), wanted)

    def update(self, job_id: str, change: Change) -> dict[str, Any]:
        with self._changing() as jobs:
            if job_id not in jobs:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            jobs[job_id] = change(jobs[job_id])
            return jobs[job_id]

    def remove(self, job_id: str) -> dict[str, Any]:
        with self._changing() as jobs:
            job = jobs.pop(job_id, None)
            if job is None:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            with contextlib.suppress(FileNotFoundError):
                self._runs_path(job_id).unlink()
        return job

    # --- runs ---

    def claim_due(self, now: datetime, agents: set[str] | None = None,
                  limit: int | None = None) -> list[Claimed]:
        from clawd.automation.zones import parse_iso

        claimed: list[Claimed] = []
        with self._changing() as jobs:
            for job_id, job in sorted(jobs.items(), key=lambda item: str(item[1].get(
                    "nextRun"))):
                if limit is not None and len(claimed) >= limit:
                    break
                if (not job.get("enabled") or not job.get("nextRun")
                        or parse_iso(job["nextRun"]) > now
                        or agents is not None and str(job["agentId"]).lower() not in agents):
                    continue
                run, missed, jobs[job_id] = runlog.claim(job, now,
                                                         set(self._latest(job_id)))
                if run is not None:
                    run["worker"] = WORKER
                for line in [*missed, *([run] if run else [])]:
                    self._append(line)
                if run is not None:
                    claimed.append(Claimed(jobs[job_id], run))
        return claimed

    def claim_now(self, job_id: str, now: datetime) -> Claimed | None:
        with self._changing() as jobs:
            if job_id not in jobs:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            run = runlog.new_run(jobs[job_id], now, now, manual=True)
            if run["scheduledFor"] in self._latest(job_id):
                return None
            run["worker"] = WORKER
            self._append(run)
            return Claimed(jobs[job_id], run)

    def save_run(self, run: dict[str, Any]) -> None:
        with self._changing() as jobs:
            self._append(run)
            if run["jobId"] in jobs:  # as on disk: this changes no job
                self._compact(run["jobId"], jobs[run["jobId"]], force=False)

    def compact(self, job_id: str) -> int:
        """Cut ``job_id``'s history to what the bound keeps now; the runs dropped."""
        with self._changing() as jobs:
            if job_id not in jobs:
                raise ClawdError(f"no job {job_id} (clawd jobs list)")
            return self._compact(job_id, jobs[job_id], force=True)

    def interrupted(self, now: datetime) -> list[dict[str, Any]]:
        closed = []
        with self._changing() as jobs:
            for job_id in sorted(jobs):
                for run in self._latest(job_id).values():
                    if run.get("status") == "running" and _gone(str(run.get("worker") or "")):
                        run = runlog.finished(run, "error", now, error=INTERRUPTED)
                        self._append(run)
                        closed.append(run)
        return closed

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        latest = self._latest(job_id)
        return [latest[key] for key in sorted(latest, reverse=True)][:limit]

    def history(self, job_id: str) -> list[dict[str, Any]]:
        """Every run of ``job_id`` the file holds, oldest ``scheduledFor`` first."""
        latest = self._latest(job_id)
        return [latest[key] for key in sorted(latest)]

    def restore(self, jobs: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
        """Add ``jobs`` (in this order, after those there) with their ``runs``, each run
        file written whole, a line per run (``clawd storage export``); a job there already
        is a ``ClawdError`` and nothing is written. A job with no runs has no file."""
        with self._changing() as there:
            if clash := [job["id"] for job in jobs if job["id"] in there]:
                raise ClawdError(f"{self.path} has the jobs {', '.join(clash)} already; "
                                 f"export into a new folder")
            for job in jobs:
                there[job["id"]] = job
                if its := [run for run in runs if run["jobId"] == job["id"]]:
                    self._rewrite(job["id"], its)

    def claim_deliveries(self, now: datetime, agents: set[str] | None = None,
                         kinds: frozenset[str] | None = None) -> list[Claimed]:
        taken = []
        with self._changing() as jobs:
            for job_id, job in sorted(jobs.items()):
                if agents is not None and str(job["agentId"]).lower() not in agents:
                    continue
                for run in self._latest(job_id).values():
                    if runlog.deliverable(run, now) and (
                            kinds is None or _kind(run) in kinds):
                        run = runlog.sending(run, now)
                        self._append(run)
                        taken.append(Claimed(job, run))
        return taken

    # --- the files ---

    def _runs_path(self, job_id: str) -> Path:
        return self.runs_dir / f"{job_id}.jsonl"

    def _latest(self, job_id: str) -> dict[str, dict[str, Any]]:
        """Each run of ``job_id`` as its last line says, by ``scheduledFor``."""
        return self._scan(job_id)[0]

    def _scan(self, job_id: str) -> tuple[dict[str, dict[str, Any]], int, int]:
        """(each run by ``scheduledFor``, the file's lines, its torn lines)."""
        found: dict[str, dict[str, Any]] = {}
        path = self._runs_path(job_id)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return found, 0, 0
        lines = text.splitlines()
        torn = 0
        for number, line in enumerate(lines, start=1):
            try:
                run = json.loads(line)
            except ValueError:  # torn by a crash: the claim before it stands
                torn += 1
                if (str(path), number) not in _TOLD:
                    _TOLD.add((str(path), number))
                    log.warning("%s:%d: skipped a torn line (a write cut short); the runs "
                                "before and after it stand", path, number)
                continue
            if isinstance(run, dict) and "scheduledFor" in run:
                found[run["scheduledFor"]] = run
        return found, len(lines), torn

    def _compact(self, job_id: str, job: dict[str, Any], *, force: bool) -> int:
        """Under the lock: the run file cut to what ``runlog.kept`` keeps, when it could lose
        ``keep`` lines or more, or has a torn one (``force``: whenever it could lose any)."""
        found, lines, torn = self._scan(job_id)
        kept = runlog.kept(list(found.values()), job, self.keep)
        if lines - len(kept) >= (1 if force else max(self.keep, 1)) or torn:
            self._rewrite(job_id, kept)
        return len(found) - len(kept)

    def _append(self, run: dict[str, Any]) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._runs_path(run["jobId"]), os.O_RDWR | os.O_CREAT | os.O_APPEND,
                     0o600)
        with os.fdopen(fd, "a+b") as out:
            size = os.fstat(fd).st_size
            after_torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            out.write(("\n" if after_torn else "").encode() + _line(run).encode())
            out.flush()
            os.fsync(out.fileno())

    def _rewrite(self, job_id: str, runs: list[dict[str, Any]]) -> None:
        """``runs`` as the whole of ``job_id``'s file, oldest first, a line each: written
        beside it and renamed over it, so a reader finds the old file or the new one."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        ordered = sorted(runs, key=lambda run: str(run["scheduledFor"]))
        write_private(self._runs_path(job_id), "".join(_line(run) for run in ordered),
                      sync=True)

    def _read(self) -> dict[str, dict[str, Any]]:
        data = read_json(self.path)
        return data.get("jobs", {}) if isinstance(data, dict) else {}

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, dict[str, Any]]]:
        with locked(self.path):
            jobs = self._read()
            before = json.dumps(jobs, sort_keys=True)
            yield jobs
            if json.dumps(jobs, sort_keys=True) == before:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_private(self.path, json.dumps({"version": 1, "jobs": {
                job_id: _sorted(job) for job_id, job in jobs.items()}}, indent=2,
                ensure_ascii=False) + "\n", sync=True)


def _sorted(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with its keys (and those of the objects in it) in sorted order."""
    return dict(json.loads(json.dumps(value, sort_keys=True)))


def _line(run: dict[str, Any]) -> str:
    return json.dumps(run, ensure_ascii=False, sort_keys=True) + "\n"


def _gone(worker: str) -> bool:
    """Whether the process ``host:pid`` is known to be gone (on this host only)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _kind(run: dict[str, Any]) -> str:
    return str((run.get("delivery") or {}).get("target") or "none").split(":", 1)[0]
