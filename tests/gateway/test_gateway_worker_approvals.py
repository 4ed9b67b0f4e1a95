"""A tool's question in a turn the web page sent, with two gateway workers on one PostgreSQL
database: the page sends through one worker, the other holds the session and runs the turn;
the question reaches the page through the worker it follows, and the answer given there
reaches the tool on the worker running it (approve and decline alike). A form's answer of
the wrong type is refused where it is given, before it travels."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from clawd.config import AgentDefaults, Config
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.gateway.app import create_app
from clawd.frontends.gateway.approvals import PageApprovals
from clawd.frontends.gateway.bodies import BadRequest
from clawd.loop.runtime import Runtime, fixed_models
from clawd.providers.scripted import Reply, ScriptedProvider
from clawd.providers.scripted import tool as call
from clawd.tools.base import tool

from gateway_client import AUTH, BASE, TOKEN, events, page_turn

asked: list[bool] = []


@tool("launch", "Launch something, after asking.")
def launch(ctx, *, what: str) -> str:
    approved = ctx.confirm is not None and ctx.confirm(f"launch {what}")
    asked.append(approved)
    return "launched" if approved else "not launched"


def _worker(tmp_path, url: str, provider: ScriptedProvider) -> TestClient:
    workspace = tmp_path / "ws"
    runtime = Runtime(config=Config(), agent_id="main",
                      settings=AgentDefaults.model_validate({
                          "workspace": str(workspace), "memorySearch": {"enabled": False}}),
                      workspace=workspace, storage=_storage(url),
                      models=fixed_models(provider, 200_000, profile="strong"), tools=[launch])
    config = Config.model_validate({"storage": {"url": url},
                                    "gateway": {"shutdownGraceSeconds": 0}})
    return TestClient(create_app(config, ServedAgents.of_runtimes([runtime], config), TOKEN),
                      base_url=BASE)


def _storage(url: str):
    from clawd.storage.postgres import Database

    return Database(url).agent("main")


@pytest.mark.parametrize("approve", [True, False])
def test_a_question_is_answered_through_the_worker_the_page_follows(tmp_path, pg_url, approve):
    asked.clear()
    runs = ScriptedProvider(["Hello.", Reply("", [call("launch", what="rocket")]), "Over."])
    idle = ScriptedProvider(default=lambda request: "the other worker answered")
    with _worker(tmp_path, pg_url, runs) as a, _worker(tmp_path, pg_url, idle) as b:
        for client in (a, b):
            assert client.app.state.gateway.hub.coordination.shared.listening.wait(5)
        # the session is held by a: every later turn of it runs there
        said = a.post("/api/sessions/main/messages", json={"text": "hi"}, headers=AUTH)
        assert events(said)[-1]["type"] == "done"
        turn, lines, said = page_turn(b, "launch it", lambda line: [{"approve": approve}])
        answered = [r.status_code for r in said]
        asked_line = next(line for line in lines if line["type"] == "approval")
        again = b.post(f"/api/turns/{turn}/approvals/{asked_line['id']}", headers=AUTH,
                       json={"approve": True})
    assert answered == [200]
    assert asked_line["text"] == "launch rocket"
    assert asked == [approve]  # the tool on a heard the answer given on b
    assert any(line["type"] == "approvalAnswered" and line["approved"] is approve
               for line in lines)
    result = next(line for line in lines if line["type"] == "toolResult")
    assert result["text"] == ("launched" if approve else "not launched")
    assert again.status_code == 404  # nothing waits any more
    assert idle.requests == []  # b never ran a turn of the session


def test_a_turn_sent_without_approvals_asks_nobody_on_any_worker(tmp_path, pg_url):
    asked.clear()
    runs = ScriptedProvider(["Hello.", Reply("", [call("launch", what="rocket")]), "Over."])
    idle = ScriptedProvider(default=lambda request: "the other worker answered")
    with _worker(tmp_path, pg_url, runs) as a, _worker(tmp_path, pg_url, idle) as b:
        assert events(a.post("/api/sessions/main/messages", json={"text": "hi"},
                             headers=AUTH))[-1]["type"] == "done"
        streamed = events(b.post("/api/sessions/main/messages", json={"text": "launch it"},
                                 headers=AUTH))
    assert not any(line["type"] == "approval" for line in streamed)
    refused = next(line for line in streamed if line["type"] == "toolResult")
    assert refused["isError"] and "nobody can give it in this turn" in refused["text"]
    assert asked == []  # refused before the tool went on


def test_a_form_answer_of_the_wrong_type_is_refused_where_it_is_given():
    line = {"type": "question", "id": 3, "text": "How many?", "fields": [
        {"name": "count", "kind": "integer", "description": "", "required": True,
         "choices": [], "default": None}]}
    approvals = PageApprovals()
    with pytest.raises(BadRequest, match="count: an integer"):
        approvals.check(line, True, {"count": "many"})
    approvals.check(line, True, {"count": "4"})
    approvals.check(line, False, None)  # declining needs no values
    approvals.check({"type": "approval", "id": 4, "text": "launch"}, True, None)


def test_an_answer_heard_reaches_only_the_question_it_names():
    from clawd.storage.postgres import answers

    heard: list[tuple] = []
    answers.hear(json.dumps({"turn": "t1", "number": 2, "approve": True, "values": None}),
                 lambda *said: heard.append(said))
    answers.hear("not json", lambda *said: heard.append(said))
    answers.hear(json.dumps({"number": 2}), lambda *said: heard.append(said))
    assert heard == [("t1", 2, {"approve": True, "values": None})]
