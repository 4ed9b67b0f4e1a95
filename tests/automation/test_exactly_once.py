"""Each occurrence runs once, with real processes: ``clawd serve`` killed with SIGKILL and
started again around the due times on files, and two PostgreSQL workers with ``clawd jobs
tick`` runs beside them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from conftest import drop_database, fresh_database, write_local_config
from fakeserver import FakeServer, openai_stream
from gateway_client import TOKEN, free_port, start_serve

pytestmark = pytest.mark.slow
JOBS = 6


def slow_model(seconds: float):
    """The stand-in model: answers ``done: <message>`` after ``seconds``."""
    def answer(request):
        time.sleep(seconds)
        said = request.json()["messages"][-1]["content"]
        text = said if isinstance(said, str) else " ".join(p.get("text", "") for p in said)
        return openai_stream(f"done: {text}")
    return answer


def setup(home, model_url, storage_url=None):
    write_local_config(home, model_url)
    path = home / ".clawd" / "clawd.json"
    config = json.loads(path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "shutdownGraceSeconds": 1}
    config["automation"] = {"tickSeconds": 0.2}
    path.write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    if storage_url:
        env["CLAWD_STORAGE_URL"] = storage_url
    return env, port


def clawd(env, *args):
    return subprocess.run([sys.executable, "-m", "clawd", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def add_jobs(env, first_in: float, apart: float) -> list[str]:
    """``JOBS`` one-off jobs ``apart`` seconds apart, the first ``first_in`` seconds on,
    written to the store the processes use."""
    from clawd.automation import schedule as sched
    from clawd.automation.jobs import new_job

    if env.get("CLAWD_STORAGE_URL"):
        from clawd.storage.postgres import database
        from clawd.storage.postgres.jobs import PgJobs

        store = PgJobs(database(env["CLAWD_STORAGE_URL"]))
    else:
        from pathlib import Path

        from clawd.storage.files.jobs import FileJobs

        store = FileJobs(Path(env["CLAWD_HOME"]))
    now = datetime.now(timezone.utc)
    start = now + timedelta(seconds=first_in)
    return [store.add(new_job("main", sched.at(start + timedelta(seconds=n * apart)),
                              f"job number {n}", now, deliver="none"))["id"]
            for n in range(JOBS)]


def runs_of(env, job_id):
    shown = clawd(env, "jobs", "runs", job_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def wait_all_ran(env, ids, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = {job: runs_of(env, job) for job in ids}
        if all(r and r[0]["status"] != "running" for r in runs.values()):
            return runs
        time.sleep(0.5)
    return {job: runs_of(env, job) for job in ids}


def asked(model) -> Counter:
    """How many times the model was sent each job's message."""
    seen: Counter = Counter()
    for request in model.requests:
        said = request.json()["messages"][-1]["content"]
        text = said if isinstance(said, str) else " ".join(p.get("text", "") for p in said)
        seen[text] += 1
    return seen


def stop(child):
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()


def test_killed_and_restarted_around_the_due_times_each_occurrence_runs_once(tmp_path):
    with FakeServer() as model:
        model.default("POST", "/v1/chat/completions", slow_model(1.0))
        env, port = setup(tmp_path, model.url)
        ids = add_jobs(env, first_in=4, apart=1.0)
        child, _ = start_serve(env, port)
        time.sleep(max(0.0, 5.5 - 0))  # the first runs are under way
        child.send_signal(signal.SIGKILL)
        child.communicate()
        ticked = clawd(env, "jobs", "tick")  # a tick between the two servers
        child, _ = start_serve(env, port)
        try:
            runs = wait_all_ran(env, ids)
        finally:
            stop(child)
        seen = asked(model)
    assert ticked.returncode in (0, 1), ticked.stderr
    for n, job in enumerate(ids):
        assert len(runs[job]) == 1, runs[job]  # one record of its one occurrence
        assert seen[f"job number {n}"] <= 1
    ran = [runs[job][0] for job in ids]
    # a run the kill cut short stays recorded (never run again); all the others ran
    assert sum(run["status"] == "ok" for run in ran) >= JOBS - 1
    assert sum(seen.values()) >= JOBS - 1


def test_two_postgresql_workers_and_a_tick_beside_them_run_each_occurrence_once(tmp_path):
    url = fresh_database()
    try:
        with FakeServer() as model:
            model.default("POST", "/v1/chat/completions", slow_model(0.3))
            env, port = setup(tmp_path, model.url, url)
            ids = add_jobs(env, first_in=4, apart=0.5)
            child, _ = start_serve(env, port, ["--workers", "2"])
            ticks = []
            try:
                deadline = time.monotonic() + 9
                while time.monotonic() < deadline:
                    ticks.append(subprocess.Popen(
                        [sys.executable, "-m", "clawd", "jobs", "tick"], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
                    time.sleep(0.7)
                errors = [tick.communicate(timeout=60)[1] for tick in ticks]
                runs = wait_all_ran(env, ids)
            finally:
                stop(child)
            seen = asked(model)
    finally:
        drop_database(url)
    for n, job in enumerate(ids):
        assert [r["status"] for r in runs[job]] == ["ok"], runs[job]
        assert seen[f"job number {n}"] == 1
    assert len(errors) >= 10 and not any("Traceback" in e for e in errors), errors
