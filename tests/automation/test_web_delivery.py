"""``--deliver web`` with ``clawd serve`` as a process: the run is delivered by the server,
followed live as an SSE ``notification`` and listed again after a "reload"."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

import httpx
import pytest
from test_exactly_once import runs_of, setup, stop

from fakeserver import FakeServer, openai_stream
from gateway_client import AUTH, start_serve

pytestmark = pytest.mark.slow


def test_a_web_reminder_is_followed_live_and_listed_after_a_reload(tmp_path):
    with FakeServer() as model:
        model.default("POST", "/v1/chat/completions", lambda r: openai_stream("Stretch now!"))
        env, port = setup(tmp_path, model.url)
        child, url = start_serve(env, port)
        try:
            from pathlib import Path

            from clawd.automation import schedule as sched
            from clawd.automation.jobs import new_job
            from clawd.storage.files.jobs import FileJobs

            now = datetime.now(timezone.utc)
            job = FileJobs(Path(env["CLAWD_HOME"])).add(new_job(
                "main", sched.at(now + timedelta(seconds=3)), "remind me to stretch", now,
                deliver="web", name="stretch"))
            seen = []
            with httpx.stream("GET", f"{url}/api/notifications", headers={
                    **AUTH, "Accept": "text/event-stream"}, timeout=60) as stream:
                event = None
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        event = line.removeprefix("event: ")
                    elif line.startswith("data: ") and event == "notification":
                        seen.append(json.loads(line.removeprefix("data: ")))
                        break
            listed = httpx.get(f"{url}/api/notifications", headers=AUTH, timeout=10).json()
            (run,) = runs_of(env, job["id"])
        finally:
            stop(child)
    assert seen[0]["jobId"] == job["id"] and seen[0]["text"] == "Stretch now!"
    assert [n["text"] for n in listed["notifications"]] == ["Stretch now!"]
    assert run["status"] == "ok" and run["delivery"]["status"] == "delivered"
    assert run["delivery"]["messageId"].startswith("web:")


def _sse(url: str, headers: dict, seconds: float = 4.0) -> list[dict]:
    """The ``notification`` events a page following ``url`` gets within ``seconds``."""
    seen, event = [], None
    try:
        with httpx.stream("GET", url, headers={**headers, "Accept": "text/event-stream"},
                          timeout=seconds) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "notification":
                    seen.append(json.loads(line.removeprefix("data: ")))
    except httpx.ReadTimeout:  # nothing more came: the stream only sleeps between looks
        pass
    return seen


def test_a_web_reminder_reaches_only_the_page_of_its_persons_agent(tmp_path):
    """Two people (``clawd users``), each with an agent of their own, each with a ``web``
    reminder: each sees their own, as an SSE ``notification`` and in the list a reload
    reads, never the other's; asking for the other's agent is a 403, and so is the
    operator's."""
    from pathlib import Path

    from test_exactly_once import clawd, slow_model

    from clawd.automation import schedule as sched
    from clawd.automation.jobs import new_job
    from clawd.storage.files.jobs import FileJobs

    with FakeServer() as model:
        model.default("POST", "/v1/chat/completions", slow_model(0.0))
        env, port = setup(tmp_path, model.url)
        tokens = {}
        for name in ("alice", "bob"):
            made = clawd(env, "users", "add", name)
            assert made.returncode == 0, made.stderr
            tokens[name] = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
        child, url = start_serve(env, port)
        try:
            now = datetime.now(timezone.utc)
            store = FileJobs(Path(env["CLAWD_HOME"]))
            jobs = {name: store.add(new_job(name, sched.at(now + timedelta(seconds=2)),
                                            f"remind {name}", now, deliver="web",
                                            name=f"{name}'s"))
                    for name in ("alice", "bob")}
            deadline = datetime.now(timezone.utc) + timedelta(seconds=60)
            while datetime.now(timezone.utc) < deadline and not all(
                    (runs := runs_of(env, job["id"])) and runs[0]["delivery"]["status"]
                    == "delivered" for job in jobs.values()):
                time.sleep(0.5)
            since = {"since": "2000-01-01T00:00:00Z"}
            listed = {name: httpx.get(f"{url}/api/notifications", headers=tokens[name],
                                      timeout=10) for name in tokens}
            followed = {name: _sse(f"{url}/api/notifications?{urlencode(since)}",
                                   tokens[name]) for name in tokens}
            asked = {(name, agent): httpx.get(f"{url}/api/notifications", params={
                "agent": agent, **since}, headers=tokens[name], timeout=10).status_code
                for name in tokens for agent in ("alice", "bob", "main")}
            operator = httpx.get(f"{url}/api/notifications", params={"agent": "bob"},
                                 headers=AUTH, timeout=10).json()
        finally:
            stop(child)
    for name, other in (("alice", "bob"), ("bob", "alice")):
        assert listed[name].status_code == 200, listed[name].text
        body = listed[name].json()
        assert body["agent"] == name
        assert [n["jobId"] for n in body["notifications"]] == [jobs[name]["id"]]
        assert body["notifications"][0]["text"] == f"done: remind {name}"
        assert [n["jobId"] for n in followed[name]] == [jobs[name]["id"]]
        assert asked[(name, name)] == 200
        assert asked[(name, other)] == 403 and asked[(name, "main")] == 403
    assert [n["jobId"] for n in operator["notifications"]] == [jobs["bob"]["id"]]
