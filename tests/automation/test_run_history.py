"""A job's run history is bounded (``automation.keepRuns``), on files and on PostgreSQL:
the newest runs and every run still needed are kept, a delivery still to be made is never
dropped, an occurrence compacted away still never runs twice, and a torn last line of a
run file is read past with one warning and nothing lost."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import runs as runlog
from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job, switched

UTC = timezone.utc
NOW = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
KEEP = 5


@pytest.fixture
def store(both_storages, tmp_path, request):
    if both_storages == "postgresql":
        from clawd.storage.postgres import database
        from clawd.storage.postgres.jobs import PgJobs

        return PgJobs(database(request.getfixturevalue("pg_url")), keep=KEEP)
    from clawd.storage.files.jobs import FileJobs

    return FileJobs(tmp_path / "state", keep=KEEP)


def minutely(store, deliver="none"):
    return store.add(new_job("main", sched.every("1m", NOW), "tick", NOW, deliver=deliver))


def run_minutes(store, job, minutes, *, start=1, outcome=None):
    """Run ``job`` once a minute (claimed, finished, its delivery tried as ``outcome``
    says for that minute: "pending" left waiting, "failed" tried once and failed)."""
    for minute in range(start, start + minutes):
        at = NOW + timedelta(minutes=minute, seconds=1)
        (claimed,) = store.claim_due(at)
        done = runlog.finished(claimed.run, "ok", at, reply=f"minute {minute}")
        what = (outcome or {}).get(minute)
        if what == "pending":
            done["delivery"] = runlog.delivery("cli")
        elif what == "failed":
            done["delivery"] = runlog.delivery("webhook:http://127.0.0.1:9/hook")
            done = runlog.sent(done, at, None, "connection refused")
        store.save_run(done)


def minute_of(run) -> int:
    return int((datetime.fromisoformat(run["scheduledFor"].replace("Z", "+00:00")) - NOW)
               / timedelta(minutes=1))


def test_the_newest_runs_are_kept_and_deliveries_still_to_make_never_dropped(store):
    job = minutely(store)
    run_minutes(store, job, 40, outcome={3: "pending", 7: "failed"})
    store.compact(job["id"])
    kept = [minute_of(run) for run in store.history(job["id"])]
    assert kept == [3, 7, 36, 37, 38, 39, 40]  # the two still to deliver, the newest five
    assert [minute_of(run) for run in store.runs(job["id"], 3)] == [40, 39, 38]
    (pending,) = [run for run in store.history(job["id"]) if minute_of(run) == 3]
    assert pending["delivery"]["status"] == "pending" and pending["reply"] == "minute 3"
    # the outbox still finds both, and once delivered they go the way of the others
    taken = store.claim_deliveries(NOW + timedelta(hours=1))
    assert sorted(minute_of(c.run) for c in taken) == [3, 7]
    for claimed in taken:
        store.save_run(runlog.sent(claimed.run, NOW + timedelta(hours=1), "m", None))
    store.compact(job["id"])
    assert [minute_of(run) for run in store.history(job["id"])] == [36, 37, 38, 39, 40]


def test_a_store_compacts_by_itself_as_runs_are_saved(store):
    job = minutely(store)
    run_minutes(store, job, 60)
    assert len(store.history(job["id"])) <= 2 * KEEP + 1
    if hasattr(store, "runs_dir"):  # on files the file is bounded too, in lines
        lines = (store.runs_dir / f"{job['id']}.jsonl").read_text().splitlines()
        assert len(lines) < 3 * KEEP + 5
        assert len({json.loads(line)["scheduledFor"] for line in lines}) >= KEEP
    else:
        assert len(store.history(job["id"])) == KEEP
    assert minute_of(store.runs(job["id"], 1)[0]) == 60


def test_an_occurrence_compacted_away_never_runs_twice(store):
    """What a claim could reach again (at or after the job's ``nextRun``) stays, past the
    bound too: with ``nextRun`` behind the runs recorded (on files, a crash between
    recording the runs and moving ``nextRun`` on), a compaction down to one run keeps
    both, and a claim neither runs one again nor records it again as missed; the older
    runs go, and no claim reaches back to them."""
    job = minutely(store)
    run_minutes(store, job, 20)
    store.keep = 1
    store.update(job["id"], lambda j: {**j, "nextRun": "2026-11-27T10:19:00Z"})
    store.compact(job["id"])
    assert [minute_of(run) for run in store.history(job["id"])] == [19, 20]
    again = store.claim_due(NOW + timedelta(minutes=20, seconds=30))
    assert again == []  # 19 and 20 are recorded still: neither runs again
    assert [run["status"] for run in store.history(job["id"])] == ["ok", "ok"]
    (next_one,) = store.claim_due(NOW + timedelta(minutes=21, seconds=1))
    assert minute_of(next_one.run) == 21
    # a pause and a resume start from the next occurrence after now, never before it
    store.update(job["id"], lambda j: switched(j, False, NOW + timedelta(minutes=22)))
    resumed = store.update(job["id"], lambda j: switched(j, True, NOW + timedelta(minutes=22)))
    assert resumed["nextRun"] > max(run["scheduledFor"] for run in store.history(job["id"]))
    seen = [run["scheduledFor"] for run in store.history(job["id"])]
    assert len(seen) == len(set(seen))


def test_kept_is_the_newest_and_the_needed():
    job = {"id": "j", "nextRun": "2026-11-27T10:09:00Z"}

    def run(minute, **more):
        at = NOW + timedelta(minutes=minute)
        return {"jobId": "j", "scheduledFor": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "status": "ok", "delivery": runlog.delivery("none"), **more}

    runs = [run(minute) for minute in range(12)]
    runs[0] = run(0, status="running")
    runs[1] = run(1, delivery={**runlog.delivery("web"), "status": "sending"})
    runs[2] = run(2, delivery={**runlog.delivery("web"), "status": "failed", "attempts": 2})
    runs[3] = run(3, delivery={**runlog.delivery("web"), "status": "failed",
                               "attempts": runlog.MAX_ATTEMPTS})  # given up: no retry
    kept = runlog.kept(list(reversed(runs)), job, keep=2)
    assert [minute_of(r) for r in kept] == [0, 1, 2, 9, 10, 11]  # 9: at nextRun


def test_a_torn_last_line_is_read_past_with_one_warning_and_nothing_is_lost(tmp_path,
                                                                         caplog):
    from clawd.storage.files.jobs import FileJobs

    store = FileJobs(tmp_path / "state", keep=KEEP)
    job = minutely(store, deliver="cli")
    run_minutes(store, job, 3)
    path = store.runs_dir / f"{job['id']}.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"jobId": "' + job["id"].encode() + b'", "scheduledFor": "2026-11-')
    with caplog.at_level(logging.WARNING):
        assert [minute_of(run) for run in store.runs(job["id"])] == [3, 2, 1]
        assert [minute_of(run) for run in store.history(job["id"])] == [1, 2, 3]
    torn = [r.getMessage() for r in caplog.records if "torn" in r.getMessage()]
    assert len(torn) == 1 and len(torn[0].splitlines()) == 1
    assert f"{path}:" in torn[0]
    (claimed,) = store.claim_due(NOW + timedelta(minutes=4, seconds=1))
    # the claim is written after the torn line, on a line of its own: it stands
    assert [(minute_of(run), run["status"]) for run in store.history(job["id"])][-1] == (
        4, "running")
    store.save_run(runlog.finished(claimed.run, "ok", NOW + timedelta(minutes=4),
                                   reply="minute 4"))
    assert [minute_of(run) for run in store.history(job["id"])] == [1, 2, 3, 4]
    assert all(run["delivery"]["status"] == "pending" for run in store.history(job["id"]))
    # the next compaction leaves the torn line out, every run in
    store.compact(job["id"])
    lines = path.read_text().splitlines()
    assert [minute_of(json.loads(line)) for line in lines] == [1, 2, 3, 4]


def test_jobs_runs_shows_the_newest_of_a_bounded_history(isolated_home, capsys, monkeypatch):
    from clawd.frontends import cli
    from clawd.storage.files.jobs import FileJobs

    monkeypatch.setenv("TZ", "UTC")
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(isolated_home / "ws"),
                                "memorySearch": {"enabled": False}}},
        "automation": {"keepRuns": 3}}))
    store = FileJobs(state, keep=3)
    job = minutely(store)
    run_minutes(store, job, 12)
    assert cli.main(["jobs", "runs", job["id"], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [minute_of(run) for run in shown][:3] == [12, 11, 10]
    assert cli.main(["jobs", "runs", job["id"], "--limit", "2", "--json"]) == 0
    assert [minute_of(run) for run in json.loads(capsys.readouterr().out)] == [12, 11]
