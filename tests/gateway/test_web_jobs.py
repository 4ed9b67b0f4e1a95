"""The page's panel of the open session's jobs, in the system's Chromium: the reminders set
in its chat and the jobs that run in it, with their next run in the user's zone; Pause,
Resume and Delete change what the server keeps. Screenshots are kept in tests/artifacts/."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.automation.zones import parse_iso, user_zone

from webchat import idle, send, shot, texts

pytestmark = pytest.mark.slow  # a browser and a server process


def _store(served):
    """The jobs ``clawd serve`` keeps: its state folder's, or its database's."""
    if served.storage_url:
        from clawd.storage.postgres import database
        from clawd.storage.postgres.jobs import PgJobs

        return PgJobs(database(served.storage_url))
    from clawd.storage.files.jobs import FileJobs

    return FileJobs(served.home / ".clawd")


def _rows(page):
    return texts(page, "#jobs-list .job")


def reminding(body, words):
    """The stand-in model: sets a reminder in two hours with the tool, then confirms."""
    if body["messages"][-1]["role"] == "tool":
        return "Done: I'll remind you in two hours."
    return [{"id": "call-1", "name": "schedule", "arguments": {
        "action": "add", "at": "in 2 hours", "message": "Tell the user to stretch."}}]


def test_the_panel_lists_the_sessions_jobs_and_pauses_resumes_and_deletes_them(
        web, stand_in):
    store = _store(web.served)
    for job in store.all():
        store.remove(job["id"])
    now = datetime.now(timezone.utc)
    landlord = store.add(new_job("main", sched.at(now + timedelta(days=2)),
                                 "Call the landlord", now, deliver="web",
                                 origin="agent:main:main"))
    plan = store.add(new_job("main", sched.cron("0 9 * * 1-5", "Europe/Lisbon"),
                             "Plan my day", now, session="main", name="plan"))
    store.add(new_job("work", sched.at(now + timedelta(days=1)), "Not this agent's", now,
                      origin="agent:work:main"))
    page = web.page()
    page.wait_for_selector("#jobs:not([hidden])")
    rows = _rows(page)
    assert len(rows) == 2 and "Not this agent's" not in " ".join(rows)
    zone = user_zone(None)  # the server's zone: no userTimezone in its config
    local = parse_iso(landlord["nextRun"]).astimezone(zone).strftime("%a %Y-%m-%d %H:%M")
    (landlord_row,) = [row for row in rows if "Call the landlord" in row]
    assert f"once · next {local} ({zone.key})" in landlord_row
    (plan_row,) = [row for row in rows if row.startswith("plan")]
    assert "cron 0 9 * * 1-5 (Europe/Lisbon)" in plan_row
    shot(page, f"jobs-panel-{web.served.storage_url is not None}")

    page.click(f"#jobs-list .job[data-id='{plan['id']}'] .job-pause")
    page.wait_for_selector(f"#jobs-list .job.paused[data-id='{plan['id']}']")
    assert store.get(plan["id"])["enabled"] is False
    assert "paused" in texts(page, f"#jobs-list .job[data-id='{plan['id']}']")[0]
    shot(page, f"jobs-panel-paused-{web.served.storage_url is not None}")
    page.click(f"#jobs-list .job[data-id='{plan['id']}'] .job-resume")
    page.wait_for_selector(f"#jobs-list .job:not(.paused)[data-id='{plan['id']}']")
    assert store.get(plan["id"])["enabled"] is True

    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"#jobs-list .job[data-id='{landlord['id']}'] .job-delete")
    page.wait_for_selector(f"#jobs-list .job[data-id='{landlord['id']}']", state="detached")
    assert landlord["id"] not in {job["id"] for job in store.all()}
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    page.wait_for_selector("#jobs:not([hidden])")
    assert [row.startswith("plan") for row in _rows(page)] == [True]

    stand_in.answer = reminding  # a reminder set in the chat shows once its turn ends
    send(page, "remind me in 2 hours to stretch")
    idle(page)
    page.wait_for_function("() => document.getElementById('jobs-list').textContent"
                           ".includes('Tell the user to stretch.')")
    assert len(_rows(page)) == 2
    shot(page, f"jobs-panel-after-chat-{web.served.storage_url is not None}")
    for job in store.all():
        store.remove(job["id"])
