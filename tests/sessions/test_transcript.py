"""Transcripts: header, round trip, torn and invalid lines, compaction in the history view."""

from __future__ import annotations

import json

import pytest

from clawd.core.messages import ImagePart, Message, ToolCall, Usage
from clawd.sessions.transcript import build_history
from clawd.storage.files.transcripts import Transcript


def test_round_trip(tmp_path):
    path = tmp_path / "sid.jsonl"
    t = Transcript.create(path, "main")
    call = ToolCall("c1", "read", {"path": "a.md"})
    sent = [Message.user("hi"),
            Message.assistant("let me look", [call], usage=Usage(10, 5, 3, 2),
                              stop_reason="toolUse", model="m"),
            Message.tool_result(call, "content", is_error=False),
            Message("user", [ImagePart("AAA=", "image/png")])]
    for m in sent:
        t.append_message(m)
    loaded = Transcript(path).load()
    assert loaded.header["id"] == "sid" and loaded.header["version"] == 1
    assert loaded.header["agentId"] == "main" and loaded.header["timestamp"]
    back = [Message.from_entry(e) for e in loaded.entries]
    assert back == sent
    assert all({"type", "id", "timestamp"} <= set(e) for e in loaded.entries)
    assert back[1].usage.prompt_tokens == 15


def test_torn_line_is_skipped_and_next_append_starts_fresh(tmp_path, caplog):
    path = tmp_path / "sid.jsonl"
    t = Transcript.create(path, "main")
    t.append_message(Message.user("one"))
    with open(path, "ab") as handle:  # a crash mid-write leaves half a line
        handle.write(b'{"type":"message","role":"assistant","content":[{"ty')
    t2 = Transcript(path)
    loaded = t2.load()
    assert [Message.from_entry(e).text for e in loaded.entries] == ["one"]
    assert len(loaded.warnings) == 1 and "sid.jsonl:3" in loaded.warnings[0]
    assert "skipped" in caplog.text
    t2.append_message(Message.user("two"))
    again = Transcript(path).load()
    assert [Message.from_entry(e).text for e in again.entries] == ["one", "two"]
    raw = path.read_bytes()
    assert b'"content":[{"ty\n' in raw  # the torn bytes are kept, never rewritten


def test_invalid_lines_anywhere_are_skipped(tmp_path):
    path = tmp_path / "sid.jsonl"
    t = Transcript.create(path, "main")
    t.append_message(Message.user("a"))
    with open(path, "a") as handle:
        handle.write("not json\n[1,2]\n{\"no\":\"type\"}\n")
    t.append_message(Message.user("b"))
    loaded = Transcript(path).load()
    assert [e["content"][0]["text"] for e in loaded.entries] == ["a", "b"]
    assert len(loaded.warnings) == 3


def test_history_applies_latest_compaction_and_skips_flush(tmp_path):
    msgs = [Message.user(f"m{i}") for i in range(6)]
    entries = [m.to_entry() for m in msgs[:4]]
    entries.append({"type": "compaction", "id": "c1", "summary": "S1", "firstKeptId": msgs[2].id,
                    "tokensBefore": 100, "tokensAfter": 40, "instructions": None})
    flush = Message.user("flush prompt", flush=True)
    entries += [flush.to_entry(), msgs[4].to_entry()]
    entries.append({"type": "compaction", "id": "c2", "summary": "S2", "firstKeptId": msgs[4].id,
                    "tokensBefore": 90, "tokensAfter": 30, "instructions": "focus"})
    entries.append(msgs[5].to_entry())
    history = build_history(entries)
    assert history.summary == "S2" and history.compactions == 2
    assert [m.text for m in history.messages] == ["m4", "m5"]


def test_a_compaction_without_summary_hides_nothing(caplog):
    msgs = [Message.user(f"m{i}") for i in range(3)]
    entries = [m.to_entry() for m in msgs]
    entries.insert(2, {"type": "compaction", "id": "c1", "firstKeptId": "gone"})  # hand-edited
    history = build_history(entries)
    assert [m.text for m in history.messages] == ["m0", "m1", "m2"]
    assert history.summary is None and "without a summary" in caplog.text


def test_entries_are_single_json_lines(tmp_path):
    path = tmp_path / "sid.jsonl"
    t = Transcript.create(path, "main")
    t.append_message(Message.user("line one\nline two"))
    rows = path.read_text().splitlines()
    assert len(rows) == 2 and json.loads(rows[1])["content"][0]["text"] == "line one\nline two"


def test_a_torn_line_is_warned_about_once_not_on_every_run(tmp_path, caplog):
    import gc

    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider

    from conftest import make_runtime

    runtime = make_runtime(tmp_path, ScriptedProvider(default="ok"))
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("one"))
    path = session.transcript.path
    session.close()
    with open(path, "ab") as handle:  # a crash mid-write
        handle.write(b'{"type":"message","role":"assistant","content":[{"ty')
    del session
    gc.collect()
    caplog.clear()
    again = Session.open(runtime, "agent:main:main")
    assert len(again.warnings) == 1 and ":4: skipped an invalid line" in again.warnings[0]
    assert caplog.text.count("skipped an invalid line") == 1
    assert again.store.get("agent:main:main")["invalidLines"] == [4]
    list(again.run_turn("two"))
    again.close()
    del again
    gc.collect()
    caplog.clear()
    third = Session.open(runtime, "agent:main:main")
    assert third.warnings == [] and "skipped" not in caplog.text
    assert [m.text for m in third.history.messages] == ["one", "ok", "two", "ok"]


def test_parts_are_typed_and_round_trip_through_the_transcript_json():
    from clawd.core.messages import OtherPart, TextPart, part_from_json, part_to_json

    blocks = [{"type": "text", "text": "hi"},
              {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
              {"type": "image", "data": "AAA=", "mimeType": "image/png"},
              {"type": "thinking", "thinking": "hmm", "signature": "x"}]
    parts = [part_from_json(b) for b in blocks]
    assert [type(p).__name__ for p in parts] == ["TextPart", "ToolCall", "ImagePart",
                                                 "OtherPart"]
    assert [part_to_json(p) for p in parts] == blocks  # unknown kinds are kept as read
    message = Message.from_entry({"type": "message", "role": "assistant", "content": blocks})
    assert message.text == "hi" and message.tool_calls == [parts[1]]
    assert Message.from_entry(message.to_entry()).content == parts
    assert Message.from_entry({"type": "message", "role": "user", "content": "plain"}
                              ).content == [TextPart("plain")]
    assert isinstance(part_from_json({"type": "video", "url": "x"}), OtherPart)
    for bad in ({"type": "text", "text": None}, {"type": "toolCall", "id": 1, "name": "x"},
                {"text": "no type"}, "a string"):
        with pytest.raises(ValueError, match="malformed content block"):
            part_from_json(bad)


def test_history_leaves_out_undone_turns(caplog):
    msgs = [Message.user("q1"), Message.assistant("a1"), Message.user("q2"),
            Message.assistant("a2"), Message.user("q3")]
    entries = [m.to_entry() for m in msgs[:4]]
    entries.append({"type": "undo", "id": "u1", "messageId": msgs[2].id})
    entries.append(msgs[4].to_entry())
    entries.append({"type": "undo", "id": "u2", "messageId": "no-such-message"})
    history = build_history(entries)
    assert [m.text for m in history.messages] == ["q1", "a1", "q3"]
    assert "skipped an undo entry u2" in caplog.text


def test_an_undo_after_a_compaction_and_the_turn_it_summarised_in_part():
    msgs = [Message.user("q1"), Message.assistant("a1"), Message.user("q2"),
            Message.assistant("step"), Message.assistant("a2")]
    entries = [m.to_entry() for m in msgs]
    entries.insert(4, {"type": "compaction", "id": "c1", "summary": "S", "firstKeptId":
                       msgs[4].id, "turnMessageId": msgs[2].id})
    history = build_history(entries)
    assert [m.text for m in history.messages] == ["q2", "a2"]
    assert history.summarised_turn == msgs[2].id and history.after_compaction == 1
    history = build_history(entries + [{"type": "undo", "id": "u", "messageId": msgs[2].id}])
    assert history.messages == [] and history.summary == "S"
    assert history.after_compaction == 0
