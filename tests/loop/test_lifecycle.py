"""Session lifecycle: /new and /reset, daily and idle resets, the session-memory file."""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timedelta, timezone
from fnmatch import fnmatch

import pytest

from clawd.config import Reset, SessionMemoryHook, parse_config
from clawd.core.events import CommandOutput, ErrorEvent, Notice, TurnDone
from clawd.core.messages import Message
from clawd.frontends.commands import Chat
from clawd.loop.lifecycle import end_session_memory, reset_reason, sanitize_slug
from clawd.providers.scripted import Reply, ScriptedProvider
from clawd.storage.files.workspace import DiskFiles

from conftest import Clock, make_runtime, stored_text, transcript_lines

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")


def slug_or(text):
    """A scripted reply: a slug for slug requests (no tools), ``text`` otherwise."""
    def reply(request):
        return "api-rate-limits" if not request.tools else text
    return reply


def test_new_starts_a_fresh_session_and_keeps_the_old_transcript(tmp_path, clock):
    provider = ScriptedProvider([slug_or("first answer"), slug_or("ok")] + [slug_or("x")] * 3)
    runtime = make_runtime(tmp_path, provider, clock=clock)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("we chose 100 requests per minute for the API"))
    old_entry, old_log = dict(chat.session.entry), chat.session.transcript
    events = list(chat.handle("/new"))
    old_lines = transcript_lines(old_log)
    assert old_lines[-1].get("flush") is True  # the once-per-cycle flush ran before the end
    assert any(isinstance(e, CommandOutput) and e.name == "new" for e in events)
    new_entry = chat.session.store.get(KEY)
    assert new_entry["sessionId"] != old_entry["sessionId"]
    assert new_entry["inputTokens"] == 0 and new_entry["compactionCount"] == 0
    old_bytes = stored_text(old_log)
    list(chat.handle("next topic"))
    assert stored_text(old_log) == old_bytes  # untouched once the new session runs
    assert [m.text for m in chat.session.history.messages][0] == "next topic"
    text = runtime.files.read("memory/2026-11-22-api-rate-limits.md")
    assert KEY in text and old_entry["sessionId"] in text
    assert "100 requests per minute" in text and "first answer" in text
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert any("memory/2026-11-22-api-rate-limits.md" in n for n in notices), notices


def test_the_saved_session_keeps_the_summary_of_what_compaction_took_out(tmp_path, clock):
    def reply(request):
        last = request.messages[-1]
        if "file-name slug" in last.text:
            return "lisbon-trip"
        if not request.tools:  # the compaction summary
            return "## Goal\nPlan the Lisbon trip; the budget is 2400 euros in total."
        return "- budget 2400 euros" if last.flush else "ok"

    provider = ScriptedProvider(default=reply)
    runtime = make_runtime(tmp_path, provider, clock=clock)
    chat = Chat.open(runtime, KEY)
    padding = " and so on" * 60  # long enough that a summary saves room
    for text in ("my budget for the Lisbon trip is 2400 euros" + padding,
                 "and a museum list?" + padding, "which day is best?"):
        list(chat.handle(text))
    list(chat.handle("/compact"))
    assert "2400" not in " ".join(m.text for m in chat.session.history.messages)
    list(chat.handle("/new"))
    text = runtime.files.read("memory/2026-11-22-lisbon-trip.md")
    assert "after a summary of the earlier ones" in text
    summary = text.index("## Summary of the earlier messages\n\n## Goal\nPlan the Lisbon "
                         "trip; the budget is 2400 euros in total.\n")
    assert summary < text.index("## Conversation") < text.index("which day is best?")


def test_new_with_model_switches_model(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("ok"))
    chat = Chat.open(make_runtime(tmp_path, provider, clock=clock), KEY)
    list(chat.handle("hello"))
    list(chat.handle("/new openai/gpt-4o"))
    assert chat.session.model_ref == "openai/gpt-4o"


def test_new_keeps_a_chosen_model_and_otherwise_follows_the_config(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("ok"))
    runtime = make_runtime(tmp_path, provider, clock=clock)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("hello"))
    assert "modelOverride" not in chat.session.entry
    runtime.settings.model = "openai/gpt-4o-mini"
    list(chat.handle("/new"))
    assert chat.session.model_ref == "openai/gpt-4o-mini"
    list(chat.handle("/model anthropic/claude-test"))
    list(chat.handle("/reset"))
    runtime.settings.model = "openai/gpt-4o"
    assert chat.session.model_ref == "anthropic/claude-test"
    assert chat.session.entry["modelOverride"] == "anthropic/claude-test"


def test_reset_and_files_are_never_overwritten(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("ok"))
    runtime = make_runtime(tmp_path, provider, clock=clock)
    chat = Chat.open(runtime, KEY)
    for _ in range(3):
        list(chat.handle("talk about limits"))
        list(chat.handle("/reset"))
    names = sorted(p.removeprefix("memory/") for p in runtime.files.listing("memory")
                   if fnmatch(p, "memory/2026-11-22-*.md"))
    assert names == ["2026-11-22-api-rate-limits-2.md", "2026-11-22-api-rate-limits-3.md",
                     "2026-11-22-api-rate-limits.md"]


def test_nothing_saved_for_an_empty_session(tmp_path, clock):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider(), clock=clock), KEY)
    list(chat.handle("/new"))
    assert not [p for p in chat.runtime.files.listing("memory") if p.endswith(".md")]


@pytest.mark.parametrize("reply, expected", [
    (RuntimeError("boom"), "1000"),
    ("!!!", "1000"),
    ("Deploy Pipeline Fix for the Staging Cluster and More", "deploy-pipeline-fix-for-the"),
])
def test_slug_failures_fall_back_to_hhmm(tmp_path, reply, expected):
    from clawd.core.errors import ProviderError
    step = ProviderError("down") if isinstance(reply, Exception) else reply
    provider = ScriptedProvider([step])
    when = datetime(2026, 11, 22, 10, 0)
    path = end_session_memory(provider, DiskFiles(tmp_path), [Message.user("hi")],
                              cfg=SessionMemoryHook(), key=KEY, session_id="s1",
                              reason="/new", now=when)
    assert path == f"memory/2026-11-22-{expected}.md"


def test_slug_timeout_falls_back_to_hhmm(tmp_path):
    def slow(request):
        time.sleep(2)
        return "too-late"
    provider = ScriptedProvider([slow])
    when = datetime(2026, 11, 22, 7, 5)
    path = end_session_memory(provider, DiskFiles(tmp_path), [Message.user("hi")],
                              cfg=SessionMemoryHook(slug_timeout_seconds=0.2), key=KEY,
                              session_id="s1", reason="/new", now=when)
    assert path == "memory/2026-11-22-0705.md"


def test_a_session_the_model_gave_no_name_is_named_by_its_first_words(tmp_path):
    def failing(request):
        raise RuntimeError("the server is gone")
    messages = [Message.user("My sister Inês lives in Porto and teaches piano."),
                Message.assistant("Noted.")]
    path = end_session_memory(ScriptedProvider(default=failing), DiskFiles(tmp_path),
                              messages, cfg=SessionMemoryHook(), key=KEY, session_id="s1",
                              reason="/new", now=datetime(2026, 11, 22, 16, 38))
    assert path == "memory/2026-11-22-sister-ines-lives-porto.md"
    assert (tmp_path / path).read_text().startswith(
        "# Session 2026-11-22 16:38: sister-ines-lives-porto\n")


def test_hook_takes_the_last_n_messages(tmp_path):
    messages = [Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
                for i in range(40)]
    path = end_session_memory(None, DiskFiles(tmp_path), messages,
                              cfg=SessionMemoryHook(messages=15), key=KEY, session_id="s1",
                              reason="/new", now=datetime(2026, 11, 22, 9, 30))
    text = (tmp_path / path).read_text()
    assert "a39" in text and "a25" in text and "u24" not in text


@pytest.mark.parametrize("text, slug", [("Rate-Limit Debugging", "rate-limit-debugging"),
                                        ("  \n", None), ("a" * 40, None),
                                        ("Über Café Plans!", "uber-cafe-plans"),
                                        ("kyoto-itinerary-packing-list-essentials",
                                         "kyoto-itinerary-packing-list"),
                                        ("MOTDueOnJanuary", "mot-due-on-january"),
                                        ("carInsurance2026", "car-insurance-2026"),
                                        ("HTTPServerLogs", "http-server-logs")])
def test_sanitize_slug(text, slug):
    assert sanitize_slug(text) == slug


def test_a_number_the_conversation_never_held_is_left_out_of_the_slug(tmp_path):
    provider = ScriptedProvider(["MOTDueOnJanuary2023"])
    messages = [Message.user("Please remember that my car's MOT is due on 9 January."),
                Message.assistant("Noted: MOT on 9 January.")]
    path = end_session_memory(provider, DiskFiles(tmp_path), messages, cfg=SessionMemoryHook(),
                              key=KEY, session_id="s1", reason="/new",
                              now=datetime(2026, 11, 22, 9, 30))
    assert path == "memory/2026-11-22-mot-due-on-january.md"
    assert sanitize_slug("budget-2400-lisbon", said="budget: 2400 euros") == "budget-2400-lisbon"


def test_a_slug_cut_by_the_token_limit_loses_its_last_fragment(tmp_path):
    provider = ScriptedProvider([Reply("kyoto-itinerary-packing-list-e", stop_reason="length")])
    messages = [Message.user("help me pack for kyoto"), Message.assistant("sure")]
    path = end_session_memory(provider, DiskFiles(tmp_path), messages, cfg=SessionMemoryHook(),
                              key=KEY, session_id="s1", reason="/new",
                              now=datetime(2026, 11, 22, 9, 30))
    assert path == "memory/2026-11-22-kyoto-itinerary-packing-list.md"
    assert sanitize_slug("short-e", cut=True) == "short"


UTC = timezone.utc


@pytest.mark.parametrize("mode, last, now, expected", [
    ("off", "2026-11-20T10:00:00+00:00", datetime(2026, 11, 22, 10, tzinfo=UTC), None),
    ("daily", "2026-11-22T03:59:00+00:00", datetime(2026, 11, 22, 4, 1, tzinfo=UTC), "daily"),
    ("daily", "2026-11-22T04:01:00+00:00", datetime(2026, 11, 22, 23, tzinfo=UTC), None),
    ("daily", "2026-11-21T23:00:00+00:00", datetime(2026, 11, 22, 3, 0, tzinfo=UTC), None),
    ("daily", "2026-11-21T03:00:00+00:00", datetime(2026, 11, 22, 3, 0, tzinfo=UTC), "daily"),
    ("idle", "2026-11-22T09:00:00+00:00", datetime(2026, 11, 22, 9, 29, tzinfo=UTC), None),
    ("idle", "2026-11-22T09:00:00+00:00", datetime(2026, 11, 22, 9, 30, tzinfo=UTC), "idle"),
    ("both", "2026-11-22T03:50:00+00:00", datetime(2026, 11, 22, 4, 5, tzinfo=UTC), "daily"),
    ("both", "2026-11-22T05:00:00+00:00", datetime(2026, 11, 22, 6, 0, tzinfo=UTC), "idle"),
    # daily with idleMinutes: whichever comes first
    ("daily+idle", "2026-11-22T05:00:00+00:00", datetime(2026, 11, 22, 5, 29, tzinfo=UTC),
     None),
    ("daily+idle", "2026-11-22T05:00:00+00:00", datetime(2026, 11, 22, 5, 30, tzinfo=UTC),
     "idle"),
    ("daily+idle", "2026-11-22T03:50:00+00:00", datetime(2026, 11, 22, 4, 5, tzinfo=UTC),
     "daily"),
])
def test_reset_policy(mode, last, now, expected):
    cfg = {"off": Reset(), "daily": Reset(mode="daily", at_hour=4),
           "idle": Reset(mode="idle", idle_minutes=30),
           "both": Reset(mode="both", at_hour=4, idle_minutes=30),
           "daily+idle": parse_config('{session: {reset: {mode: "daily", idleMinutes: 30}}}'
                                      ).session.reset}[mode]
    reason = reset_reason({"updatedAt": last}, now, cfg)
    assert (reason or "").startswith(expected or "") and (reason is None) == (expected is None)


@pytest.mark.parametrize("minutes, expected", [(1, "idle for more than 1 minute"),
                                               (2, "idle for more than 2 minutes")])
def test_idle_reason_says_minute_or_minutes(minutes, expected):
    last = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    now = last + timedelta(minutes=minutes)
    assert reset_reason({"updatedAt": last.isoformat()}, now,
                        Reset(mode="idle", idle_minutes=minutes)) == expected


def test_idle_reset_on_next_message_tells_the_user(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("fine"))
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.config.session.reset = Reset(mode="idle", idle_minutes=60)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    first_id = chat.session.entry["sessionId"]
    clock.advance(minutes=30)
    list(chat.handle("second"))
    assert chat.session.entry["sessionId"] == first_id
    clock.advance(minutes=61)
    events = list(chat.handle("third"))
    notice = next(e for e in events if isinstance(e, Notice))
    assert "idle for more than 60 minutes" in notice.text
    assert chat.session.entry["sessionId"] != first_id
    assert [m.text for m in chat.session.history.messages][0] == "third"
    assert isinstance(events[-1], TurnDone)


def test_daily_reset_applies_after_restart(tmp_path):
    clock = Clock(datetime(2026, 11, 22, 3, 30, tzinfo=UTC))
    provider = ScriptedProvider(default=slug_or("fine"))
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.config.session.reset = Reset(mode="daily", at_hour=4)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("late night"))
    first_id = chat.session.entry["sessionId"]
    clock.advance(hours=1)
    chat2 = Chat.open(runtime, KEY)  # a new process
    events = list(chat2.handle("morning"))
    assert chat2.session.entry["sessionId"] != first_id
    assert any(isinstance(e, Notice) and "daily reset at 04:00" in e.text for e in events)


def test_agents_are_isolated(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("ok"))
    a = make_runtime(tmp_path / "a", provider, clock=clock)
    b = make_runtime(tmp_path / "b", provider, clock=clock)
    b.agent_id = "work"
    list(Chat.open(a, "agent:main:main").handle("alpha secret"))
    list(Chat.open(b, "agent:work:main").handle("beta"))
    assert a.storage.location != b.storage.location and a.workspace != b.workspace
    store_b = b.store.entries()
    assert "agent:main:main" not in store_b
    text_b = "".join(stored_text(b.storage.transcript(i)) for i in b.storage.session_ids())
    assert "beta" in text_b and "alpha secret" not in text_b


def test_a_reset_that_fails_still_ends_the_turn(tmp_path, clock):
    provider = ScriptedProvider(default=slug_or("fine"))
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.config.session.reset = Reset(mode="idle", idle_minutes=60)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    clock.advance(minutes=61)
    resolve = runtime.models  # the new session cannot start: its window is too small
    runtime.models = lambda ref: dataclasses.replace(resolve(ref), context_window=1500)
    events = list(chat.handle("second"))
    assert any(isinstance(e, ErrorEvent) and "too small" in e.message for e in events)
    done = events[-1]
    assert isinstance(done, TurnDone) and done.failed and done.text == ""
    assert done.usage.input_tokens == 0 and done.session_key == KEY
