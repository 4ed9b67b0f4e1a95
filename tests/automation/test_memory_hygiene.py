"""What automation writes carries its provenance and stays out of memory: the memory flush
and the session-memory file leave its turns out, unless the job says ``remember``."""

from __future__ import annotations

import pytest

from clawd.core.messages import Message, automated_turns, without_automated
from clawd.frontends.commands import Chat
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime, transcript_entries

pytestmark = pytest.mark.usefixtures("both_storages")
JOB = {"kind": "job", "jobId": "abc", "scheduledFor": "2026-11-27T10:00:00Z",
       "remember": False}


def test_the_turns_automation_started_are_found_with_their_replies():
    person, job_msg = Message.user("I like tea"), Message.user("check the weather", origin=JOB)
    reply_1, reply_2 = Message.assistant("Noted."), Message.assistant("Sunny, 20 degrees.")
    kept = Message.user("remember this", origin={**JOB, "remember": True})
    messages = [person, reply_1, job_msg, reply_2, kept, Message.assistant("ok")]
    assert automated_turns(messages) == {job_msg.id, reply_2.id}
    assert without_automated(messages) == [person, reply_1, kept, messages[-1]]
    back = Message.from_entry(job_msg.to_entry())
    assert back.origin == JOB


def test_flush_and_session_memory_leave_automation_out(tmp_path):
    provider = ScriptedProvider(["Sunny, 20 degrees in Lisbon.", "Noted: you like tea.",
                                 "NO_REPLY", "NO_REPLY", "NO_REPLY", "a-slug"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, "agent:main:main")
    list(chat.session.run_turn("What is the weather in Lisbon?", origin=JOB))
    list(chat.session.run_turn("I like green tea"))
    user_lines = [e for e in transcript_entries(chat.session) if e.get("role") == "user"]
    assert user_lines[0]["origin"] == JOB and "origin" not in user_lines[1]
    list(chat.new_session("new"))
    chat.session.close()
    flush_requests = [r for r in provider.requests if any(m.flush for m in r.messages)]
    assert flush_requests, "the flush ran"
    for request in flush_requests:
        seen = " ".join(m.text for m in request.messages)
        assert "green tea" in seen and "Lisbon" not in seen
    notes = [p for p in (tmp_path / "ws" / "memory").glob("*.md")]
    saved = " ".join(p.read_text() for p in notes)
    if runtime.storage.kind == "files":
        assert "green tea" in saved
    assert "Lisbon" not in saved
