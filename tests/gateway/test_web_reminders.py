"""A reminder set in the web chat (the model calls ``schedule``) shows in the page at its
time, live, and again after a reload, in the system's Chromium; screenshots are kept in
tests/artifacts/."""

from __future__ import annotations

import pytest

from webchat import idle, send, shot, texts

pytestmark = pytest.mark.slow  # a browser and a server process


def reminding(body, words):
    """The stand-in model: sets the reminder with the tool, confirms it, and at the
    reminder's time says what it was for."""
    if body["messages"][-1]["role"] == "tool":
        return "Done: I'll remind you."
    if words.lower().startswith("remind me"):
        return [{"id": "call-1", "name": "schedule", "arguments": {
            "action": "add", "at": "in 3 seconds", "message": "Tell the user to stretch."}}]
    return "Time to stretch!"


def test_a_reminder_set_in_the_chat_shows_at_its_time_and_after_a_reload(web, stand_in):
    stand_in.answer = reminding
    page = web.page()
    send(page, "remind me in 3 seconds to stretch")
    idle(page)
    page.wait_for_function("() => document.getElementById('items').textContent"
                           ".includes(\"I'll remind you\")")
    page.wait_for_selector(".notice-card", timeout=40_000)
    assert "Time to stretch!" in texts(page, ".notice-card")[0]
    shot(page, f"reminder-live-{web.served.storage_url is not None}")
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    page.wait_for_selector(".notice-card", timeout=15_000)
    assert texts(page, ".notice-card")[0].count("Time to stretch!") == 1
    shot(page, f"reminder-after-reload-{web.served.storage_url is not None}")
    page.click(".notice-card button")
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    idle(page)
    page.wait_for_timeout(1000)
    assert texts(page, ".notice-card") == []  # dismissed stays dismissed
