"""A turn that got no reply (the server was down, Ctrl-C before any answer): its message is
kept in the transcript, shown as unanswered, and sent once with the next message, marked,
instead of as a run of user messages the model might answer one by one."""

from __future__ import annotations

import gc
import json
import logging

import pytest

from clawd.context.layers import fold_unanswered
from clawd.core.errors import ProviderError
from clawd.core.events import ErrorEvent
from clawd.core.messages import Message
from clawd.frontends import cli
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider
from clawd.sessions.transcript import unanswered_ids

from conftest import make_runtime, write_local_config
from fakeserver import FakeServer, openai_error, openai_stream

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")


def user_runs(request) -> list[int]:
    """The lengths of the runs of consecutive user messages in a request."""
    runs, current = [], 0
    for message in request.messages:
        current = current + 1 if message.role == "user" else 0
        if current:
            runs = [*runs[:-1], current] if current > 1 else [*runs, 1]
    return runs


def test_failed_turns_are_sent_once_with_the_next_message(tmp_path):
    down = ProviderError("cannot reach the model server: Connection refused")
    provider = ScriptedProvider([down, down, "Two is fine.", "Three too."])
    runtime = make_runtime(tmp_path, provider)
    session = Session.open(runtime, KEY)
    for text in ("failed A", "failed B"):
        events = list(session.run_turn(text))
        assert any(isinstance(e, ErrorEvent) for e in events) and events[-1].failed
    events = list(session.run_turn("good two"))
    assert events[-1].text == "Two is fine."
    request = provider.requests[-1]
    assert user_runs(request) == [1]  # one user message, not three in a row
    sent = request.messages[-1].text
    assert "got no reply" in sent and "[The latest message:]\n\ngood two" in sent
    assert sent.index("failed A") < sent.index("failed B") < sent.index("good two")
    # the transcript keeps every message as typed
    assert [m.text for m in session.history.messages if m.role == "user"] == [
        "failed A", "failed B", "good two"]
    # later requests send the same folded message (a stable prefix for the prompt cache)
    list(session.run_turn("three"))
    later = provider.requests[-1]
    assert later.messages[0].text == sent and [m.text for m in later.messages[1:]] == [
        "Two is fine.", "three"]
    # and so does the session read back from disk
    session.close()
    again = Session.open(runtime, KEY)
    assert fold_unanswered(again.history.messages)[0].text == sent
    provider.assert_done()


def test_an_interrupted_turn_without_an_answer_is_unanswered(tmp_path):
    provider = ScriptedProvider([KeyboardInterrupt(), "Here."])
    session = Session.open(make_runtime(tmp_path, provider), KEY)
    list(session.run_turn("a question I stopped"))
    list(session.run_turn("the real question"))
    sent = provider.requests[-1].messages[-1].text
    assert "a question I stopped" in sent and sent.endswith("the real question")
    assert user_runs(provider.requests[-1]) == [1]


def test_unanswered_ids():
    a, b, c = Message.user("a"), Message.user("b"), Message.user("c")
    reply = Message.assistant("r")
    flush = Message.user("flush prompt", flush=True)
    assert unanswered_ids([a, reply, b, c]) == {b.id}
    assert unanswered_ids([a, b, c]) == {a.id, b.id}
    assert unanswered_ids([a, reply, b]) == set()
    assert unanswered_ids([a, reply, b], last=True) == {b.id}
    assert unanswered_ids([a, flush, reply]) == set()  # a flush's turn is not an answer's
    blank = Message.assistant("", retried=True)
    assert unanswered_ids([a, blank, b]) == {a.id}  # a blank asked again is no answer
    assert fold_unanswered([a, reply, b]) == [a, reply, b]  # nothing to fold: as it was


@pytest.mark.slow  # the command line end to end
def test_the_cli_shows_and_sends_unanswered_messages(isolated_home, capsys):
    """Through the real OpenAI SDK: two sends while the server answers 503, one after."""
    with FakeServer() as server:
        write_local_config(isolated_home, server.url)
        path = "/v1/chat/completions"
        server.queue("POST", path, lambda r: openai_error(503, "model is loading"),
                     lambda r: openai_error(503, "model is loading"))
        server.default("POST", path, lambda r: openai_stream("Back again."))
        codes = []
        for text in ("failed A", "failed B", "good two"):
            codes.append(cli.main(["chat", "-m", text]))
            gc.collect()
        assert codes == [1, 1, 0]
        body = server.requests[-1].json()
        users = [m for m in body["messages"] if m["role"] == "user"]
        assert len(users) == 1 and "failed A" in users[0]["content"]
        assert users[0]["content"].endswith("good two")
    capsys.readouterr()
    assert cli.main(["sessions", "show", "main", "-n", "4"]) == 0
    out = capsys.readouterr().out
    assert "you (no reply: the request failed or was stopped): failed A" in out
    assert "you (no reply: the request failed or was stopped): failed B" in out
    assert "you: good two" in out and "assistant: Back again." in out
    assert cli.main(["sessions", "export", "main"]) == 0
    md = capsys.readouterr().out
    assert md.count("(no reply: the request failed or was stopped)") == 2
    listed = json.loads((cli.main(["sessions", "list", "--json"]), capsys.readouterr().out)[1])
    assert listed[0]["messages"] == 4


@pytest.mark.slow  # the command line end to end
def test_chat_without_init_says_the_workspace_is_missing(isolated_home, caplog):
    with FakeServer() as server:
        workspace = write_local_config(isolated_home, server.url)
        server.default("POST", "/v1/chat/completions", lambda r: openai_stream("Hi."))
        for path in sorted(workspace.rglob("*"), reverse=True):
            path.rmdir()
        workspace.rmdir()
        with caplog.at_level(logging.WARNING, logger="clawd"):
            assert cli.main(["chat", "-m", "hello"]) == 0
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and said[0].startswith(
        f"the workspace {workspace} does not exist (run clawd init")
