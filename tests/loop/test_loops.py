"""A reply caught in a loop is stopped, kept with the loop once, and the user told.

The 1.5B model answered "Sunglasses" on line after line until its output limit; kept whole,
such a reply teaches the model to loop again in the next turns.
"""

from __future__ import annotations

import io
import json

import pytest

from clawd.core.events import Notice, TextDelta
from clawd.frontends import cli
from clawd.guards.loops import LoopGuard, cut_loop, loop_period
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from fakeserver import openai_stream

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")
LOOP = "Here is what to pack:\n" + "Sunglasses\n" * 80
STOPPED = "the reply was stopped: the model kept repeating itself"


def test_a_repeated_stretch_is_a_loop_and_is_kept_once():
    period = loop_period(LOOP)
    assert period == len("Sunglasses\n")
    assert cut_loop(LOOP, period) == "Here is what to pack:\nSunglasses"
    bullets = "- budget 2400\n- Ines May 14\n- hotel in Alfama\n- fado on Friday\n" * 10
    assert cut_loop(bullets, loop_period(bullets)) == "- budget 2400\n- Ines May 14\n" \
        "- hotel in Alfama\n- fado on Friday"
    assert loop_period("ha " * 120) == 3


@pytest.mark.parametrize("text", [
    "".join(f"{i}. Sunglasses\n" for i in range(1, 80)),  # items differ by their number
    "| day | plan |\n|---|---|\n" + "".join(f"| {d} | walk |\n" for d in range(1, 40)),
    "Sunglasses\n" * 9,  # not repeated often enough
    "a" * 299,  # too short
    "The same sentence, twice. The same sentence, twice. " + "Then something else. " * 3,
])
def test_other_text_is_not_a_loop(text):
    assert loop_period(text) is None


def test_the_guard_stops_early_in_a_stream():
    guard, parts = LoopGuard(), []
    for i in range(0, len(LOOP), 4):
        parts.append(LOOP[i:i + 4])
        if guard.looping(parts):
            break
    assert sum(map(len, parts)) < 400 < len(LOOP)
    assert guard.cut(parts) == "Here is what to pack:\nSunglasses"


def test_a_looping_reply_is_stopped_and_kept_once(tmp_path):
    provider = ScriptedProvider([LOOP, "Anything else?"], chunk_size=4)
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("what should I pack?"))
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown.startswith("Here is what to pack:\nSunglasses\nSunglasses")
    assert len(shown) < 400  # not the whole loop
    assert [e.text for e in events if isinstance(e, Notice)] == [STOPPED]
    assert events[-1].text == "Here is what to pack:\nSunglasses"
    list(session.run_turn("thanks"))
    sent = provider.requests[1].messages
    assert [m.text for m in sent] == ["what should I pack?",
                                      "Here is what to pack:\nSunglasses", "thanks"]
    reloaded = Session.open(session.rt, KEY)
    assert reloaded.history.messages[1].text == "Here is what to pack:\nSunglasses"


def test_the_loop_is_stopped_over_the_wire(local_config, local_server, capsys, monkeypatch):
    local_server.default("POST", "/v1/chat/completions", lambda r: openai_stream(LOOP))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = cli.main(["chat", "--json", "-m", "what should I pack?"])
    out, err = capsys.readouterr()
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert {"type": "notice", "text": STOPPED} in events
    assert events[-1]["type"] == "done"
    assert len("".join(e["text"] for e in events if e["type"] == "delta")) < 400
    sessions = local_config.parent / ".clawd" / "agents" / "main" / "sessions"
    transcript, = sessions.glob("*.jsonl")
    kept = [json.loads(line) for line in transcript.read_text().splitlines()][-1]
    assert kept["content"] == [{"type": "text", "text": "Here is what to pack:\nSunglasses"}]
    assert kept["stopReason"] == "looping"  # why it ends there, for a history read later


def test_a_reply_cut_at_the_output_limit_says_so(local_config, local_server, capsys,
                                                  monkeypatch):
    """The 1.5B model wrote a made-up transcript until its 1,024 tokens ran out, and the turn
    ended mid-word with nothing said."""
    local_server.default("POST", "/v1/chat/completions", lambda r: openai_stream(
        "Kestrel's backend uses Python 3.13 and Priya", finish_reason="length"))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = cli.main(["chat", "--json", "-m", "which Python?"])
    out, err = capsys.readouterr()
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    notices = [e["text"] for e in events if e["type"] == "notice"]
    assert len(notices) == 1 and notices[0].startswith("the reply stopped at the model's "
                                                        "output limit (")
    reply, = [e for e in events if e["type"] == "reply"]
    assert reply["text"] == "Kestrel's backend uses Python 3.13 and Priya"  # kept as it came


def test_a_reply_that_ends_on_its_own_has_no_notice(tmp_path):
    provider = ScriptedProvider(["Python 3.13."])
    events = list(Session.open(make_runtime(tmp_path, provider), KEY).run_turn("which Python?"))
    assert not [e for e in events if isinstance(e, Notice)]
