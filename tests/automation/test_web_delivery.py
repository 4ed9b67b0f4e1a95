"""``--deliver web`` with ``clawd serve`` as a process: the run is delivered by the server,
followed live as an SSE ``notification`` and listed again after a "reload"."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

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
