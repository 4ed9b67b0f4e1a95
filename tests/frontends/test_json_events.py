"""The events of ``clawd chat --json`` (docs/json-events.md), from the renderer's side."""

from __future__ import annotations

import io
import json

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clawd.core import events as ev
from clawd.core.messages import TextDelta, Usage
from clawd.frontends.cli.repl import repl_loop
from clawd.frontends.commands import Chat
from clawd.frontends.render import RESULT_CHARS, Renderer, event_json
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime


def rendered(events, **kw) -> list[dict]:
    out = io.StringIO()
    renderer = Renderer(out, as_json=True, **kw)
    for event in events:
        renderer.event(event)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_text_deltas_only_when_asked_for():
    turn = [TextDelta("Hel"), TextDelta(""), TextDelta("lo"), ev.TurnDone("Hello")]
    assert [e["type"] for e in rendered(turn)] == ["reply", "done"]
    streamed = rendered(turn, deltas=True)
    assert streamed[:2] == [{"type": "delta", "text": "Hel"}, {"type": "delta", "text": "lo"}]
    assert [e["type"] for e in streamed[2:]] == ["reply", "done"]


def test_done_carries_usage_session_and_model():
    done = ev.TurnDone("ok", steps=2, usage=Usage(900, 40, 100, 7), session_key="agent:main:x",
                       session_id="abc123", model="local/m")
    assert event_json(done)[1] == {
        "type": "done", "sessionKey": "agent:main:x", "sessionId": "abc123", "model": "local/m",
        "usage": {"input": 900, "output": 40, "cacheRead": 100, "cacheWrite": 7}, "steps": 2,
        "aborted": False, "interrupted": False, "failed": False}


@pytest.mark.parametrize("done, types", [
    (ev.TurnDone("", failed=True), ["done"]),  # an error ended it before any text
    (ev.TurnDone("", aborted=True, interrupted=True), ["done"]),
    (ev.TurnDone("The quick", aborted=True, failed=True), ["reply", "done"]),  # the partial
    (ev.TurnDone(""), ["reply", "done"]),  # a blank answer (a notice says so)
])
def test_a_reply_only_when_there_is_one(done, types):
    assert [line["type"] for line in event_json(done)] == types


def test_tool_result_text_is_capped_and_says_so():
    [short] = event_json(ev.ToolFinished("c1", "read", False, "x" * RESULT_CHARS))
    [long] = event_json(ev.ToolFinished("c2", "exec", True, "y" * (RESULT_CHARS + 1)))
    assert short == {"type": "toolResult", "id": "c1", "name": "read", "isError": False,
                     "text": "x" * RESULT_CHARS, "truncated": False}
    assert long["text"] == "y" * RESULT_CHARS and long["truncated"] is True
    assert long["id"] == "c2" and long["isError"] is True


def test_the_repl_with_json_and_stream_prints_deltas(tmp_path):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider(["forty-two"], chunk_size=4)),
                "agent:main:main")
    out = io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text("what is it?\r/quit\r")
        pipe.close()
        assert repl_loop(chat, input=pipe, output=DummyOutput(), stream=out, as_json=True,
                         deltas=True, warm=False) == 0
    events = [json.loads(line) for line in out.getvalue().splitlines()[1:]]  # after the banner
    assert "".join(e["text"] for e in events if e["type"] == "delta") == "forty-two"
    assert [e["type"] for e in events if e["type"] != "delta"] == ["waiting", "reply", "done",
                                                                   "command"]
