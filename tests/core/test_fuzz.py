"""Bad input, systematically: arbitrary bytes and arbitrary JSON shapes for the transcript
loader, the session store, the config loader and the chunker.

Each must load what is valid, keep aside what it cannot read with a one-line warning, or
fail with a one-line error: never a traceback, never a user message dropped in silence.
The normal suite runs a few dozen examples per property; ``scripts/fuzz.py`` runs many more
(``CLAWD_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawd.config import parse_config
from clawd.core.errors import ConfigError
from clawd.core.messages import Message
from clawd.loop.session import Session
from clawd.memory.chunker import chunk_text
from clawd.providers.scripted import ScriptedProvider
from clawd.sessions.transcript import build_history
from clawd.storage.files.sessions import SessionStore
from clawd.storage.files.transcripts import Transcript

from conftest import make_runtime

pytestmark = pytest.mark.slow  # hypothesis: many random cases per property

EXAMPLES = int(os.environ.get("CLAWD_FUZZ_EXAMPLES", "40"))
_SETTINGS = {"deadline": None, "derandomize": not os.environ.get("CLAWD_FUZZ_EXAMPLES"),
             "suppress_health_check": [HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture]}
FUZZ = settings(max_examples=EXAMPLES, **_SETTINGS)
# a whole Session per example (lock, store, transcript, a turn): fewer in the normal suite
FUZZ_SESSION = settings(max_examples=EXAMPLES if os.environ.get("CLAWD_FUZZ_EXAMPLES")
                        else 10, **_SETTINGS)

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                           max_leaves=12)


def _one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


# --- the transcript loader -----------------------------------------------------------------------

FIELDS = ("type", "role", "content", "id", "timestamp", "usage", "toolCallId", "toolName",
          "isError", "flush", "summary", "firstKeptId", "model", "aborted")
entry_shapes = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["message", "compaction", "session", "other"]) | json_values,
    "role": st.sampled_from(["user", "assistant", "toolResult", "system"]) | json_values,
    "content": json_values | st.lists(
        st.fixed_dictionaries({"type": st.sampled_from(["text", "toolCall", "image"])},
                              optional={"text": json_values, "id": json_values,
                                        "name": json_values, "arguments": json_values}),
        max_size=3),
    "id": json_values, "timestamp": json_values, "usage": json_values,
    "toolCallId": json_values, "toolName": json_values, "isError": json_values,
    "flush": json_values, "summary": json_values, "firstKeptId": json_values,
    "model": json_values, "aborted": json_values})

HEADER = b'{"type":"session","version":1,"id":"fuzz","agentId":"main","timestamp":"t"}\n'


def _user_line(text: str) -> bytes:
    return json.dumps(Message.user(text).to_entry()).encode() + b"\n"


@FUZZ
@given(st.lists(st.binary(max_size=60) | entry_shapes.map(lambda e: json.dumps(e).encode()),
                max_size=8),
       st.text(min_size=1, max_size=30))
def test_transcript_loader_keeps_every_user_message(lines, said):
    """Arbitrary lines around a real user message: loading never raises, every line it
    skips is reported with its number, and the user's message is in the history."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        middle = len(lines) // 2
        raw = HEADER + b"\n".join(lines[:middle]) + b"\n" + _user_line(said) + b"\n".join(
            lines[middle:])
        path.write_bytes(raw)
        loaded = Transcript(path).load(quiet=True)
        assert len(loaded.warnings) == len(loaded.invalid_lines)
        assert all(_one_line(w) for w in loaded.warnings)
        history = build_history(loaded.entries)
        texts = [m.text for m in history.messages] + [history.summary or ""]
        # a compaction among the fuzz lines may summarise it away: then the summary or a
        # later line names it; without one it is in the history as sent
        compacted = any(e.get("type") == "compaction" for e in loaded.entries)
        assert compacted or said in texts
        for message in history.messages:  # every kept message can be sent
            assert isinstance(message.text, str) and isinstance(message.tool_calls, list)


@FUZZ_SESSION
@given(st.lists(entry_shapes, min_size=1, max_size=6), st.text(min_size=1, max_size=30))
def test_a_session_opens_on_any_transcript_and_its_next_turn_is_sent(tmp_path_factory, shapes,
                                                                       said):
    tmp = tmp_path_factory.mktemp("s")
    provider = ScriptedProvider(default="fine")
    runtime = make_runtime(tmp, provider)
    first = Session.open(runtime, "agent:main:main")
    path = first.transcript.path
    first.close()
    del first
    gc.collect()
    with open(path, "ab") as handle:
        handle.writelines(json.dumps(shape).encode() + b"\n" for shape in shapes)
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn(said))
    assert provider.requests[-1].messages[-1].text == said
    session.close()


# --- the session store ---------------------------------------------------------------------------

entry_values = st.fixed_dictionaries(
    {"sessionId": st.just("sid"), "sessionFile": st.just("")},
    optional={name: json_values for name in (
        "createdAt", "updatedAt", "model", "modelOverride", "inputTokens", "outputTokens",
        "totalTokens", "totalTokensFresh", "contextTokens", "contextUsedTokens",
        "compactionCount", "memoryFlushAt", "memoryFlushCompactionCount", "memoryFlushCount",
        "cumulativeInputTokens", "cumulativeOutputTokens", "cumulativeCacheReadTokens",
        "cumulativeCacheWriteTokens", "lastModelCallAt", "tokenRatio", "prunedResults",
        "invalidLines")})


@FUZZ
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_store_file_loads_or_is_set_aside(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sessions.json"
        path.write_bytes(raw)
        entries = SessionStore(path).entries()
        assert isinstance(entries, dict)
        assert all(isinstance(e, dict) for e in entries.values())
        aside = list(Path(tmp).glob("sessions.json.corrupt-*"))
        if aside:  # every byte kept
            assert aside[0].read_bytes() == raw


@FUZZ_SESSION
@given(entry_values, st.text(min_size=1, max_size=30))
def test_a_session_runs_on_any_entry_shape(tmp_path_factory, entry, said):
    """A hand-edited entry with fields of any type: the session opens, the turn is sent, and
    the entry on disk is consistent again afterwards."""
    tmp = tmp_path_factory.mktemp("e")
    provider = ScriptedProvider(default="fine")
    runtime = make_runtime(tmp, provider)
    runtime.storage.sessions_dir.mkdir(parents=True, exist_ok=True)
    entry = {**entry, "sessionFile": str(runtime.storage.sessions_dir / "sid.jsonl")}
    runtime.store.path.write_text(json.dumps({"agent:main:main": entry}))
    session = Session.open(runtime, "agent:main:main")
    events = list(session.run_turn(said))
    assert provider.requests and provider.requests[-1].messages[-1].text == said, events
    stored = runtime.store.get("agent:main:main")
    assert isinstance(stored["cumulativeInputTokens"], int)
    assert stored["sessionId"] == "sid"
    session.close()


# --- the config loader ---------------------------------------------------------------------------

config_shapes = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["agents", "defaults", "list", "model", "workspace", "models",
                         "providers", "memorySearch", "compaction", "session", "reset",
                         "mode", "idleMinutes", "contextTokens", "id", "hooks", "tools",
                         "exec", "enabled", "api", "baseUrl", "x"]), inner, max_size=4),
    max_leaves=15)


@FUZZ
@given(st.binary(max_size=120) | config_shapes.map(lambda v: json.dumps(v).encode()))
def test_any_config_file_loads_or_is_one_line_error(tmp_path_factory, raw):
    from clawd.config import load_config

    path = tmp_path_factory.mktemp("c") / "clawd.json"
    path.write_bytes(raw)
    try:
        load_config(path)
    except ConfigError as exc:
        assert _one_line(str(exc)) and str(path) in str(exc)


@FUZZ
@given(config_shapes)
def test_any_config_shape_parses_or_is_one_line_error(shape):
    try:
        parse_config(json.dumps(shape))
    except ConfigError as exc:
        assert _one_line(str(exc))


# --- the chunker ---------------------------------------------------------------------------------

@FUZZ
@given(st.text(max_size=600) | st.lists(
    st.sampled_from(["# Title", "## Part", "```", "~~~", "", "   ", "- item", "word " * 30,
                     "x" * 500, "\t", "> quote"]), max_size=30).map("\n".join),
       st.integers(1, 64), st.integers(0, 64))
def test_the_chunker_keeps_every_line(text, tokens, overlap):
    chunks = chunk_text(text, tokens=tokens, overlap=overlap, count=lambda s: len(s) // 4)
    lines = text.split("\n")
    covered = set()
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        covered.update(range(chunk.start_line, chunk.end_line + 1))
        assert chunk.text.strip()
    for number, line in enumerate(lines, start=1):
        if line.strip():
            assert number in covered, f"line {number} ({line[:20]!r}) is in no chunk"
    joined = "".join("".join(c.text.split()) for c in chunks)
    for line in lines:  # every non-blank character sequence survives
        assert "".join(line.split()) in joined



# --- what the properties found, pinned -----------------------------------------------------------

def test_found_a_text_block_without_text_is_a_skipped_line_not_a_crash(tmp_path, caplog):
    path = tmp_path / "t.jsonl"
    bad = {"type": "message", "id": "b", "role": "user",
           "content": [{"type": "text", "text": None}]}
    path.write_bytes(HEADER + json.dumps(bad).encode() + b"\n" + _user_line("kept"))
    history = build_history(Transcript(path).load().entries)
    assert [m.text for m in history.messages] == ["kept"]
    assert "skipped a malformed message entry b" in caplog.text


def test_found_unreadable_usage_keeps_the_message(tmp_path):
    path = tmp_path / "t.jsonl"
    entry = {**Message.user("mine").to_entry(), "usage": {"input": "lots"}}
    path.write_bytes(HEADER + json.dumps(entry).encode() + b"\n")
    [message] = build_history(Transcript(path).load().entries).messages
    assert message.text == "mine" and message.usage is None


def test_found_store_fields_of_the_wrong_type_are_dropped_with_a_warning(tmp_path, caplog):
    provider = ScriptedProvider(default="fine")
    runtime = make_runtime(tmp_path, provider)
    runtime.storage.sessions_dir.mkdir(parents=True, exist_ok=True)
    entry = {"sessionId": "sid", "sessionFile": str(runtime.storage.sessions_dir / "sid.jsonl"),
             "tokenRatio": [1], "prunedResults": True, "invalidLines": True,
             "compactionCount": "2", "cumulativeInputTokens": 7}
    runtime.store.path.write_text(json.dumps({"agent:main:main": entry}))
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("hello"))
    stored = runtime.store.get("agent:main:main")
    assert stored["compactionCount"] == 0 and stored["cumulativeInputTokens"] > 7
    assert "dropped fields of the wrong type" in caplog.text
    assert "tokenRatio, prunedResults, invalidLines" in caplog.text.replace(
        "compactionCount, ", "")
    assert list(runtime.storage.sessions_dir.glob("sessions.json.corrupt-*"))  # the file as it was
    session.close()


def test_found_a_config_that_is_not_utf8_is_one_line(tmp_path):
    from clawd.config import load_config

    path = tmp_path / "clawd.json"
    path.write_bytes(b"{agents: \x80}")
    try:
        load_config(path)
    except ConfigError as exc:
        assert _one_line(str(exc)) and "not UTF-8" in str(exc)
    else:
        raise AssertionError("no error")


def test_found_a_heading_held_back_is_never_dropped():
    chunks = chunk_text("# Title\n# Title", tokens=1, overlap=0, count=lambda s: len(s) // 4)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (2, 2)]
