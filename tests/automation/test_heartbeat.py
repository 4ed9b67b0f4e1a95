"""The heartbeat: off by default; no model request while HEARTBEAT.md holds no task, outside
activeHours, past maxRunsPerDay or beside an idle main session; HEARTBEAT_OK dropped."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import heartbeat as beat
from clawd.config import AgentDefaults
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider
from clawd.scheduler import heartbeat
from clawd.scheduler.runner import Runner
from clawd.storage.files.jobs import FileJobs

from conftest import Clock, make_runtime

pytestmark = pytest.mark.usefixtures("both_storages")
MORNING = datetime(2026, 11, 27, 9, 0, tzinfo=timezone.utc)


def setup(tmp_path, replies, heartbeat_settings, clock):
    settings = {"userTimezone": "Europe/Lisbon", "heartbeat": heartbeat_settings}
    provider = ScriptedProvider(replies)
    runtime = make_runtime(tmp_path, provider, clock=clock, settings=settings)
    store = FileJobs(tmp_path / "state")
    runner = Runner(store, lambda agent: runtime, clock)
    return runtime, provider, store, runner


def person_says(runtime, provider_reply_count=1):
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("good morning"))
    session.close()


def beat_once(runner, store, runtime, clock):
    heartbeat.sync(store, [("main", runtime.settings)], clock.now, "cli")
    return runner.tick()


def test_off_by_default(tmp_path):
    assert AgentDefaults().heartbeat.every is None
    clock = Clock(MORNING)
    runtime, provider, store, runner = setup(tmp_path, [], {}, clock)
    heartbeat.sync(store, [("main", runtime.settings)], clock.now, "cli")
    assert store.all() == []


def test_no_model_request_while_heartbeat_md_is_empty(tmp_path):
    clock = Clock(MORNING)
    runtime, provider, store, runner = setup(tmp_path, ["hi", "Water the plants!"],
                                             {"every": "30m"}, clock)
    person_says(runtime)
    asked = len(provider.requests)
    runtime.files.create("HEARTBEAT.md", "# Heartbeat\n\n<!-- tasks go here -->\n- \n")
    for _ in range(4):
        clock.advance(minutes=30)
        beat_once(runner, store, runtime, clock)
    assert len(provider.requests) == asked  # four beats, no model call
    (job,) = store.all()
    assert {r["status"] for r in store.runs(job["id"])} == {"skipped"}
    runtime.files.write("HEARTBEAT.md", "- remind me to water the plants\n")
    clock.advance(minutes=30)
    (run,) = beat_once(runner, store, runtime, clock)
    assert run["status"] == "ok", run["error"]
    assert run["reply"] == "Water the plants!"
    assert run["sessionKey"] == "agent:main:main"


def test_heartbeat_ok_is_dropped_and_limits_hold(tmp_path):
    clock = Clock(MORNING)
    runtime, provider, store, runner = setup(
        tmp_path, ["hi", "HEARTBEAT_OK", "**HEARTBEAT_OK**"],
        {"every": "1h", "maxRunsPerDay": 2, "activeHours": {"start": "08:00", "end": "22:00"}},
        clock)
    person_says(runtime)
    runtime.files.create("HEARTBEAT.md", "- check the calendar\n")
    statuses = []
    for _ in range(5):  # the first beat makes the job, due an hour later
        clock.advance(hours=1)
        statuses += [(r["status"], r["delivery"]["status"]) for r in
                     beat_once(runner, store, runtime, clock)]
    assert statuses == [("ok", "none"), ("ok", "none"), ("skipped", "none"),
                        ("skipped", "none")]
    (job,) = store.all()
    assert "maxRunsPerDay" in store.runs(job["id"])[0]["error"]


def test_a_quiet_beat_leaves_the_main_session_as_it_was(tmp_path):
    """A beat answered HEARTBEAT_OK is taken out of the history the model sees (the
    transcript keeps it, marked undone): a day of quiet beats does not fill the main
    session; a beat that says something stays."""
    clock = Clock(MORNING)
    runtime, provider, store, runner = setup(
        tmp_path, ["hi", "HEARTBEAT_OK", "The plants need water.", "Sure."], {"every": "1h"},
        clock)
    person_says(runtime)
    runtime.files.create("HEARTBEAT.md", "- check the plants\n")
    for _ in range(3):
        clock.advance(hours=1)
        beat_once(runner, store, runtime, clock)
    with Session.open(runtime, "agent:main:main") as session:
        said = [m.text for m in session.history.messages if m.role == "assistant"]
        assert said == ["hi", "The plants need water."]
        list(session.run_turn("thanks"))
        on_disk = session.transcript.load(quiet=True).entries
    sent = [m.text for m in provider.requests[-1].messages if m.role == "assistant"]
    assert "HEARTBEAT_OK" not in sent and "The plants need water." in sent
    assert any(e.get("type") == "undo" for e in on_disk)
    assert any(e.get("role") == "assistant" and "HEARTBEAT_OK" in str(e.get("content"))
               for e in on_disk)


def test_outside_active_hours_and_idle_sessions_are_skipped():
    settings = AgentDefaults.model_validate({"heartbeat": {
        "every": "1h", "activeHours": {"start": "22:00", "end": "07:00"}, "idleDays": 2}})
    tz = __import__("zoneinfo").ZoneInfo("Europe/Lisbon")
    night = datetime(2026, 11, 27, 23, 0, tzinfo=timezone.utc)
    hb = settings.heartbeat
    assert beat.skip_reason(hb, "- x", night, tz, 0, night) is None  # spans midnight
    assert "activeHours" in beat.skip_reason(hb, "- x", MORNING, tz, 0, MORNING)
    assert "idle" in beat.skip_reason(hb, "- x", night, tz, 0, night - timedelta(days=3))
    assert "idle" in beat.skip_reason(hb, "- x", night, tz, 0, None)


def test_switching_it_off_removes_the_job(tmp_path):
    clock = Clock(MORNING)
    runtime, _, store, _ = setup(tmp_path, [], {"every": "1h"}, clock)
    heartbeat.sync(store, [("main", runtime.settings)], clock.now, "cli")
    assert [j["id"] for j in store.all()] == ["heartbeat-main"]
    off = runtime.settings.model_copy(deep=True)
    off.heartbeat.every = None
    heartbeat.sync(store, [("main", off)], clock.now, "cli")
    assert store.all() == []


def test_two_workers_making_the_heartbeat_at_once_keep_one(tmp_path):
    """Both read no heartbeat job, one adds it first: the other finds it there, quietly."""
    clock = Clock(MORNING)
    runtime, _, store, _ = setup(tmp_path, [], {"every": "1h"}, clock)

    class Late:  # the second worker: read before the first one added it
        def __init__(self):
            self.first = True

        def all(self, agent_id=None):
            if self.first:
                self.first = False
                return []
            return store.all(agent_id)

        def add(self, job):
            return store.add(job)

    heartbeat.sync(store, [("main", runtime.settings)], clock.now, "cli")
    heartbeat.sync(Late(), [("main", runtime.settings)], clock.now, "cli")
    assert [j["id"] for j in store.all()] == ["heartbeat-main"]


@pytest.mark.parametrize(("text", "task"), [("", False), (None, False),
                                             ("# Tasks\n\n- [ ]\n", False),
                                             ("<!-- nothing -->", False),
                                             ("- [ ] check mail", True), ("ping Ana", True)])
def test_what_counts_as_a_task(text, task):
    assert beat.has_task(text) is task
