"""Model profiles: the guards a model runs. A strong model pays no request for a weak
model's habits; a weak one keeps every guard; the config picks and switches them."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from clawd.config import parse_config
from clawd.config.schema import GUARD_NAMES
from clawd.core.errors import ConfigError
from clawd.core.events import Notice, ToolFinished
from clawd.core.messages import Message
from clawd.core.thresholds import Thresholds
from clawd.guards.base import TurnView
from clawd.guards.profile import (
    FLUSH_GUARDS,
    PROFILES,
    RECALL_GUARDS,
    STEP_GUARDS,
    SUMMARY_GUARDS,
    TOOL_GUARDS,
    TURN_END_GUARDS,
    make_profile,
)
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers import registry
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime
from loopmodel import filler, is_flush, talk_until_flush

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")


def session_with(tmp_path, provider, profile: str, **kw) -> Session:
    runtime = make_runtime(tmp_path, provider, **kw)
    runtime.models = fixed_models(provider, kw.get("window", 200_000), profile=profile)
    return Session.open(runtime, KEY)


# the weak model's habits, each answered once more under "weak" and taken as it is under
# "strong": (the turn's message, the model's replies, what the weak profile's extra request
# is about)
HABITS = {
    "blank": ("What is the capital of Portugal?", ["", "Lisbon."]),
    "echo": ("Tell me something about the history of the Lisbon tram network please",
             ["Tell me something about the history of the Lisbon tram network please",
              "Tram 28 has run since 1914."]),
    "note_claim": ("Remember that my sister Ines arrives on May 14.",
                   ["I've saved that to your notes.",
                    Reply("", [tool("write", path=DAILY, content="- Ines arrives May 14",
                                    append=True)]), "Saved."]),
}


@pytest.mark.parametrize("habit", sorted(HABITS))
def test_a_strong_model_pays_no_request_where_a_weak_one_is_asked_again(tmp_path, habit):
    text, replies = HABITS[habit]
    weak = ScriptedProvider(list(replies))
    list(session_with(tmp_path / "weak", weak, "weak").run_turn(text))
    weak.assert_done()
    assert len(weak.requests) == len(replies)  # asked again: more than one request
    strong = ScriptedProvider(list(replies))
    events = list(session_with(tmp_path / "strong", strong, "strong").run_turn(text))
    assert len(strong.requests) == 1  # the first answer is the answer
    if habit == "blank":  # said, at no cost
        assert [e.text for e in events if isinstance(e, Notice)] == [
            "the model returned an empty reply; nothing to show"]


def test_repeated_writes_are_made_again_only_without_the_guard(tmp_path):
    write = Reply("", [tool("write", path=DAILY, content="- Ines arrives on May 14", append=True)])
    for profile, results in (("weak", [False, True]), ("strong", [False, False])):
        provider = ScriptedProvider([write, write, "Done."])
        session = session_with(tmp_path / profile, provider, profile)
        events = list(session.run_turn("Note it: Ines arrives on May 14."))
        finished = [e for e in events if isinstance(e, ToolFinished)]
        assert not any(e.is_error for e in finished)  # a repeat is no failure either way
        assert [e.text.startswith("already done") for e in finished] == results, profile


@pytest.mark.slow  # long sessions
def test_a_strong_models_flush_is_taken_as_it_answers(tmp_path):
    """NO_REPLY from a strong model means nothing to save: not asked again, and the user's
    words are not saved in its place."""
    for profile, flush_requests in (("weak", 2), ("strong", 1)):
        provider = ScriptedProvider()
        comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
                "memoryFlush": {"softThresholdTokens": 1000}}
        session = session_with(tmp_path / profile, provider, profile, window=8000,
                               settings={"compaction": comp})
        talk_until_flush(session, provider,
                         say=lambda i: f"My locker code is K-{i}. {filler(40, i)}")
        provider.add("NO_REPLY", "NO_REPLY", "Sure.")
        list(session.run_turn(f"one more {filler(400)}"))
        assert len([r for r in provider.requests if is_flush(r)]) == flush_requests, profile
        written = session.rt.files.stat(DAILY) is not None
        assert written is (profile == "weak")  # the weak model's: the user's words


@pytest.mark.slow  # long sessions
def test_a_flush_answer_of_fragments_keeps_the_users_words_beside_it(tmp_path):
    """Seen with Qwen2.5-Coder-1.5B: the flush's second answer "- Porto\n- Last month\n-
    Dr. Sousa" was saved as the notes, and what about Porto was lost. The facts the user
    told that no line holds are now kept too, in their words."""
    provider = ScriptedProvider()
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    session = session_with(tmp_path, provider, "weak", window=8000,
                           settings={"compaction": comp})
    talk_until_flush(session, provider,
                     say=lambda i: f"I moved to Porto last month. {filler(40, i)}")
    provider.add("NO_REPLY", "- Porto\n- Last month", "Sure.")
    list(session.run_turn(f"one more {filler(400)}"))
    log = session.rt.files.read(DAILY)
    assert "- Porto\n- Last month" in log and "- I moved to Porto last month." in log


def test_the_profiles_hold_what_they_say():
    assert PROFILES["weak"].guards == frozenset(GUARD_NAMES)
    assert PROFILES["strong"].guards == frozenset()
    assert set(GUARD_NAMES) == (set(STEP_GUARDS) | set(FLUSH_GUARDS) | set(TOOL_GUARDS)
                                | set(SUMMARY_GUARDS) | set(RECALL_GUARDS)
                                | set(TURN_END_GUARDS))
    assert [g.name for g in PROFILES["weak"].step_guards().guards] == list(STEP_GUARDS)
    lean = make_profile("weak", {"echo": False})
    assert "echo" not in lean.guards and lean.name == "weak+"
    assert make_profile("strong", {"looping": True}).guards == {"looping"}
    # one cap on asking again, the profile's, for its step and flush guards alike
    assert lean.max_asks == PROFILES["weak"].max_asks == 2
    flush = lean.flush_guards([], date(2026, 11, 22), summarised=False)
    assert lean.step_guards().max_asks == flush.max_asks == 2


def test_a_profile_tunes_its_guards_numbers():
    """Each guard judges by its profile's thresholds: a profile asking for a longer
    message before an echo counts lets the same reply through."""
    weak = PROFILES["weak"]
    said = "By the way, my budget is 2400 euros in total."
    view = TurnView(text=said)
    echo = next(g for g in weak.step_guards().guards if g.name == "echo")
    assert echo.answer(Message.assistant(said), view) is not None
    tuned = dataclasses.replace(weak, thresholds=Thresholds(echo_words=20))
    echo = next(g for g in tuned.step_guards().guards if g.name == "echo")
    assert echo.answer(Message.assistant(said), view) is None
    flush = tuned.flush_guards([], date(2026, 11, 22), summarised=False)
    assert {g.tuning for g in flush.guards} == {tuned.thresholds}


def test_the_config_picks_a_profile_per_provider_and_model():
    config = parse_config("""{models: {providers: {
        local: {api: "openai-completions", baseUrl: "http://127.0.0.1:8080/v1",
                models: [{id: "big", profile: "strong"}, {id: "small", guards: {echo: false}}]},
        tuned: {api: "openai-completions", baseUrl: "http://127.0.0.1:8081/v1",
                profile: "strong", guards: {looping: true}},
    }}}""")
    assert registry.profile_settings(config, "anthropic/claude-sonnet-4-6") == ("strong", {})
    assert registry.profile_settings(config, "openai/gpt-4o") == ("strong", {})
    assert registry.profile_settings(config, "local/small") == ("weak", {"echo": False})
    assert registry.profile_settings(config, "local/big") == ("strong", {})
    assert registry.profile_settings(config, "local/other") == ("weak", {})
    assert registry.profile_settings(config, "tuned/m") == ("strong", {"looping": True})


@pytest.mark.parametrize("text, fragment", [
    ("{models: {providers: {local: {profile: 'medium'}}}}", "models.providers.local.profile"),
    ("{models: {providers: {local: {guards: {echoes: false}}}}}",
     "models.providers.local.guards"),
    ("{models: {providers: {local: {guards: {echo: 'no'}}}}}", "use true or false"),
])
def test_a_bad_profile_or_guard_is_a_config_error(text, fragment):
    with pytest.raises(ConfigError, match="models.providers.local"):
        parse_config(text)
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert fragment in str(info.value)


def test_decide_never_asks_after_the_last_step():
    from clawd.core.messages import Message
    from clawd.guards.base import TurnView
    from clawd.loop.turn import Answer, Stop, decide

    guards = PROFILES["weak"].step_guards()
    turn = TurnView(text="Remember that Ines arrives on May 14.", offers_writes=True,
                    daily_log=DAILY)
    claim = Message.assistant("I've saved that to your notes.")
    assert decide(claim, turn, guards, last_step=False, steps=1).guard == "note_claim"
    last = decide(claim, turn, guards, last_step=True, steps=25)
    assert isinstance(last, Stop) and last.notice.startswith("the model said")
    blank = decide(Message.assistant(""), turn, guards, last_step=True, steps=25)
    assert isinstance(blank, Answer)
    strong = decide(claim, turn, PROFILES["strong"].step_guards(), last_step=False, steps=1)
    assert isinstance(strong, Answer)


def test_tool_calls_after_a_request_for_words_stop_the_turn(tmp_path):
    """A model told to answer in words (the repeated write was answered without running)
    that calls the same tool again is stopped, with a notice, not run until the step limit."""
    write = Reply("", [tool("write", path=DAILY, content="- Ines: May 14\n", append=True)])
    provider = ScriptedProvider([write, write, write, write])
    session = session_with(tmp_path, provider, "weak")
    events = list(session.run_turn("Ines arrives on May 14."))
    assert session.rt.files.read(DAILY).count("Ines") == 1
    assert [r.tool_choice for r in provider.requests] == ["auto", "auto", "none"]
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[-2].startswith("stopped: the model kept calling tools")
    assert notices[-1] == f"what this turn did: wrote {DAILY}"  # no words shown


def test_the_flush_runs_in_the_turns_loop_with_its_own_guards():
    """The flush's guards: calls written as text, repeated writes, junk notes and the retry
    for its notes under "weak"; none of the user-facing answer guards; nothing at all under
    "strong"."""
    from datetime import date

    weak = PROFILES["weak"].flush_guards([], date(2026, 11, 22), summarised=False)
    assert weak.names == ["text_calls", "swallowed_args", "repeated_writes", "repeated_reads",
                          "junk_notes", "founded_notes", "flush_retry"]
    assert PROFILES["strong"].flush_guards([], date(2026, 11, 22), summarised=False).names == []


@pytest.mark.parametrize("spelled", [
    '{"name": "write", "arguments": {"path": "memory/2026-11-22.md", '
    '"content": "- My dentist is Dr. Sousa", "append": true}}',
    '<tool_call>\n{"name": "write", "arguments": {"path": "memory/2026-11-22.md", '
    '"content": "- My dentist is Dr. Sousa", "append": true}}\n</tool_call>',
    '```json\n{"name": "write", "arguments": "{\\"path\\": \\"memory/2026-11-22.md\\", '
    '\\"content\\": \\"- My dentist is Dr. Sousa\\", \\"append\\": true}"}\n```',
])
def test_a_call_written_as_text_is_run_under_the_weak_profile_never_shown(tmp_path, spelled):
    """Seen with Qwen2.5-Coder-1.5B on llama.cpp: after a write, the model's next "answer"
    was the call again as JSON text, and the user saw the JSON."""
    text = "Also remember: my dentist is Dr. Sousa."
    weak = ScriptedProvider([spelled, "Noted: Dr. Sousa is your dentist."])
    session = session_with(tmp_path / "weak", weak, "weak")
    events = list(session.run_turn(text))
    shown = "".join(e.text for e in events if type(e).__name__ == "TextDelta")
    assert shown == "Noted: Dr. Sousa is your dentist." and "{" not in shown
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["write"]
    assert "- My dentist is Dr. Sousa" in session.rt.files.read(DAILY)
    strong = ScriptedProvider([spelled])  # a strong model's reply is kept as it wrote it
    events = list(session_with(tmp_path / "strong", strong, "strong").run_turn(text))
    assert not [e for e in events if isinstance(e, ToolFinished)]


SWALLOWED = 'memory/2026-11-20.md", "offset": 2, "limit": 1}'


def test_arguments_swallowed_by_the_path_are_taken_back_out_under_the_weak_profile(tmp_path):
    """llama.cpp handed a 1.5B model's call over as memory_get with the path
    'memory/2026-11-27.md", "from": 1, "lines": 15}', and the tool refused that path."""
    call = Reply("", [tool("read", path=SWALLOWED)])
    for profile, error in (("weak", False), ("strong", True)):
        provider = ScriptedProvider([call, "Your space is C07."])
        session = session_with(tmp_path / profile, provider, profile)
        session.rt.files.write("memory/2026-11-20.md",
                               "# 2026-11-20\n- Parking space C07\n- Gym on Fridays\n")
        events = list(session.run_turn("What is my parking space?"))
        [done] = [e for e in events if isinstance(e, ToolFinished)]
        assert done.is_error is error, profile
        if not error:
            assert "- Parking space C07" in done.text and "Gym" not in done.text
        provider.assert_done()


@pytest.mark.parametrize("arguments, repaired", [
    ({"path": SWALLOWED}, {"path": "memory/2026-11-20.md", "offset": 2, "limit": 1}),
    # given beside it too: those stay as given
    ({"path": 'a.md", "content": "x\\ny", "append": true}', "content": "x\\ny"},
     {"path": "a.md", "content": "x\\ny", "append": True}),
    ({"path": "a.md", "content": '{"a": "x", "b": 1}'}, None),  # JSON content, left alone
    ({"path": "a.md", "content": 'he said "hi", "bye" {x}'}, None),
])
def test_unswallowed_reads_a_value_as_the_rest_of_the_arguments(arguments, repaired):
    from clawd.guards.step_guards import unswallowed
    assert unswallowed(arguments) == (repaired or arguments)


@pytest.mark.parametrize("text", [
    '{"name": "Ines", "age": 3}',  # JSON data, not a call
    'Here is the call: {"name": "write", "arguments": {"path": "a.md", "content": "x"}}',
    '{"name": "write", "arguments": {"path": "a.md"}} and then I stopped',
    '{"name": "write", "arguments": [1, 2]}',
])
def test_text_that_is_not_only_calls_stays_text(text):
    from clawd.guards.step_guards import text_calls
    assert text_calls(text) == []


def test_several_calls_written_as_text_are_each_taken():
    from clawd.guards.step_guards import text_calls
    calls = text_calls('<tool_call>{"name": "read", "arguments": {"path": "a.md"}}</tool_call>'
                       '\n<tool_call>{"name": "memory_get", "arguments": {"path": "b.md"}}'
                       '</tool_call>')
    assert [(c.name, c.arguments) for c in calls] == [("read", {"path": "a.md"}),
                                                      ("memory_get", {"path": "b.md"})]
    assert len({c.id for c in calls}) == 2


def test_a_read_already_made_in_the_turn_is_not_made_again_under_the_weak_profile(tmp_path):
    """Seen with Qwen2.5-Coder-1.5B: read and memory_get of the same five lines, turn about,
    then the same read 40 times; the turn ended with nothing shown."""
    read = Reply("", [tool("read", path="notes.md", offset=1, limit=5)])
    other = Reply("", [tool("read", path="memory/2026-11-20.md")])
    for profile, errors in (("weak", [False, False, True]), ("strong", [False, False, False])):
        provider = ScriptedProvider([read, other, read, "Your space is C07."])
        session = session_with(tmp_path / profile, provider, profile)
        session.rt.files.write("notes.md", "- Parking space: C07\n")
        session.rt.files.write("memory/2026-11-20.md", "- Parking: C07\n")
        events = list(session.run_turn("What is my parking space?"))
        finished = [e for e in events if isinstance(e, ToolFinished)]
        assert [e.is_error for e in finished] == errors, profile
        if profile == "weak":
            assert "not run again" in finished[-1].text
            assert provider.requests[-1].tool_choice == "none"  # the answer, in words
        assert "".join(e.text for e in events if type(e).__name__ == "TextDelta") == \
            "Your space is C07."


def test_a_read_after_a_write_may_be_made_again():
    from clawd.guards.base import TurnView
    from clawd.guards.step_guards import RepeatedReads

    guard, turn = RepeatedReads(), TurnView(text="")
    read = tool("read", path="memory/2026-11-22.md")
    assert guard.refuse(read, turn) is None
    assert guard.refuse(tool("exec", command="ls"), turn) is None
    assert guard.refuse(tool("exec", command="ls"), turn) is None  # polling is fine
    assert guard.refuse(read, turn).final
    assert guard.refuse(tool("write", path=DAILY, content="- x y", append=True), turn) is None
    assert guard.refuse(read, turn) is None  # the file may have changed
    assert guard.refuse(read, TurnView(text="")) is None  # a new turn
