"""The turn loop with the scripted provider: streaming, tools, persistence, interruption."""

from __future__ import annotations

import dataclasses
import time

import pytest

from clawd.core.cancel import CancelToken
from clawd.core.errors import ProviderError, ProviderSetupError
from clawd.core.events import (
    ErrorEvent,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnDone,
    Waiting,
)
from clawd.core.messages import ModelResponse
from clawd.core.messages import TextDelta as Delta
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import make_runtime, transcript_lines

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")


def lines(session: Session) -> list[dict]:
    return transcript_lines(session)


def test_text_turn_streams_and_persists(tmp_path):
    provider = ScriptedProvider(["Hello there, how can I help?"])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("hi"))
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert deltas == "Hello there, how can I help?"
    assert isinstance(events[-1], TurnDone) and events[-1].text == deltas
    entries = lines(session)
    assert entries[0]["type"] == "session" and entries[0]["agentId"] == "main"
    assert [e["role"] for e in entries[1:]] == ["user", "assistant"]
    assert entries[2]["usage"]["input"] > 0
    entry = session.store.get(KEY)
    assert entry["inputTokens"] == entries[2]["usage"]["input"]
    assert entry["cumulativeInputTokens"] == entries[2]["usage"]["input"]
    assert entry["totalTokens"] == entries[2]["usage"]["input"]  # the latest prompt's size
    assert entry["contextTokens"] == 200_000  # the window, as in OpenClaw
    assert entry["contextUsedTokens"] > 0 and entry["lastModelCallAt"]
    provider.assert_done()


def test_multi_step_tool_turn(tmp_path):
    provider = ScriptedProvider([
        Reply("Writing it.", [tool("write", path="notes/a.md", content="alpha")]),
        Reply("", [tool("read", path="notes/a.md")]),
        "The file says alpha.",
    ])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("store alpha"))
    assert [e.name for e in events if isinstance(e, ToolStarted)] == ["write", "read"]
    assert runtime.files.read("notes/a.md") == "alpha"
    third = provider.requests[2]
    result = third.messages[-1]
    assert result.role == "toolResult" and "alpha" in result.text
    assert events[-1].text == "The file says alpha." and events[-1].steps == 3
    roles = [e.get("role") for e in lines(session)[1:]]
    assert roles == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]


def test_tool_errors_go_back_to_the_model(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("read", path="../../etc/passwd")]), "denied"])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("read it"))
    finished = [e for e in events if isinstance(e, ToolFinished)][0]
    assert finished.is_error and "escapes the workspace" in finished.preview
    assert provider.requests[1].messages[-1].is_error


def test_exec_is_refused_in_scripts_unless_allowed(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("exec", command="echo hi")]), "ok"] * 2)
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("run"))
    assert "disabled in non-interactive" in provider.requests[1].messages[-1].text
    session2 = Session.open(make_runtime(tmp_path / "b", provider, allow_exec=True), KEY)
    list(session2.run_turn("run"))
    assert "hi" in provider.requests[3].messages[-1].text
    assert "[exit code 0]" in provider.requests[3].messages[-1].text


def test_step_cap_stops_a_runaway_tool_loop(tmp_path):
    provider = ScriptedProvider(default=lambda request: Reply("", [  # a new read each step
        tool("read", path="AGENTS.md", offset=len(request.messages))]))
    session = Session.open(make_runtime(tmp_path, provider, settings={"maxSteps": 3}), KEY)
    events = list(session.run_turn("loop"))
    assert len(provider.requests) == 3
    assert any(isinstance(e, Notice) and "maxSteps" in e.text for e in events)


def test_a_stopped_turn_with_no_words_says_what_it_wrote(tmp_path):
    """A 1.5B model wrote a file and went on calling tools until the step cap: the person
    saw no reply, so the notices say what the turn did."""
    provider = ScriptedProvider(default=lambda request: Reply("", [tool(
        "write", path="notes/vet.md", content=f"Dr. Costa ({len(request.messages)})\n")]))
    session = Session.open(make_runtime(tmp_path, provider, settings={"maxSteps": 2}), KEY)
    notices = [e.text for e in session.run_turn("Note that Miso's vet is Dr. Costa.")
               if isinstance(e, Notice)]
    stop = next(i for i, text in enumerate(notices) if "maxSteps" in text)
    assert notices[stop + 1] == "what this turn did: wrote notes/vet.md"


def test_provider_error_mid_stream_keeps_partial_reply(tmp_path):
    class Cutting(ScriptedProvider):
        def stream(self, request):
            self.requests.append(request)
            yield Delta("Partial ans")
            raise ProviderError("connection lost mid-reply")

    session = Session.open(make_runtime(tmp_path, Cutting()), KEY)
    events = list(session.run_turn("question"))
    assert any(isinstance(e, ErrorEvent) and "connection lost" in e.message for e in events)
    last = lines(session)[-1]
    assert last["role"] == "assistant" and last["aborted"] is True
    assert last["content"][0]["text"] == "Partial ans"


def test_ctrl_c_mid_reply_keeps_partial_and_marks_it(tmp_path):
    class Interrupting(ScriptedProvider):
        def stream(self, request):
            self.requests.append(request)
            yield Delta("Half a th")
            raise KeyboardInterrupt

    session = Session.open(make_runtime(tmp_path, Interrupting()), KEY)
    events = list(session.run_turn("tell me"))
    assert events[-1].aborted is True
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "reply interrupted; the partial reply was kept"]
    entries = lines(session)
    assert entries[-2]["role"] == "user" and entries[-2]["content"][0]["text"] == "tell me"
    assert entries[-1]["aborted"] is True and entries[-1]["content"][0]["text"] == "Half a th"


def test_no_reply_is_never_shown(tmp_path):
    provider = ScriptedProvider(["NO_REPLY", "NO_REPLY - nothing to add", "NO, really"])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("a"))  # silent twice: hidden, and said in a notice
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ""
    assert events[-1].text == ""
    events = list(session.run_turn("c"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "NO, really"
    assert events[-1].text == "NO, really"


def test_history_is_reloaded_from_disk(tmp_path):
    provider = ScriptedProvider(["one", "two"])
    runtime = make_runtime(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn("first"))
    again = Session.open(runtime, KEY)
    assert [m.text for m in again.history.messages] == ["first", "one"]
    list(again.run_turn("second"))
    assert [m.text for m in provider.requests[1].messages] == ["first", "one", "second"]


def test_context_layers_in_request(tmp_path, clock):
    provider = ScriptedProvider(["ok"])
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.files.write("AGENTS.md", "agents rules")
    runtime.files.write("MEMORY.md", "secret long-term fact")
    runtime.files.write("memory/2026-11-22.md", "today note")
    runtime.files.write("memory/2026-11-21.md", "yesterday note")
    runtime.files.write("memory/2026-11-20.md", "older note")
    list(Session.open(runtime, KEY).run_turn("hi"))
    system, project = provider.requests[0].system
    assert "2026-11-22" in system and runtime.files.location in system
    assert "agents rules" in project and "secret long-term fact" in project
    assert "today note" in project and "yesterday note" in project
    assert "older note" not in project
    assert project.index("yesterday note") < project.index("today note")


def test_the_last_words_before_the_conversation_say_where_facts_go(tmp_path, clock):
    """A small model follows what comes right before the conversation best."""
    from clawd.context.layers import build_layers
    from clawd.core.messages import ToolSpec
    from clawd.storage.files.workspace import DiskFiles
    from clawd.tools.files import file_tools

    (tmp_path / "AGENTS.md").write_text("agents rules")
    tools = [t.spec for t in file_tools()]
    project = build_layers(DiskFiles(tmp_path), tools, private=True, now=clock(), max_chars=20_000,
                           read_only=False).project
    assert project.endswith("Answer the user's latest message. When it tells you something "
                            "worth keeping (a fact, a number, a name, a date, a decision), "
                            "first add it to memory/2026-11-22.md with `write` and "
                            "`append: true`.")
    for read_only, offered in ((True, tools), (False, [t for t in tools if t.name != "write"])):
        project = build_layers(DiskFiles(tmp_path), offered, private=True, now=clock(),
                               max_chars=20_000, read_only=read_only).project
        assert project.endswith("Answer the user's latest message.")
    search = ToolSpec("memory_search", "find notes", {"type": "object", "properties": {}})
    project = build_layers(DiskFiles(tmp_path), [search], private=True, now=clock(),
                           max_chars=20_000, read_only=True).project
    assert project.endswith("Answer the user's latest message. When it asks about something "
                            "from before, look it up with `memory_search` first.")


def test_a_tool_call_repeating_the_step_before_is_not_run_again(tmp_path):
    """A small model in a loop calls the same write again and again."""
    note = tool("write", path="memory/2026-11-22.md", content="- budget 2400\n", append=True)
    again = tool("write", path="memory/2026-11-22.md", content="- budget 2400\n", append=True)
    provider = ScriptedProvider([Reply("", [note]), Reply("", [again]), "Noted: 2400 euros."])
    runtime = make_runtime(tmp_path, provider)
    events = list(Session.open(runtime, KEY).run_turn("My budget is 2400 euros."))
    assert runtime.files.read("memory/2026-11-22.md") == "- budget 2400\n"
    repeated = provider.requests[2].messages[-1]
    assert not repeated.is_error and repeated.text.startswith("already done: the step before "
                                                              "made this same call")
    assert [r.tool_choice for r in provider.requests] == ["auto", "auto", "none"]
    assert events[-1].text == "Noted: 2400 euros."
    provider.assert_done()


def test_the_same_note_again_with_a_trailing_break_is_a_repeat(tmp_path):
    """A 1.5B model wrote its note, then the same note with ``\\n`` at its end."""
    note = tool("write", path="memory/2026-11-22.md", content="- budget 2400", append=True)
    again = tool("write", path="memory/2026-11-22.md", content="- budget 2400\\n ",
                 append=True)
    provider = ScriptedProvider([Reply("", [note]), Reply("", [again]), "Noted: 2400 euros."])
    runtime = make_runtime(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn("My budget is 2400 euros."))
    assert runtime.files.read("memory/2026-11-22.md") == "- budget 2400\n"
    assert provider.requests[2].messages[-1].text.startswith("already done")
    provider.assert_done()


def test_an_unknown_tool_is_answered_with_the_tools_there_are(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("memory_set", path="memory/x.md")]), "Sorry."])
    runtime = make_runtime(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn("note this"))
    result = provider.requests[1].messages[-1]
    assert result.is_error and result.text.startswith("unknown tool: memory_set; the tools are ")
    assert "write" in result.text.split("the tools are ")[1].split(", ")
    provider.assert_done()


def test_a_repeated_read_only_call_still_runs(tmp_path):
    """Polling a command's output with the same call is fine."""
    poll = [tool("exec", command="echo tick >> ticks.txt; wc -l < ticks.txt") for _ in range(2)]
    provider = ScriptedProvider([Reply("", [poll[0]]), Reply("", [poll[1]]), "Two ticks."])
    runtime = make_runtime(tmp_path, provider, allow_exec=True)
    list(Session.open(runtime, KEY).run_turn("tick twice"))
    assert (runtime.workspace / "ticks.txt").read_text() == "tick\ntick\n"
    assert [r.tool_choice for r in provider.requests] == ["auto"] * 3


def test_group_sessions_never_see_memory_md(tmp_path):
    provider = ScriptedProvider(["ok", "ok"])
    runtime = make_runtime(tmp_path, provider)
    runtime.files.write("MEMORY.md", "secret long-term fact")
    for key in ("agent:main:telegram:group:42", "agent:main:discord:channel:7"):
        list(Session.open(runtime, key).run_turn("hi"))
    for request in provider.requests:
        assert "secret long-term fact" not in "".join(request.system)


def test_reloaded_session_counts_from_the_last_reported_usage(tmp_path):
    from clawd.core.messages import Usage
    provider = ScriptedProvider([Reply("first", usage=Usage(input_tokens=50_000,
                                                           output_tokens=1_000))])
    runtime = make_runtime(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn("hi"))
    again = Session.open(runtime, KEY)  # a new process
    assert again.context_tokens() == 51_000
    from clawd.core.messages import Message
    extra = Message.user("one more question")
    assert 51_000 < again.context_tokens([extra]) < 51_050


def test_context_report_agrees_with_a_provider_that_counts_differently(tmp_path):
    """A provider whose tokenizer counts 25% more: /context and the budget follow it."""
    import re

    from clawd.core.tokens import estimate_request
    from clawd.frontends.commands import Chat

    class Wordier(ScriptedProvider):
        def stream(self, request):
            for event in super().stream(request):
                if isinstance(event, ModelResponse):
                    event.message.usage.input_tokens = round(estimate_request(request) * 1.25)
                yield event

    provider = Wordier(default=" ".join(f"reply word {i}," for i in range(40)))
    runtime = make_runtime(tmp_path, provider)
    runtime.files.write("AGENTS.md", "Rules of the house. " * 300)
    chat = Chat.open(runtime, KEY)
    for i in range(4):
        list(chat.handle(f"message number {i} " + "with some padding " * 40))
    session = chat.session
    assert abs(session.token_ratio - 1.25) < 0.01
    text = "".join(e.text for e in chat.handle("/context list"))
    total = int(re.search(r"total \(estimated\)\s+([\d,]+)", text).group(1).replace(",", ""))
    reported = session.meter.base.reported  # prompt + output of the last call, as reported
    assert abs(total - reported) / reported < 0.03
    assert "scaled ×1.25" in text


def test_ctrl_c_at_an_approval_prompt_claims_no_partial_reply(tmp_path):
    def refuse_by_ctrl_c(command):
        raise KeyboardInterrupt

    provider = ScriptedProvider([Reply(tool_calls=[tool("exec", command="ls")])])
    runtime = make_runtime(tmp_path, provider)
    runtime.approve = refuse_by_ctrl_c
    events = list(Session.open(runtime, KEY).run_turn("list the files"))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == ["reply interrupted"]
    assert events[-1].interrupted and events[-1].text == ""


def test_an_unusable_provider_mid_session_ends_the_turn_as_failed(tmp_path):
    def unusable():
        raise ProviderSetupError("no key for this model")

    runtime = make_runtime(tmp_path, ScriptedProvider([]))
    resolve = runtime.models
    runtime.models = lambda ref: dataclasses.replace(resolve(ref), connect=unusable)
    events = [e for e in Session.open(runtime, KEY).run_turn("hi") if not isinstance(e, Waiting)]
    assert [type(e) for e in events] == [ErrorEvent, TurnDone]
    assert "no key" in events[0].message and events[-1].failed


ARGS = '{"path": "memory/2026-11-22.md", "content": "- budget 2400", "append": true}'


@pytest.mark.parametrize("stray", ["{", ARGS, f"```json\n{ARGS}\n```"])
def test_stray_text_beside_a_tool_call_is_not_sent_back(tmp_path, stray):
    """llama.cpp left a lone "{", or the call's own arguments as JSON, beside Qwen's tool
    call; seen again in the history, a "{" made the model answer every later message as a
    JSON object."""
    note = tool("write", path="memory/2026-11-22.md", content="- budget 2400\n", append=True)
    look = tool("read", path="memory/2026-11-22.md")
    provider = ScriptedProvider([Reply(stray, [note]), "Noted.",
                                 Reply("Let me check.", [look]), "2400 euros."])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    shown = [e.text for e in session.run_turn("My budget is 2400 euros.")
             if isinstance(e, TextDelta)]
    assert "".join(shown) == "Noted."  # the stray text was never shown either
    list(session.run_turn("What is my budget?"))
    sent = [m for m in provider.requests[-1].messages if m.role == "assistant" and m.tool_calls]
    assert [m.text for m in sent] == ["", "Let me check."]  # words beside a call stay
    stored = lines(session)
    assert not any(part.get("text") == stray for e in stored for part in e.get("content", []))


def test_echoed_tool_response_tags_are_not_sent_back(tmp_path):
    """Qwen's chat template wraps tool results in <tool_response> tags; the 1.5B model
    copied them into its answer and then began every later answer with them."""
    note = tool("write", path="memory/2026-11-22.md", content="- budget 2400\n", append=True)
    echo = "Done:\n<tool_response>\nappended 14 characters to memory/2026-11-22.md\n" \
           "</tool_response>"
    provider = ScriptedProvider([Reply("", [note]), echo, "<tool_response>\n</tool_response>",
                                 "Three museums."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("My budget is 2400 euros."))
    events = list(session.run_turn("Suggest a museum a day."))
    assert events[-1].text == "Three museums."  # the empty echo was a blank answer
    sent = [m.text for m in provider.requests[-1].messages if m.role == "assistant"]
    assert sent == ["", "Done:\nappended 14 characters to memory/2026-11-22.md"]


def test_an_answer_of_empty_tools_tags_is_a_blank_one(tmp_path):
    """Run 22: the 1.5B model's first answer was ``<tools></tools>`` (from the tool list in
    Qwen's chat template), and it answered every later message the same way."""
    provider = ScriptedProvider(["<tools></tools>", "Noted: 2400 euros.", "Three museums."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events = list(session.run_turn("By the way, my budget is 2400 euros in total."))
    assert events[-1].text == "Noted: 2400 euros."  # asked again, as after a blank answer
    assert provider.requests[1].messages[-1].text.startswith("Your last answer was empty")
    list(session.run_turn("Suggest a museum a day."))
    sent = [m.text for m in provider.requests[-1].messages if m.role == "assistant"]
    assert sent == ["Noted: 2400 euros."]  # the tags are never sent back
    provider.assert_done()


def test_a_json_answer_is_shown_whole_when_the_reply_ends(tmp_path):
    answer = '{"museums": ["Gulbenkian", "Azulejo", "MAAT"]}'
    provider = ScriptedProvider([answer], chunk_size=3)
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    shown = [e.text for e in session.run_turn("museums as JSON") if isinstance(e, TextDelta)]
    assert shown == [answer]


def test_a_turn_is_cancelled_from_another_thread_as_ctrl_c_does(tmp_path):
    """A server's "stop": the reply so far is kept, marked interrupted, and the turn ends."""
    import threading

    started = threading.Event()

    def slow(request):
        def stream():
            yield TextDelta("The first words ")
            started.set()
            for _ in range(200):
                time.sleep(0.01)
                yield TextDelta("and more ")
        return stream()

    class Slow(ScriptedProvider):
        def stream(self, request):
            self.requests.append(request)
            return slow(request)

    session = Session.open(make_runtime(tmp_path, Slow()), KEY)
    token = CancelToken()  # the turn's, made by whoever sends it
    threading.Thread(target=lambda: (started.wait(5), token.cancel())).start()
    events = list(session.run_turn("tell me a long story", token=token))
    done = events[-1]
    assert done.interrupted and done.aborted and done.text.startswith("The first words")
    kept = session.history.messages[-1]
    assert kept.role == "assistant" and kept.aborted and kept.text == done.text
    assert len(done.text) < len("The first words ") + 200 * len("and more ")
    # the next turn is not cancelled
    session.in_use._provider = ScriptedProvider(["Fine."])  # a model that answers
    assert list(session.run_turn("hello"))[-1].text == "Fine."


def test_a_turn_stopped_before_it_starts_sends_no_request_and_keeps_the_message(tmp_path):
    """The token is the turn's from the moment it is sent (the gateway makes it when the
    turn is queued): a stop that comes before the turn runs ends it at its first step, as
    Ctrl-C would, with what was typed kept; the next turn has a token of its own."""
    provider = ScriptedProvider(["never asked", "Fine."])
    with Session.open(make_runtime(tmp_path, provider), KEY) as session:
        token = CancelToken()
        token.cancel()
        events = list(session.run_turn("are you there?", token=token))
        assert events[-1].interrupted and provider.requests == []
        assert session.history.messages[-1].text == "are you there?"
        assert list(session.run_turn("hello"))[-1].text == "never asked"


@pytest.mark.slow  # runs a real command
def test_a_stop_during_a_tool_ends_the_turn_without_another_request(tmp_path):
    """The turn's token reaches the command ``exec`` runs, and is checked before the next
    model step: the command ends at once, both of the step's calls keep a result (the
    history stays valid), and the model is not asked again."""
    import threading

    calls = [tool("exec", command="sleep 30"), tool("exec", command="echo never")]
    provider = ScriptedProvider([Reply("", calls), "never asked"])
    session = Session.open(make_runtime(tmp_path, provider, allow_exec=True), KEY)

    events, start, token = [], time.monotonic(), CancelToken()
    for event in session.run_turn("run it", token=token):
        events.append(event)
        if isinstance(event, ToolStarted) and event.arguments["command"] == "sleep 30":
            # from another thread while the command runs (a stop over HTTP)
            threading.Timer(0.5, token.cancel).start()
    assert time.monotonic() - start < 10
    assert events[-1].interrupted and len(provider.requests) == 1
    results = [m for m in session.history.messages if m.role == "toolResult"]
    assert [r.text for r in results] == ["interrupted by the user"] * 2
    assert list(session.run_turn("hello"))[-1].text == "never asked"  # the next turn runs


def test_a_stop_before_a_step_sends_no_request(tmp_path):
    """A stop that lands while a tool's line is shown (the front end cancels the turn's
    token) ends the turn before the next request."""
    provider = ScriptedProvider([Reply("", [tool("read", path="nothing.md")]), "never"])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    events, token = [], CancelToken()
    for event in session.run_turn("read it", token=token):
        events.append(event)
        if isinstance(event, ToolFinished):
            token.cancel()
    assert events[-1].interrupted and len(provider.requests) == 1
