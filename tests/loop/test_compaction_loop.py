"""Memory flush and compaction through the turn loop, over long scripted sessions.

A small context window and small thresholds make a few dozen turns cross several compaction
cycles. ``LoopModel`` notes the fact codes it sees when flushed and (lossy) forgets them when
summarising, so a fact that survives a compaction survived through the flush. Ordering is read
from the transcript lines and from the requests the scripted provider recorded.
"""

from __future__ import annotations

import io
import logging
import os

import pytest

from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.events import (
    CommandOutput,
    Compacted,
    ErrorEvent,
    Flushed,
    Notice,
    TextDelta,
    TurnDone,
)
from clawd.core.messages import ModelRequest
from clawd.frontends.commands import Chat
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime, transcript_entries
from loopmodel import LoopModel, facts_in, filler, is_flush, is_summary

KEY = "agent:main:main"
WINDOW = 8000  # flush at 6000, compact above 7000, keep the newest 2000 verbatim
SETTINGS = {"compaction": {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
                           "memoryFlush": {"softThresholdTokens": 1000}}}
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")


def lines(session: Session) -> list[dict]:
    return transcript_entries(session)


def user_text(i: int, words: int = 120) -> str:
    return f"Turn {i}. FACT-{i:03d} is for later. {filler(words, i)}"


def drive(session: Session, turns: range, words: int = 120) -> list:
    events: list = []
    for i in turns:
        events += list(session.run_turn(user_text(i, words)))
    return events


def start(tmp_path, model=None, *, window=WINDOW, settings=SETTINGS, provider_window=None,
          **kw):
    provider = ScriptedProvider(default=model or LoopModel(lossy=True),
                                context_window=provider_window)
    runtime = make_runtime(tmp_path, provider, window=window, settings=settings, **kw)
    return provider, runtime, Session.open(runtime, KEY)


def markers(entries: list[dict]) -> str:
    """F for each flush turn (its prompt), C for each compaction, in transcript order."""
    out = ""
    for e in entries:
        if e["type"] == "compaction":
            out += "C"
        elif e.get("flush") and e.get("role") == "user":
            out += "F"
    return out


def dropped_per_compaction(entries: list[dict]) -> list[list[str]]:
    """Replays the transcript: the message ids each compaction removed from the history."""
    history: list[str] = []
    dropped = []
    for e in entries:
        if e["type"] == "message" and not e.get("flush"):
            history.append(e["id"])
        elif e["type"] == "compaction":
            keep = e["firstKeptId"]
            index = history.index(keep) if keep in history else len(history)
            dropped.append(history[:index])
            history = history[index:]
    return dropped


def flush_prompts(provider: ScriptedProvider) -> list[ModelRequest]:
    """The first request of every flush turn (the one ending with the flush prompt)."""
    return [r for r in provider.requests if is_flush(r) and r.messages[-1].role == "user"]


def daily_log(runtime) -> str:
    return runtime.files.read(DAILY) or ""


# --- several cycles -----------------------------------------------------------------------------

@pytest.mark.slow  # a long session
@pytest.mark.parametrize("soft", [1000, 0])  # 0: both points are crossed by one request
def test_one_flush_per_cycle_always_before_the_cut(tmp_path, soft):
    settings = {"compaction": {**SETTINGS["compaction"],
                               "memoryFlush": {"softThresholdTokens": soft}}}
    provider, runtime, session = start(tmp_path, settings=settings)
    events = drive(session, range(100))
    entries = lines(session)
    seq = markers(entries)
    cycles = seq.count("C")
    assert cycles >= 3
    # Never two flushes in one cycle, never a compaction without its flush first.
    assert seq in ("FC" * cycles, "FC" * cycles + "F")
    assert [type(e).__name__ for e in events if isinstance(e, (Flushed, Compacted))] == [
        {"F": "Flushed", "C": "Compacted"}[c] for c in seq]
    # The flush saw the history before it was cut: every message a compaction removed was
    # in that cycle's flush request.
    prompts = flush_prompts(provider)
    assert len(prompts) == seq.count("F")
    for request, dropped in zip(prompts, dropped_per_compaction(entries)):
        seen = {m.id for m in request.messages}
        assert dropped and set(dropped) <= seen
    entry = session.store.get(KEY)
    assert entry["compactionCount"] == cycles
    assert entry["memoryFlushCount"] == seq.count("F")
    assert entry["memoryFlushCompactionCount"] == seq.count("F") - 1
    assert entry["memoryFlushAt"] == "2026-11-22T10:00:00+00:00"


@pytest.mark.slow  # a long session
def test_facts_cut_by_compaction_are_on_disk_afterwards(tmp_path):
    provider, runtime, session = start(tmp_path)
    drive(session, range(80))
    visible = facts_in("\n".join(m.text for m in session.history.messages))
    log = daily_log(runtime)
    gone = [f"FACT-{i:03d}" for i in range(80) if f"FACT-{i:03d}" not in visible]
    assert len(gone) > 40  # several cycles' worth were cut, and the summaries are lossy
    for fact in gone:
        assert log.count(f": {fact}\n") == 1, fact
    # The notes reach later requests through today's daily log in the project context.
    after = provider.requests[-1]
    assert "FACT-000" in after.system[1] and f"## {DAILY}" in after.system[1]


@pytest.mark.slow  # a long session
def test_without_a_flush_the_summary_is_what_keeps_the_facts(tmp_path):
    settings = {"compaction": {**SETTINGS["compaction"],
                               "memoryFlush": {"enabled": False, "softThresholdTokens": 1000}}}
    provider, runtime, session = start(tmp_path, LoopModel(), settings=settings)
    drive(session, range(60))
    assert not flush_prompts(provider) and daily_log(runtime) == ""
    summary = [e for e in lines(session) if e["type"] == "compaction"][-1]["summary"]
    kept = facts_in("\n".join([summary] + [m.text for m in session.history.messages]))
    assert kept == [f"FACT-{i:03d}" for i in range(60)]


@pytest.mark.slow  # a long session
def test_flush_turns_are_persisted_but_never_shown_nor_replayed(tmp_path):
    provider, runtime, session = start(tmp_path)
    events = drive(session, range(60))
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "NO_REPLY" not in shown
    assert all("NO_REPLY" not in e.text for e in events if isinstance(e, TurnDone))
    entries = lines(session)
    flushed = [e for e in entries if e.get("flush")]
    roles = [e["role"] for e in flushed]
    assert roles[:4] == ["user", "assistant", "toolResult", "assistant"]
    assert flushed[3]["content"][0]["text"] == "NO_REPLY"
    assert flushed[2]["content"][0]["text"].startswith(("wrote", "edited"))
    flush_ids = {e["id"] for e in flushed}
    for request in provider.requests:
        if is_flush(request) or is_summary(request):
            continue
        assert not flush_ids & {m.id for m in request.messages}
        assert all(m.text != "NO_REPLY" for m in request.messages)
    again = Session.open(runtime, KEY)
    assert again.history.summary == session.history.summary
    assert [m.id for m in again.history.messages] == [m.id for m in session.history.messages]


@pytest.mark.slow  # a long session
def test_compaction_entries_counters_and_events(tmp_path):
    provider, runtime, session = start(tmp_path, LoopModel())
    events = drive(session, range(60))
    compactions = [e for e in lines(session) if e["type"] == "compaction"]
    done = [e for e in events if isinstance(e, Compacted)]
    assert len(compactions) == len(done) == session.store.get(KEY)["compactionCount"] >= 2
    for entry, event in zip(compactions, done):
        assert {"summary", "firstKeptId", "tokensBefore", "tokensAfter", "instructions"} <= set(
            entry)
        assert entry["reason"] == "auto" and entry["instructions"] is None
        assert entry["tokensBefore"] == event.tokens_before > WINDOW - 1000
        assert entry["tokensAfter"] == event.tokens_after < entry["tokensBefore"] / 2
        assert "## Exact references" in entry["summary"]


@pytest.mark.slow  # a long session
def test_tool_calls_and_results_stay_together(tmp_path):
    provider, runtime, session = start(tmp_path, LoopModel(tool_every=2))
    runtime.files.write("notes.md", filler(150))
    drive(session, range(60))
    entries = lines(session)
    assert markers(entries).count("C") >= 2
    by_id = {e["id"]: e for e in entries}
    for c in (e for e in entries if e["type"] == "compaction"):
        assert by_id[c["firstKeptId"]]["role"] != "toolResult"
    for request in provider.requests:
        calls: set[str] = set()
        for i, m in enumerate(request.messages):
            if m.role == "toolResult":
                assert m.tool_call_id in calls, "a tool result without its call"
            for call in m.tool_calls:
                calls.add(call.id)
                answered = {r.tool_call_id for r in request.messages[i + 1:]}
                assert call.id in answered or i == len(request.messages) - 1


# --- the token count behind the check ----------------------------------------------------------

def test_the_incoming_message_is_counted_before_the_request(tmp_path):
    provider, runtime, session = start(tmp_path)
    i = 0
    while session.context_tokens() < session.budget.flush_at - 900:
        drive(session, range(i, i + 1))
        i += 1
    assert not flush_prompts(provider)
    reported = session.store.get(KEY)["contextUsedTokens"]
    assert reported < session.budget.flush_at
    big = user_text(i, 1000)
    events = list(session.run_turn(big))
    assert isinstance(next(e for e in events if isinstance(e, (Flushed, TextDelta))), Flushed)
    flush, chat = provider.requests[-3], provider.requests[-1]
    assert is_flush(flush) and big not in [m.text for m in flush.messages]
    assert chat.messages[-1].text == big


def test_tool_results_mid_turn_trigger_the_flush_before_the_next_step(tmp_path):
    model = LoopModel(lossy=True)

    def reply(request):
        last = request.messages[-1]
        if not is_flush(request) and last.role == "user" and "read the report" in last.text:
            return Reply("Reading.", [tool("read", path="report.md")])
        return model(request)

    provider, runtime, session = start(tmp_path, reply)
    runtime.files.write("report.md", "FACT-900 " + filler(1500))
    i = 0
    while session.context_tokens() < session.budget.flush_at - 1200:
        drive(session, range(i, i + 1))
        i += 1
    assert not flush_prompts(provider)
    before = len(provider.requests)
    list(session.run_turn("please read the report"))
    kinds = ["flush" if is_flush(r) else "summary" if is_summary(r) else "chat"
             for r in provider.requests[before:]]
    assert kinds[0] == "chat" and kinds[1] == "flush" and kinds[-1] == "chat"
    flush = provider.requests[before + 1]
    assert flush.messages[-2].role == "toolResult" and "FACT-900" in flush.messages[-2].text
    assert "FACT-900" in daily_log(runtime)


# --- overflow ----------------------------------------------------------------------------------

@pytest.mark.slow  # a long session
def test_overflow_recovery_flushes_before_the_cut_and_retries(tmp_path):
    # The model's real window is smaller than the configured one: no threshold is crossed
    # before the provider refuses a request.
    provider, runtime, session = start(tmp_path, provider_window=5000)
    events = drive(session, range(60))
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    entries = lines(session)
    compactions = [e for e in entries if e["type"] == "compaction"]
    assert len(compactions) >= 2 and {c["reason"] for c in compactions} == {"overflow"}
    assert markers(entries) in ("FC" * len(compactions), "FC" * len(compactions) + "F")
    for request, dropped in zip(flush_prompts(provider), dropped_per_compaction(entries)):
        # The whole history no longer fits: the flush sees the part about to be cut.
        assert [m.id for m in request.messages[:-1] if m.id != "compaction-summary"] == dropped
    visible = facts_in("\n".join(m.text for m in session.history.messages))
    log = daily_log(runtime)
    for fact in (f"FACT-{i:03d}" for i in range(60)):
        assert fact in visible or fact in log, fact
    turns = [e for e in events if isinstance(e, TurnDone)]
    assert len(turns) == 60 and all(t.text.startswith("Reply") for t in turns)


def test_a_single_overflow_is_compacted_and_retried(tmp_path):
    model = LoopModel(lossy=True)
    raised = []

    def reply(request):
        if (not raised and not is_flush(request) and not is_summary(request)
                and "Turn 12." in request.messages[-1].text):
            raised.append(len(request.messages))
            raise ContextOverflowError("prompt is too long")
        return model(request)

    provider, runtime, session = start(tmp_path, reply)
    drive(session, range(12))
    before = len(provider.requests)
    events = list(session.run_turn(user_text(12)))
    kinds = ["flush" if is_flush(r) else "summary" if is_summary(r) else "chat"
             for r in provider.requests[before:]]
    assert kinds[0] == "chat" and kinds[-1] == "chat" and "summary" in kinds
    assert kinds.index("flush") < kinds.index("summary")
    assert len(provider.requests[-1].messages) < raised[0]
    assert events[-1].text.startswith("Reply") and not any(
        isinstance(e, ErrorEvent) for e in events)
    assert [e["reason"] for e in lines(session) if e["type"] == "compaction"] == ["overflow"]


def test_persistent_overflow_gives_a_clear_error_after_three_attempts(tmp_path):
    model = LoopModel(lossy=True)
    state = {"on": False}

    def reply(request):
        if state["on"] and not is_flush(request) and not is_summary(request):
            raise ContextOverflowError("prompt is too long")
        return model(request)

    provider, runtime, session = start(tmp_path, reply)
    drive(session, range(20))
    state["on"] = True
    before = len(provider.requests)
    events = list(session.run_turn("one more question"))
    chats = [r for r in provider.requests[before:] if not is_flush(r) and not is_summary(r)]
    assert len(chats) == 3
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "nothing was lost" in errors[0].message
    assert "even after compacting 2 times" in errors[0].message
    last = [e for e in lines(session) if e["type"] == "message" and not e.get("flush")][-1]
    assert last["content"][0]["text"] == "one more question"
    assert session.history.messages[-1].text == "one more question"


def test_one_oversized_turn_fails_at_once_and_is_compacted_by_the_next(tmp_path):
    provider, runtime, session = start(tmp_path, provider_window=5000)
    huge = user_text(0, 5200)
    events = list(session.run_turn(huge))
    chats = [r for r in provider.requests if not is_flush(r) and not is_summary(r)]
    assert len(chats) == 1  # nothing older to compact: no pointless retries
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "nothing was lost" in errors[0].message
    assert "there is nothing left to compact" in errors[0].message
    assert "tokens: system prompt" in errors[0].message  # what takes the room
    assert not [e for e in lines(session) if e["type"] == "compaction"]
    assert session.history.messages[-1].text == huge
    events = list(session.run_turn("and now a short one"))
    assert events[-1].text.startswith("Reply")
    compaction = [e for e in lines(session) if e["type"] == "compaction"]
    assert len(compaction) == 1
    assert session.history.messages[0].text == "and now a short one"


# --- /compact ------------------------------------------------------------------------------------

def test_compact_command_flushes_first_and_passes_its_instructions(tmp_path):
    provider, runtime, session = start(tmp_path, LoopModel())
    chat = Chat.open(runtime, KEY)
    for i in range(15):
        list(chat.handle(user_text(i)))
    assert not flush_prompts(provider)
    before = len(provider.requests)
    events = list(chat.handle("/compact focus on FACT-003 and the deploy plan"))
    kinds = ["flush" if is_flush(r) else "summary" if is_summary(r) else "chat"
             for r in provider.requests[before:]]
    assert kinds[0] == "flush" and kinds[-1] == "summary" and "chat" not in kinds
    summary_request = provider.requests[-1]
    assert "focus on FACT-003 and the deploy plan" in summary_request.system[0]
    entry = [e for e in lines(chat.session) if e["type"] == "compaction"][-1]
    assert entry["instructions"] == "focus on FACT-003 and the deploy plan"
    assert entry["reason"] == "manual"
    assert markers(lines(chat.session)) == "FC"
    # said once: the compaction's own event; the command adds no second line
    assert len([e for e in events if isinstance(e, Compacted)]) == 1
    assert [e.text for e in events if isinstance(e, CommandOutput)] == [""]
    assert chat.session.store.get(KEY)["compactionCount"] == 1
    # The next /compact is a new cycle, but a flush already done in a cycle is not repeated.
    list(chat.handle(user_text(15)))
    list(chat.session.flush())
    list(chat.handle("/compact"))
    assert markers(lines(chat.session)) == "FCFC"


def test_compact_with_nothing_to_cut_does_not_use_up_the_flush(tmp_path):
    provider, runtime, session = start(tmp_path)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("hello"))
    events = list(chat.handle("/compact"))
    assert any(isinstance(e, Notice) and "nothing to compact" in e.text for e in events)
    assert not flush_prompts(provider)
    assert chat.session.store.get(KEY)["memoryFlushCompactionCount"] is None
    drive(chat.session, range(40))
    assert markers(lines(chat.session)).startswith("FC")
    first = flush_prompts(provider)[0]  # at the flush point, not at the empty /compact
    assert len(first.messages) > 40


def test_a_compaction_that_would_not_shrink_the_context_keeps_the_history(tmp_path):
    """Two short turns: a summary longer than what it replaces is not applied."""
    model = LoopModel()
    wordy = "## Goal\n" + "- a long and wordy summary of almost nothing at all\n" * 80
    provider, runtime, session = start(
        tmp_path, lambda request: wordy if is_summary(request) else model(request))
    chat = Chat.open(runtime, KEY)
    list(chat.handle("hi " + "and some more words " * 60))
    list(chat.handle("and hello"))
    before = list(session.history.messages)
    used = session.context_tokens()
    events = list(chat.handle("/compact"))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].startswith(
        "not compacted: the summary would not be smaller than the 2 messages it replaces (")
    assert notices[0].endswith("tokens); the history is unchanged")
    assert not any(isinstance(e, Compacted) for e in events)
    assert session.history.messages == before and session.history.summary is None
    assert session.context_tokens() == used
    assert not any(e["type"] == "compaction" for e in lines(session))
    assert session.store.get(KEY)["compactionCount"] == 0


def test_a_compact_of_too_little_history_asks_the_model_nothing(tmp_path):
    """A 1.5B model took two minutes (a flush, then a summary) to say this."""
    model = LoopModel()
    provider, runtime, session = start(tmp_path, model)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("hi"))
    list(chat.handle("and hello"))
    asked = len(provider.requests)
    events = list(chat.handle("/compact"))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].startswith(
        "not compacted: the 2 messages before the latest turn hold ")
    assert notices[0].endswith("too few for a summary to save room; the history is unchanged")
    assert len(provider.requests) == asked  # no flush, no summary
    assert session.history.summary is None


def test_compact_in_a_script_says_it_once(tmp_path, capsys):
    from clawd.frontends.render import Renderer
    from clawd.frontends.render import drive as render_all

    provider, runtime, session = start(tmp_path, LoopModel())
    chat = Chat.open(runtime, KEY)
    for i in range(15):
        list(chat.handle(user_text(i)))
    out, side = io.StringIO(), io.StringIO()
    render_all(chat.handle("/compact"), Renderer(out, side=side, color=False).event)
    assert out.getvalue() == ""
    said = side.getvalue()
    assert said.count("compacted:") == 1
    assert "tokens (summarised in one request)" in said or "(summarised in parts" in said


# --- read-only workspaces ------------------------------------------------------------------------

@pytest.mark.slow  # a long session
def test_read_only_workspace_skips_the_flush_with_a_log_line(tmp_path, caplog):
    settings = {**SETTINGS, "workspaceAccess": "ro"}
    provider, runtime, session = start(tmp_path, settings=settings)
    with caplog.at_level(logging.INFO, logger="clawd"):
        events = drive(session, range(100))
    assert not flush_prompts(provider)
    cycles = len([e for e in lines(session) if e["type"] == "compaction"])
    assert cycles >= 3
    skipped = [e for e in events if isinstance(e, Flushed)]
    assert skipped and all(e.skipped for e in skipped)
    assert caplog.text.count("memory flush skipped") in (cycles, cycles + 1)
    assert len(skipped) == caplog.text.count("memory flush skipped")
    entry = session.store.get(KEY)
    assert entry["memoryFlushAt"] is None and entry["memoryFlushCompactionCount"] is None


@pytest.mark.files_only  # a read-only mount of the memory folder
def test_read_only_memory_directory_skips_the_flush(tmp_path, monkeypatch, caplog):
    provider, runtime, session = start(tmp_path)
    memory = str(runtime.workspace / "memory")
    real_access = os.access
    # A read-only mount: access(W_OK) fails even for root.
    monkeypatch.setattr("clawd.workspace.files.os.access",
                        lambda p, mode: False if str(p) == memory and mode & os.W_OK
                        else real_access(p, mode))
    with caplog.at_level(logging.INFO, logger="clawd"):
        drive(session, range(45))
    assert not flush_prompts(provider)
    assert "memory flush skipped" in caplog.text
    assert [e for e in lines(session) if e["type"] == "compaction"]


@pytest.mark.files_only  # the memory folder's permissions
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_read_only_directory_permissions_skip_the_flush(tmp_path):
    provider, runtime, session = start(tmp_path)
    (runtime.workspace / "memory").chmod(0o555)
    try:
        drive(session, range(45))
    finally:
        (runtime.workspace / "memory").chmod(0o755)
    assert not flush_prompts(provider)


# --- a failing summariser ---------------------------------------------------------------------

def failing_summaries(simple_works: bool):
    model = LoopModel(lossy=True)

    def reply(request):
        if is_summary(request):
            simple = "Summarise the conversation below" in request.system[0]
            if not (simple and simple_works):
                raise ContextOverflowError("the summariser's window is smaller still")
        return model(request)
    return reply


def test_failing_summariser_leaves_a_truncation_note_and_the_flush_kept_the_facts(tmp_path):
    provider, runtime, session = start(tmp_path, failing_summaries(simple_works=False))
    events = drive(session, range(50))
    compactions = [e for e in lines(session) if e["type"] == "compaction"]
    assert compactions and {c["method"] for c in compactions} == {"truncated"}
    first = compactions[0]
    assert first["summary"].startswith("[Compaction note] Summarising failed")
    assert "the summariser's window is smaller still" in first["summary"]
    done = next(e for e in events if isinstance(e, Compacted))
    assert done.method == "truncated" and "Dropped:" in done.dropped
    # full prompt at chunkTokens and three halvings, then the simple prompt
    first_flush = provider.requests.index(flush_prompts(provider)[0])
    summaries = [r for r in provider.requests[first_flush:] if is_summary(r)]
    assert ["simple" if "Summarise the conversation below" in r.system[0] else "full"
            for r in summaries[:5]] == ["full"] * 4 + ["simple"]
    assert all(isinstance(e, TurnDone) and e.text.startswith("Reply")
               for e in events if isinstance(e, TurnDone))
    visible = facts_in("\n".join(m.text for m in session.history.messages))
    log = daily_log(runtime)
    assert all(f"FACT-{i:03d}" in visible or f"FACT-{i:03d}" in log for i in range(50))


def test_summariser_falls_back_to_the_simple_prompt(tmp_path):
    provider, runtime, session = start(tmp_path, failing_summaries(simple_works=True))
    drive(session, range(50))
    compactions = [e for e in lines(session) if e["type"] == "compaction"]
    assert compactions and {c["method"] for c in compactions} == {"simple"}


# --- an outage near the compaction point ------------------------------------------------------

def test_an_outage_at_the_compaction_point_leaves_the_history_as_it_was(tmp_path):
    """The server stops while a session is past its flush point: the turn ends with the
    error, no flush is counted, no compaction (no truncation note) is written, and the
    user's message is kept; once the server is back the flush and a real summary run."""
    provider, runtime, session = start(tmp_path)
    model = provider.default
    for i in range(100):
        if session.context_tokens() >= session.budget.flush_at - 300:
            break
        list(session.run_turn(user_text(i)))
    before = list(session.history.messages)
    entries = len(lines(session))
    provider.default = ProviderError("cannot reach http://127.0.0.1:9/v1: Connection refused",
                                     retryable=True)
    text = user_text(900, words=400)
    sent = len(provider.requests)
    events = list(session.run_turn(text))
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert errors == ["the memory flush stopped: cannot reach http://127.0.0.1:9/v1: "
                      "Connection refused"]
    assert not any(isinstance(e, (Compacted, Flushed)) for e in events)
    assert events[-1].failed
    assert len(provider.requests) == sent + 1 and is_flush(provider.requests[-1])
    assert session.history.summary is None
    assert session.history.messages == [*before, session.history.messages[-1]]
    assert session.history.messages[-1].text == text
    new = lines(session)[entries:]
    assert not any(e["type"] == "compaction" for e in new)
    assert session.store.get(KEY)["memoryFlushCount"] == 0
    # compaction's own outage (the flush already ran in this cycle) stops the same way
    provider.default = model
    list(session.run_turn(user_text(901)))
    assert session.store.get(KEY)["memoryFlushCount"] == 1
    provider.default = ProviderError("upstream 503", retryable=True, status=503)
    kept = list(session.history.messages)
    events = list(session.run_turn(user_text(902, words=600)))
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == [
        "compaction stopped, the history is unchanged: upstream 503"]
    assert session.history.messages[:-1] == kept and session.history.summary is None
    # back up: a real summary, never a truncation note
    provider.default = model
    events = list(session.run_turn(user_text(903)))
    done = [e for e in events if isinstance(e, Compacted)]
    assert done and done[0].method != "truncated" and events[-1].text.startswith("Reply")


@pytest.mark.parametrize("profile", ["weak", "strong"])
def test_a_summary_line_nothing_said_is_left_out_under_the_weak_profile(tmp_path, profile):
    """A 1.5B model's summary said "The user decided to use Python 3.9 for … tidepool"."""
    from clawd.loop.runtime import fixed_models

    model = LoopModel()
    invented = "- The user decided to use Python 3.9 for the tidepool app."
    summary = ("## Goal\n- Build tidepool, a tide chart app that works offline.\n"
               f"## Decisions\n{invented}\n## Next\n- Store the tides locally.")
    provider, runtime, session = start(
        tmp_path, lambda request: summary if is_summary(request) else model(request))
    runtime.models = fixed_models(provider, WINDOW, profile=profile)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("I am building tidepool, a tide chart app that works offline. "
                     + "It should store the tides locally. " * 40))
    list(chat.handle("thanks"))
    events = list(chat.handle("/compact"))
    assert [e for e in events if isinstance(e, Compacted)]
    kept = chat.session.history.summary or ""
    notices = [e.text for e in events if isinstance(e, Notice)]
    if profile == "weak":
        assert invented not in kept and "## Decisions" not in kept
        assert "Build tidepool" in kept and "Store the tides locally" in kept
        assert notices == ["left out of the summary, as nothing in the conversation said it: "
                           "The user decided to use Python 3.9 for the tidepool app."]
    else:  # a strong model's summary is taken as it wrote it
        assert invented in kept and notices == []


def test_a_true_line_left_out_by_mistake_comes_back_in_the_users_words(tmp_path):
    """A line holding a user's number and name beside one nobody said ("2027") is left out;
    the user's own sentence is then appended word for word, so the start date is not lost
    with it (the user's words were once appended before the line went, and counted it)."""
    from clawd.context.references import HEADING
    from clawd.loop.runtime import fixed_models

    model = LoopModel()
    summary = ("## Decisions\n- A fitter, Rui, will start on 3 February 2027.\n"
               "- The worktop is oak.")
    provider, runtime, session = start(
        tmp_path, lambda request: summary if is_summary(request) else model(request))
    runtime.models = fixed_models(provider, WINDOW, profile="weak")
    chat = Chat.open(runtime, KEY)
    list(chat.handle("The fitter, Rui, starts on 3 February. The worktop is oak. "
                     + "We keep the plumbing where it is. " * 40))
    list(chat.handle("thanks"))
    events = list(chat.handle("/compact"))
    kept = chat.session.history.summary or ""
    assert "2027" not in kept and "The worktop is oak." in kept
    assert HEADING in kept and "The fitter, Rui, starts on 3 February." in kept
    assert [e.text for e in events if isinstance(e, Notice)][0].startswith(
        "left out of the summary")
