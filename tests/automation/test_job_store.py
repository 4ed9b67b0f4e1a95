"""The job store's contract, on files and on PostgreSQL alike: jobs kept and changed, due
runs claimed once per occurrence, missed ones recorded, deliveries taken once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import runs as runlog
from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job, public_job, public_run
from clawd.core.errors import ClawdError

UTC = timezone.utc
NOW = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


@pytest.fixture
def store(both_storages, tmp_path, request):
    if both_storages == "postgresql":
        from clawd.storage.postgres import database
        from clawd.storage.postgres.jobs import PgJobs

        return PgJobs(database(request.getfixturevalue("pg_url")))
    from clawd.storage.files.jobs import FileJobs

    return FileJobs(tmp_path / "state")


def hourly(store, **more):
    return store.add(new_job("main", sched.every("1h", NOW), "stretch", NOW, **more))


def test_jobs_are_added_listed_changed_and_removed(store):
    job = hourly(store, name="stretch", deliver="web")
    other = store.add(new_job("work", sched.at(NOW + timedelta(hours=2)), "call", NOW))
    assert [j["id"] for j in store.all()] == [job["id"], other["id"]]
    assert [j["id"] for j in store.all("WORK")] == [other["id"]]
    assert store.get(job["id"][:5])["id"] == job["id"] and store.get("stretch") == job
    assert public_job(job) == {"id": job["id"], "name": "stretch", "schedule": {
        "kind": "every", "everyMs": 3_600_000, "anchor": "2026-11-27T11:00:00Z"},
        "nextRun": "2026-11-27T11:00:00Z", "session": "isolated", "deliver": "web",
        "enabled": True}
    paused = store.update(job["id"], lambda j: {**j, "enabled": False})
    assert store.get(job["id"])["enabled"] is False and paused["enabled"] is False
    store.remove(job["id"])
    with pytest.raises(ClawdError):
        store.get(job["id"])


def test_a_due_occurrence_is_claimed_once(store):
    job = hourly(store, deliver="cli")
    assert store.claim_due(NOW + timedelta(minutes=59)) == []
    at = NOW + timedelta(hours=1, seconds=2)
    (claimed,) = store.claim_due(at)
    assert claimed.run["scheduledFor"] == "2026-11-27T11:00:00Z"
    assert claimed.run["status"] == "running"
    assert claimed.run["sessionKey"] == f"agent:main:cron:{job['id']}"
    assert store.claim_due(at) == [] and store.claim_due(at + timedelta(minutes=3)) == []
    assert store.get(job["id"])["nextRun"] == "2026-11-27T12:00:00Z"
    done = runlog.finished(claimed.run, "ok", at, reply="time to stretch")
    store.save_run(done)
    (run,) = store.runs(job["id"])
    assert public_run(run) == {"scheduledFor": "2026-11-27T11:00:00Z",
                               "startedAt": "2026-11-27T11:00:02Z", "status": "ok",
                               "delivery": run["delivery"], "sessionKey": claimed.run[
                                   "sessionKey"], "reply": "time to stretch"}
    assert run["delivery"]["status"] == "pending" and run["delivery"]["target"] == "cli"


def test_an_occurrence_already_recorded_is_not_claimed_again(store):
    """A claim whose job did not move on (a crash between the two writes on files) finds
    the run recorded and does not run it again."""
    job = hourly(store)
    (claimed,) = store.claim_due(NOW + timedelta(hours=1))
    store.update(job["id"], lambda j: {**j, "nextRun": claimed.run["scheduledFor"]})
    assert store.claim_due(NOW + timedelta(hours=1, minutes=1)) == []
    assert len(store.runs(job["id"])) == 1


def test_missed_runs_are_recorded_and_the_policy_decides_the_catch_up(store):
    once = hourly(store)
    skip = hourly(store, missed="skip")
    later = NOW + timedelta(hours=4, minutes=30)  # 11:00 … 14:00 due, 30 min late
    claimed = store.claim_due(later)
    assert [(c.job["id"], c.run["scheduledFor"], c.run.get("late")) for c in claimed] == [
        (once["id"], "2026-11-27T14:00:00Z", True)]
    assert [r["status"] for r in store.runs(once["id"])] == ["running"] + ["missed"] * 3
    assert [r["status"] for r in store.runs(skip["id"])] == ["missed"] * 4
    assert store.get(skip["id"])["nextRun"] == "2026-11-27T15:00:00Z"


def test_a_one_off_is_done_after_its_run(store):
    job = store.add(new_job("main", sched.at(NOW + timedelta(minutes=20)), "stretch", NOW))
    (claimed,) = store.claim_due(NOW + timedelta(minutes=20))
    stored = store.get(job["id"])
    assert stored["nextRun"] is None and stored["enabled"] is False and claimed.run


def test_run_now_is_keyed_by_its_time(store):
    job = hourly(store)
    assert store.claim_now(job["id"], NOW).run["manual"] is True
    assert store.claim_now(job["id"], NOW) is None
    with pytest.raises(ClawdError):
        store.claim_now("nope", NOW)


def test_a_delivery_is_taken_by_one_sender_and_retried_after_a_failure(store):
    job = hourly(store, deliver="webhook:http://127.0.0.1:9/hook")
    (claimed,) = store.claim_due(NOW + timedelta(hours=1))
    store.save_run(runlog.finished(claimed.run, "ok", NOW, reply="hi"))
    at = NOW + timedelta(hours=1, seconds=5)
    (taken,) = store.claim_deliveries(at)
    assert taken.job["id"] == job["id"] and store.claim_deliveries(at) == []
    store.save_run(runlog.sent(taken.run, at, None, "connection refused"))
    assert store.claim_deliveries(at + timedelta(seconds=10)) == []  # not before its retry
    (again,) = store.claim_deliveries(at + timedelta(seconds=31))
    store.save_run(runlog.sent(again.run, at, "msg-1", None))
    (run,) = store.runs(job["id"])
    assert run["delivery"]["status"] == "delivered" and run["delivery"]["messageId"] == "msg-1"
    assert run["delivery"]["attempts"] == 2 and run["reply"] == "hi"
    assert store.claim_deliveries(at + timedelta(hours=1)) == []


def test_only_the_agents_asked_for_are_claimed(store):
    hourly(store)
    assert store.claim_due(NOW + timedelta(hours=1), agents={"work"}) == []
    assert len(store.claim_due(NOW + timedelta(hours=1), agents={"main"})) == 1


def test_failures_in_a_row_tell_the_owner_then_pause_the_job():
    job = new_job("main", sched.every("1h", NOW), "x", NOW)
    told = []
    for _ in range(10):
        job, notice = runlog.ended(job, "error")
        told.append(notice is not None)
    assert told.index(True) == 2 and told[-1] and job["enabled"] is False
    assert runlog.ended(job, "ok")[0]["failures"] == 0


def test_a_run_left_running_by_a_process_that_is_gone_is_closed_not_run_again(store):
    import socket
    import subprocess
    import sys

    job = hourly(store)
    (claimed,) = store.claim_due(NOW + timedelta(hours=1))
    assert store.interrupted(NOW) == []  # its process (this one) is alive
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    dead = (f"{socket.gethostname()}:{gone}" if hasattr(store, "runs_dir")
            else "clawd gone:1")
    store.save_run({**claimed.run, "worker": dead})
    (closed,) = store.interrupted(NOW)
    assert closed["status"] == "error" and "interrupted" in closed["error"]
    assert store.claim_due(NOW + timedelta(hours=1, minutes=1)) == []
    assert [r["status"] for r in store.runs(job["id"])] == ["error"]
