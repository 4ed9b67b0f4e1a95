"""Slash commands through ``Chat.handle`` with the scripted provider: /undo, /retry and how
they meet compaction and the memory flush, arguments, the ``//`` escape, /context."""

from __future__ import annotations

import pytest

from clawd.core.errors import ProviderError
from clawd.core.events import CommandOutput, ErrorEvent, Notice, TurnDone
from clawd.core.messages import Message
from clawd.frontends.commands import ALIASES, REGISTRY, Chat
from clawd.frontends.reports import format_recap
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.sessions.files import summary_of
from clawd.sessions.transcript import History

from conftest import make_runtime, stored_text, transcript_entries
from loopmodel import is_flush

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")


def entries(chat: Chat) -> list[dict]:
    return transcript_entries(chat.session)


def said(events: list) -> str:
    """What a command said: its output, notices and errors, one per line."""
    return "\n".join(getattr(e, "text", None) or getattr(e, "message", "") for e in events
                     if isinstance(e, (CommandOutput, Notice, ErrorEvent)))


def texts(messages) -> list[str]:
    return [m.text for m in messages]


# --- /undo ----------------------------------------------------------------------------------

def test_undo_takes_the_last_turn_out_of_what_the_model_sees(tmp_path):
    provider = ScriptedProvider(["one", Reply("", [tool("read", path="a.md")]), "no a.md",
                                 "three"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    list(chat.handle("read a.md"))
    undone = said(list(chat.handle("/undo")))
    assert undone == "undone: “read a.md” (kept in the transcript, out of the conversation)"
    assert texts(chat.session.history.messages) == ["first", "one"]
    list(chat.handle("third"))
    assert texts(provider.requests[-1].messages) == ["first", "one", "third"]

    # nothing is erased: the turn and its tool call stay on disk, after them the undo entry
    on_disk = entries(chat)
    roles = [e.get("role", e["type"]) for e in on_disk]
    assert roles == ["user", "assistant", "user", "assistant", "toolResult", "assistant",
                     "undo", "user", "assistant"]
    assert on_disk[6]["messageId"] == on_disk[2]["id"] and on_disk[6]["reason"] == "undo"
    # a new process sees the same conversation
    assert texts(Session.open(runtime, KEY).history.messages) == ["first", "one", "third", "three"]
    provider.assert_done()


def test_undo_until_there_is_nothing_left(tmp_path):
    provider = ScriptedProvider(["one", "two"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    list(chat.handle("second"))
    list(chat.handle("/undo"))
    list(chat.handle("/undo"))
    assert chat.session.history.messages == []
    events = list(chat.handle("/undo"))
    assert [type(e) for e in events] == [ErrorEvent]
    assert said(events) == "nothing to undo: this session has no turns yet"
    assert Session.open(runtime, KEY).history.messages == []
    # the store no longer claims the last reported prompt describes the history
    entry = runtime.store.get(KEY)
    assert entry["totalTokensFresh"] is False
    assert summary_of(chat.session.transcript).latest["totalTokensFresh"] is False


def test_undo_after_a_compaction_and_of_a_summarised_turn(tmp_path):
    summary = "Summary: the user said first, the model answered one."
    provider = ScriptedProvider(["one", "two"], default=lambda request: (
        "NO_REPLY" if is_flush(request) else summary))
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first" + " and more" * 120))  # long enough that a summary saves room
    list(chat.handle("second"))
    list(chat.handle("/compact"))  # flushes, then summarises the first turn, keeps the second
    assert texts(chat.session.history.messages) == ["second", "two"]
    # the memory flush ran after the second turn: what it saved is not taken back
    assert said(list(chat.handle("/undo"))).endswith(
        "; notes the memory flush saved from it stay in memory/")
    assert chat.session.history.messages == [] and chat.session.history.summary == summary
    events = list(chat.handle("/undo"))
    assert said(events) == ("nothing to undo: the earlier turns are summarised (compacted) "
                            "and cannot be taken back")
    reloaded = Session.open(runtime, KEY)
    assert reloaded.history.messages == [] and reloaded.history.summary == summary


def test_a_turn_summarised_in_part_cannot_be_undone(tmp_path):
    provider = ScriptedProvider([Reply("", [tool("read", path="a.md")]), "done"])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    list(session.run_turn("a long task"))
    request, step = session.history.messages[0], session.history.messages[3]
    # what a compaction inside a long turn writes: the turn's request stays verbatim
    session.transcript.append({"type": "compaction", "summary": "the first steps",
                               "firstKeptId": step.id, "turnMessageId": request.id})
    session.close()
    chat = Chat.open(runtime, KEY)
    events = list(chat.handle("/undo"))
    assert said(events) == "cannot undo: the last turn was partly summarised by a compaction"
    assert texts(chat.session.history.messages) == ["a long task", "done"]
    assert not [e for e in entries(chat) if e["type"] == "undo"]


# --- /retry ---------------------------------------------------------------------------------

def test_retry_sends_the_last_message_again_without_the_last_answer(tmp_path):
    provider = ScriptedProvider(["one", "a poor answer", "a better answer"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    list(chat.handle("second"))
    events = list(chat.handle("/retry"))
    assert said(events) == "sending again: “second”"
    done = events[-1]
    assert isinstance(done, TurnDone) and (done.text, done.aborted, done.steps) == (
        "a better answer", False, 1)
    assert texts(provider.requests[-1].messages) == ["first", "one", "second"]
    assert texts(chat.session.history.messages) == ["first", "one", "second",
                                                    "a better answer"]
    # both answers are in the transcript
    assert [e.get("content", [{}])[0].get("text", e["type"]) for e in entries(chat)] == [
        "first", "one", "second", "a poor answer", "undo", "second", "a better answer"]
    provider.assert_done()


def test_retry_after_a_failed_reply_does_not_send_the_message_twice(tmp_path):
    provider = ScriptedProvider(["one", ProviderError("overloaded"), "two"])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    list(chat.handle("first"))
    list(chat.handle("second"))
    assert texts(chat.session.history.messages) == ["first", "one", "second"]
    list(chat.handle("/retry"))
    assert texts(provider.requests[-1].messages) == ["first", "one", "second"]
    assert texts(chat.session.history.messages) == ["first", "one", "second", "two"]


def test_retry_with_nothing_to_send(tmp_path):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider()), KEY)
    assert said(list(chat.handle("/retry"))) == ("nothing to retry: this session has no "
                                                 "turns yet")
    assert entries(chat) == []


# --- arguments and the // escape ------------------------------------------------------------

NO_ARGUMENTS = sorted(name for name, c in REGISTRY.items() if not c.takes_arguments)
ALIASED = sorted(alias for alias, name in ALIASES.items() if name in NO_ARGUMENTS)


def test_the_registry_says_which_commands_take_no_arguments():
    assert {"help", "quit", "status", "reset", "retry", "undo", "clear"} <= set(NO_ARGUMENTS)
    assert not {"context", "model", "new", "compact", "memory"} & set(NO_ARGUMENTS)


@pytest.mark.parametrize("name", NO_ARGUMENTS + ALIASED)
def test_an_argument_to_a_command_that_takes_none_is_one_line_and_does_nothing(tmp_path,
                                                                                name):
    provider = ScriptedProvider(["one"])
    runtime = make_runtime(tmp_path, provider)
    chat = Chat.open(runtime, KEY)
    list(chat.handle("first"))
    before = stored_text(chat.session)
    session_id = chat.session.entry["sessionId"]
    events = list(chat.handle(f"/{name}  foo bar"))
    assert events == [ErrorEvent(f"/{name} takes no arguments (got 'foo bar')")]
    assert stored_text(chat.session) == before  # no undo, retry or reset
    assert chat.session.entry["sessionId"] == session_id
    provider.assert_done()


def test_a_command_reads_its_arguments_after_any_whitespace(tmp_path):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider()), KEY)
    assert "list the commands" in said(list(chat.handle("/HELP")))
    events = list(chat.handle("/memory\tadd a note\nover two lines"))
    assert said(events) == "added to memory/2026-11-22.md"
    assert "- a note over two lines" in chat.runtime.files.read("memory/2026-11-22.md")


def test_a_double_slash_sends_a_message_that_starts_with_a_slash(tmp_path):
    provider = ScriptedProvider(["That is the hosts file."])
    chat = Chat.open(make_runtime(tmp_path, provider), KEY)
    events = list(chat.handle("  //etc/hosts is what?\n"))
    assert events[-1].text == "That is the hosts file."
    assert texts(provider.requests[0].messages) == ["/etc/hosts is what?"]
    unknown = said(list(chat.handle("/etc/hosts is what?")))
    assert unknown == ("unknown command /etc/hosts (try /help); to send it as a message, "
                       "start it with //")
    assert "//TEXT" in said(list(chat.handle("/help")))



def test_a_mistyped_command_suggests_the_one_meant_and_does_nothing(tmp_path):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider()), KEY)
    before = stored_text(chat.session)
    assert said(list(chat.handle("/stauts"))) == (
        "unknown command /stauts (did you mean /status?); to send it as a message, start it "
        "with //")
    assert "(did you mean /memory?)" in said(list(chat.handle("/memroy search x")))
    assert "(did you mean /exit?)" in said(list(chat.handle("/exti")))  # aliases too
    assert "(try /help)" in said(list(chat.handle("/xyzzy")))  # nothing close: no guess
    assert stored_text(chat.session) == before

# --- the recap of a reopened session --------------------------------------------------------

def test_recap_of_turns_without_a_spoken_answer_and_of_a_summary_only():
    call = tool("exec", command="ls")
    history = History(messages=[
        Message.user("list it"), Message.assistant("", [call]),
        Message.tool_result(call, "a.md"), Message.assistant(""),
        Message.user("and now?"), Message.assistant("I was say", aborted=True),
        Message.user("hello?")])
    assert format_recap(history).splitlines() == [
        "· where this session left off:",
        "  you: list it", "  assistant: (used exec; no answer in words)",
        "  you: and now?", "  assistant: I was say (interrupted)",
        "  you: hello?", "  assistant: (no answer)"]
    assert format_recap(History()) == ""
    assert format_recap(History(summary="S")) == "· earlier turns are summarised (compacted)"
    assert format_recap(History(summary="S", messages=history.messages[4:]),
                        pairs=5).startswith("· where this session left off (earlier turns")


@pytest.mark.parametrize("width", [60, 80, 120])
def test_help_wraps_descriptions_between_words(tmp_path, width):
    chat = Chat.open(make_runtime(tmp_path, ScriptedProvider()), KEY)
    chat.width = lambda: width
    lines = said(list(chat.handle("/help"))).splitlines()
    assert all(len(line) <= width for line in lines if not line.startswith("/memory search"))
    joined = " ".join(" ".join(lines).split())
    for command in REGISTRY.values():
        assert command.help in joined
    chat.width = None  # a script: one line per command, as written
    plain = said(list(chat.handle("/help"))).splitlines()
    assert all(c.help in plain[i] for i, c in enumerate(REGISTRY.values()))


def test_model_reads_a_provider_declared_after_start(isolated_home, capsys):
    """The config is read at start-up; a provider added to clawd.json later is found by
    /model (and /new) reading the models again, not reported as missing from the file."""
    import json as _json

    from clawd.config import load_config
    from clawd.frontends.compose import build_runtime

    from conftest import write_local_config

    workspace = write_local_config(isolated_home, "http://127.0.0.1:9")
    path = isolated_home / ".clawd" / "clawd.json"
    runtime = build_runtime(load_config(path), None, with_memory=False)
    chat = Chat.open(runtime, KEY)
    unknown = said(list(chat.handle("/model later/m2")))
    assert "unknown provider 'later'" in unknown
    data = _json.loads(path.read_text())
    data["models"]["providers"]["later"] = {"api": "openai-completions",
                                            "baseUrl": "http://127.0.0.1:9/v1",
                                            "models": [{"id": "m2", "contextWindow": 32000}]}
    path.write_text(_json.dumps(data))
    answer = said(list(chat.handle("/model later/m2")))
    assert answer.startswith("model set to later/m2 (pinned to this session")
    assert "the config's models were read again" in answer
    assert chat.session.model_ref == "later/m2"
    path.write_text("{models: {")  # a config that no longer loads: said, nothing changes
    broken = said(list(chat.handle("/model other/m3")))
    assert "not valid JSON5" in broken and chat.session.model_ref == "later/m2"
    assert workspace.is_dir()
