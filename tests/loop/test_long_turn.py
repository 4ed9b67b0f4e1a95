"""Compaction inside a long turn, and ``/compact`` on a short history.

A turn of many large tool results outgrows a small window: its earlier steps are summarised
(never a tool call without its result), the user's request stays verbatim, and the turn
finishes with a reply; every tool result is still in the transcript.
"""

from __future__ import annotations

import json
import re

import pytest

from clawd.context.cut import find_cut
from clawd.core.errors import ContextOverflowError
from clawd.core.events import Compacted, ErrorEvent
from clawd.core.messages import Message, ModelRequest
from clawd.frontends.commands import Chat
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime, transcript_entries
from loopmodel import filler, is_flush

KEY = "agent:main:main"
REQUEST = "Read the eight doc files, 0 to 7, and tell me which one mentions the budget."
pytestmark = pytest.mark.usefixtures("both_storages")


def entries(session: Session) -> list[dict]:
    return transcript_entries(session)


class Reader:
    """Reads doc0..doc7 one per step, then answers; summaries list what was read. What was
    read is taken from the request (a request that overflowed leaves no trace)."""

    def __call__(self, request: ModelRequest):
        seen = sorted(set(re.findall(r"doc\d\.md", "\n".join(
            m.text + json.dumps([c.arguments for c in m.tool_calls])
            for m in request.messages))))
        if not request.tools:
            return "## Progress\n- read " + ", ".join(seen)
        if is_flush(request):
            return "NO_REPLY"
        if len(seen) < 8:
            return Reply("", [tool("read", path=f"doc{len(seen)}.md")])
        return "doc5.md mentions the budget."


def setup_docs(tmp_path, window, provider):
    runtime = make_runtime(tmp_path, provider, window=window)
    for i in range(8):
        body = f"# doc{i}\n" + filler(1200, i) + ("\nThe budget is 2400 euros.\n" if i == 5
                                                 else "\n")
        runtime.files.write(f"doc{i}.md", body)
    return runtime


def test_a_turn_of_many_large_tool_results_finishes_in_a_small_window(tmp_path):
    provider = ScriptedProvider(default=Reader(), context_window=12_000)
    runtime = setup_docs(tmp_path, 12_000, provider)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn(REQUEST))
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert events[-1].text == "doc5.md mentions the budget."
    assert [e for e in events if isinstance(e, Compacted)]
    on_disk = entries(session)
    results = [e for e in on_disk if e.get("role") == "toolResult"]
    assert len(results) == 8  # every tool result is still in the transcript, whole
    for i, result in enumerate(results):
        assert result["content"][0]["text"] == runtime.files.read(f"doc{i}.md")
    compactions = [e for e in on_disk if e["type"] == "compaction"]
    user_id = next(e["id"] for e in on_disk if e.get("role") == "user")
    assert all(c["turnMessageId"] == user_id for c in compactions)
    # every request after a compaction: the summary, the request verbatim, whole steps
    for request in provider.requests:
        if request.tools and request.messages[0].id == "compaction-summary":
            assert request.messages[1].text == REQUEST
            assert request.messages[2].role == "assistant" and request.messages[2].tool_calls
    # reloaded from disk, the history is the same
    again = Session.open(runtime, KEY)
    assert [m.id for m in again.history.messages] == [m.id for m in session.history.messages]
    assert again.history.messages[0].text == REQUEST


def test_overflow_recovery_compacts_inside_the_turn(tmp_path):
    """The runtime thinks the window is large; the server's real one is small."""
    provider = ScriptedProvider(default=Reader(), context_window=9_000)
    runtime = setup_docs(tmp_path, 200_000, provider)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn(REQUEST))
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert events[-1].text == "doc5.md mentions the budget."
    reasons = [e["reason"] for e in entries(session) if e["type"] == "compaction"]
    assert reasons and set(reasons) == {"overflow"}
    assert len([e for e in entries(session) if e.get("role") == "toolResult"]) == 8


def test_find_cut_within_a_turn_keeps_calls_with_results_and_the_latest_step():
    request = Message.user("do it")
    steps = []
    for i in range(4):
        call = tool("read", path=f"f{i}")
        steps += [Message.assistant("", [call]),
                  Message.tool_result(call, filler(300, i))]
    messages = [request, *steps]
    assert find_cut(messages, 500) == 0  # one turn, not to be cut
    cut = find_cut(messages, 500, within_turn=True)
    assert messages[cut].role == "assistant" and cut > 1
    assert cut == 7  # the latest step (call + result) stays, though it exceeds the budget
    assert find_cut(messages, 900, within_turn=True) == 5


def test_persistent_overflow_still_ends_with_a_clear_error(tmp_path):
    provider = ScriptedProvider(default=lambda r: (
        "summary" if not r.tools else ContextOverflowError("prompt is too long")))
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("hello"))
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "nothing was lost" in errors[0]
    assert "1 messages" in errors[0] and "largest a user message" in errors[0]


# --- /compact on a short history -------------------------------------------------------------

def test_compact_on_a_short_history_compacts_what_precedes_the_latest_turn(tmp_path):
    provider = ScriptedProvider(["First answer.", "Second answer.", "NO_REPLY",
                                 "The user told me no facts.", "## Goal\nsmall talk"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first question" + ", and more" * 120))  # a summary saves room
    list(chat.handle("second question"))
    events = list(chat.handle("/compact"))
    assert [e for e in events if isinstance(e, Compacted)]
    assert [m.text for m in chat.session.history.messages] == ["second question",
                                                               "Second answer."]
    assert chat.session.history.summary == "## Goal\nsmall talk"


def test_compact_on_one_turn_says_there_is_nothing_to_compact(tmp_path):
    provider = ScriptedProvider(["Only answer."])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    list(chat.handle("only question"))
    events = list(chat.handle("/compact"))
    assert not [e for e in events if isinstance(e, Compacted)]
    assert "the history" in "".join(getattr(e, "text", "") for e in events)
    provider.assert_done()
