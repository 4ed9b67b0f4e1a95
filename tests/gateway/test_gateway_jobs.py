"""The web page's job routes: a session's jobs listed with their next run in the user's
zone, paused, resumed and deleted; a person reaches the jobs of their own agents only (any
other is a 404, as one that does not exist); odd ids and methods get JSON errors. On files
(one process) and on PostgreSQL (two workers taking the requests in turn)."""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.people import FilePeople
from clawd.storage.postgres.people import PgPeople

from conftest import make_runtime
from gateway_client import AUTH, gateway

NOW = datetime.now(timezone.utc)
LISBON = {"userTimezone": "Europe/Lisbon"}


def _store(runtime):
    """The jobs the gateway over ``runtime`` reads: the state folder's, or the database's."""
    from clawd.core.paths import state_dir
    from clawd.storage.files.jobs import FileJobs
    from clawd.storage.postgres.jobs import PgJobs

    db = getattr(runtime.storage, "db", None)
    return PgJobs(db) if db is not None else FileJobs(state_dir())


def _add(store, agent, message, *, origin=None, session="isolated", when=None, **kw):
    schedule = when or sched.at(NOW + timedelta(days=2))
    return store.add(new_job(agent, schedule, message, NOW, session=session, origin=origin,
                             **kw))


def _person_runtime(main, tmp_path, name):
    from clawd.storage.files.storage import FileStorage

    workspace = tmp_path / f"ws-{name}"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    db = getattr(main.storage, "db", None)
    storage = db.agent(name) if db is not None else FileStorage(
        name, workspace, tmp_path / "state" / "agents" / name / "sessions")
    return dataclasses.replace(main, agent_id=name, storage=storage, workspace=workspace)


def _error(answer, status):
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == status and error["message"] and "\n" not in error["message"]
    return error


def test_a_session_lists_its_jobs_and_pauses_resumes_and_deletes_them(tmp_path,
                                                                      one_or_two_workers):
    main = make_runtime(tmp_path, ScriptedProvider(default=lambda r: "ok"), settings=LISBON)
    store = _store(main)
    reminder = _add(store, "main", "Tell me to stretch", origin="agent:main:main",
                    deliver="web", when=sched.at(datetime(2031, 7, 1, 8, 0, tzinfo=timezone.utc)))
    daily = _add(store, "main", "Plan my day", session="main", name="plan",
                 when=sched.cron("0 9 * * *", "Europe/Lisbon"))
    other = _add(store, "main", "Elsewhere", origin="agent:main:other")
    with gateway(tmp_path, None, runtimes=[main]) as client:
        listed = client.get("/api/sessions/main/jobs", headers=AUTH)
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["sessionKey"] == "agent:main:main" and body["timezone"] == "Europe/Lisbon"
        jobs = {job["id"]: job for job in body["jobs"]}
        assert set(jobs) == {reminder["id"], daily["id"]}  # not the other session's
        shown = jobs[reminder["id"]]
        assert shown["message"] == "Tell me to stretch" and shown["enabled"] is True
        assert shown["nextRun"] == "2031-07-01T08:00:00Z"
        assert shown["nextRunLocal"] == "Tue 2031-07-01 09:00"  # Lisbon's summer time
        assert jobs[daily["id"]]["nextRunLocal"].endswith(" 09:00")
        assert [j["id"] for j in client.get("/api/sessions/other/jobs", headers=AUTH
                                            ).json()["jobs"]] == [other["id"]]

        paused = client.post(f"/api/jobs/{daily['id']}/pause", headers=AUTH)
        assert paused.status_code == 200, paused.text
        assert paused.json()["job"]["enabled"] is False
        again = {j["id"]: j for j in client.get("/api/sessions/main/jobs",
                                                headers=AUTH).json()["jobs"]}
        assert again[daily["id"]]["enabled"] is False and again[reminder["id"]]["enabled"]
        assert store.get(daily["id"])["enabled"] is False  # stored, for every worker
        resumed = client.post(f"/api/jobs/{daily['id']}/resume", headers=AUTH).json()["job"]
        assert resumed["enabled"] is True and resumed["nextRunLocal"].endswith(" 09:00")

        deleted = client.delete(f"/api/jobs/{reminder['id']}", headers=AUTH)
        assert deleted.status_code == 200 and deleted.json() == {"deleted": True,
                                                                 "id": reminder["id"]}
        assert [j["id"] for j in client.get("/api/sessions/main/jobs", headers=AUTH
                                            ).json()["jobs"]] == [daily["id"]]
        assert reminder["id"] not in {j["id"] for j in store.all()}
        _error(client.delete(f"/api/jobs/{reminder['id']}", headers=AUTH), 404)


def test_a_person_never_sees_nor_changes_another_persons_or_the_operators_jobs(
        tmp_path, one_or_two_workers):
    main = make_runtime(tmp_path, ScriptedProvider(default=lambda r: "ok"))
    runtimes = [main, _person_runtime(main, tmp_path, "alice"),
                _person_runtime(main, tmp_path, "bob")]
    db = getattr(main.storage, "db", None)
    people = PgPeople(db) if db is not None else FilePeople(tmp_path / "people.json")
    alice = {"Authorization": f"Bearer {people.add('alice', ('alice',))[1]}"}
    bob = {"Authorization": f"Bearer {people.add('bob', ('bob',))[1]}"}
    store = _store(main)
    operators = _add(store, "main", "the operator's", origin="agent:main:main")
    bobs = _add(store, "bob", "bob's", origin="agent:bob:main")
    alices = _add(store, "alice", "alice's", origin="agent:alice:main")
    with gateway(tmp_path, None, runtimes=runtimes, people=people) as client:
        mine = client.get("/api/sessions/main/jobs", headers=alice).json()
        assert mine["sessionKey"] == "agent:alice:main"
        assert [j["id"] for j in mine["jobs"]] == [alices["id"]]
        _error(client.get("/api/sessions/agent:bob:main/jobs", headers=alice), 403)
        _error(client.get("/api/sessions/main/jobs", params={"agent": "main"},
                          headers=alice), 403)
        for job in (operators, bobs):  # not theirs: as if it did not exist
            for method, path in (("POST", "pause"), ("POST", "resume"), ("DELETE", "")):
                url = f"/api/jobs/{job['id']}" + (f"/{path}" if path else "")
                error = _error(client.request(method, url, headers=alice), 404)
                assert error["message"] == f"no job {job['id']}"
        assert {j["id"]: j["enabled"] for j in store.all()} == {
            operators["id"]: True, bobs["id"]: True, alices["id"]: True}  # all untouched
        assert client.post(f"/api/jobs/{alices['id']}/pause", headers=alice
                           ).json()["job"]["enabled"] is False
        _error(client.post(f"/api/jobs/{alices['id']}/resume", headers=bob), 404)
        assert client.post(f"/api/jobs/{alices['id']}/resume", headers=AUTH  # the operator
                           ).json()["job"]["enabled"] is True
        assert client.delete(f"/api/jobs/{bobs['id']}", headers=bob).status_code == 200
        _error(client.get("/api/sessions/main/jobs"), 401)
        _error(client.post(f"/api/jobs/{alices['id']}/pause"), 401)


@pytest.mark.parametrize("job_id", [
    "00000000", "nojob", "..", "%2E%2E", "a%00b", "x" * 3000, "' OR 1=1 --", "%E2%80%AE",
    "heartbeat-nobody"])
def test_an_unknown_or_odd_job_id_is_a_json_404(tmp_path, job_id):
    main = make_runtime(tmp_path, ScriptedProvider(default=lambda r: "ok"))
    _add(_store(main), "main", "something")
    with gateway(tmp_path, None, runtimes=[main]) as client:
        for method, suffix in (("POST", "/pause"), ("POST", "/resume"), ("DELETE", "")):
            _error(client.request(method, f"/api/jobs/{job_id}{suffix}", headers=AUTH), 404)


def test_a_prefix_or_name_is_not_an_id_and_odd_methods_are_a_json_405(tmp_path,
                                                                       one_or_two_workers):
    main = make_runtime(tmp_path, ScriptedProvider(default=lambda r: "ok"))
    store = _store(main)
    job = _add(store, "main", "something", name="named", origin="agent:main:main")
    with gateway(tmp_path, None, runtimes=[main]) as client:
        for wanted in (job["id"][:4], "named"):
            _error(client.post(f"/api/jobs/{wanted}/pause", headers=AUTH), 404)
        for method, path in (("GET", f"/api/jobs/{job['id']}/pause"),
                             ("PUT", f"/api/jobs/{job['id']}/resume"),
                             ("GET", f"/api/jobs/{job['id']}"),
                             ("PATCH", f"/api/jobs/{job['id']}"),
                             ("POST", "/api/sessions/main/jobs"),
                             ("PUT", "/api/sessions/main/jobs")):
            error = _error(client.request(method, path, headers=AUTH), 405)
            assert error["type"] == "method_not_allowed"
        assert store.get(job["id"])["enabled"] is True


def test_a_finished_one_off_cannot_resume_and_the_heartbeat_cannot_be_deleted(tmp_path):
    main = make_runtime(tmp_path, ScriptedProvider(default=lambda r: "ok"),
                        settings={"heartbeat": {"every": "30m"}})
    store = _store(main)
    done = _add(store, "main", "ran already")
    store.update(done["id"], lambda j: {**j, "enabled": False, "nextRun": None})
    with gateway(tmp_path, None, runtimes=[main]) as client:
        assert "no occurrence left" in _error(client.post(
            f"/api/jobs/{done['id']}/resume", headers=AUTH), 400)["message"]
        for _ in range(100):  # the server makes the heartbeat's job from the config
            if "heartbeat-main" in {j["id"] for j in store.all()}:
                break
            time.sleep(0.05)
        assert "heartbeat" in _error(client.delete("/api/jobs/heartbeat-main", headers=AUTH),
                                     400)["message"]
        assert client.post("/api/jobs/heartbeat-main/pause", headers=AUTH
                           ).json()["job"]["enabled"] is False
        assert "heartbeat-main" in {j["id"] for j in store.all()}
