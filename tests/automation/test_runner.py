"""Runs as turns of the loop: the reply recorded, its delivery apart, failures counted, the
session isolated, the provenance kept, a webhook signed; on files and PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.core.errors import ProviderError
from clawd.providers.scripted import ScriptedProvider
from clawd.scheduler.runner import Runner

from conftest import Clock, make_runtime, transcript_entries
from fakeserver import FakeServer, Response

pytestmark = pytest.mark.usefixtures("both_storages")


@pytest.fixture
def store(both_storages, tmp_path, request):
    if both_storages == "postgresql":
        from clawd.storage.postgres import database
        from clawd.storage.postgres.jobs import PgJobs

        return PgJobs(database(request.getfixturevalue("pg_url")))
    from clawd.storage.files.jobs import FileJobs

    return FileJobs(tmp_path / "state")


def runner_over(tmp_path, store, replies, clock):
    provider = ScriptedProvider(replies)
    runtime = make_runtime(tmp_path, provider, clock=clock)
    return Runner(store, lambda agent: runtime, clock), provider, runtime


def test_a_due_job_runs_once_as_a_turn_of_its_own_session(tmp_path, store):
    clock = Clock()
    runner, provider, runtime = runner_over(tmp_path, store, ["Time to stretch!"], clock)
    job = store.add(new_job("main", sched.at(clock.now + timedelta(minutes=20)),
                            "remind me to stretch", clock.now, deliver="cli"))
    assert runner.tick() == []
    clock.advance(minutes=20, seconds=3)
    (run,) = runner.tick()
    assert run["status"] == "ok" and run["reply"] == "Time to stretch!"
    assert run["sessionKey"] == f"agent:main:cron:{job['id']}"
    assert run["delivery"]["status"] == "pending"  # the REPL shows a cli delivery
    assert runner.tick() == [] and len(provider.requests) == 1
    from clawd.loop.session import Session

    session = Session.open(runtime, run["sessionKey"])
    (user, reply) = [e for e in transcript_entries(session) if e.get("type") == "message"]
    session.close()
    assert user["origin"] == {"kind": "job", "jobId": job["id"],
                              "scheduledFor": run["scheduledFor"], "remember": False}
    assert reply["role"] == "assistant"


def test_failures_in_a_row_tell_the_owner_then_pause(tmp_path, store):
    clock = Clock()
    errors = [ProviderError("the model is down")] * 40
    runner, provider, _ = runner_over(tmp_path, store, errors, clock)
    job = store.add(new_job("main", sched.every("1h", clock.now), "check", clock.now,
                            deliver="none"))
    statuses, notices = [], []
    for _ in range(11):
        clock.advance(hours=1)
        for run in runner.tick():
            statuses.append(run["status"])
            notices.append(run.get("notice"))
    assert statuses == ["error"] * 10  # the eleventh hour: paused, nothing ran
    assert [bool(n) for n in notices] == [False, False, True] + [False] * 6 + [True]
    assert store.get(job["id"])["enabled"] is False
    assert "paused" in notices[-1]


def test_a_webhook_delivery_is_signed_and_retried_without_a_new_model_call(tmp_path, store):
    clock = Clock()
    runner, provider, _ = runner_over(tmp_path, store, ["Call the landlord."], clock)
    with FakeServer() as hook:
        hook.queue("POST", "/hook", lambda r: Response(503))
        hook.default("POST", "/hook", lambda r: Response.json({"id": "m-42"}))
        job = store.add(new_job("main", sched.at(clock.now + timedelta(minutes=1)),
                                "remind me", clock.now, deliver=f"webhook:{hook.url}/hook"))
        clock.advance(minutes=1)
        (run,) = runner.tick()
        (stored,) = store.runs(job["id"])
        assert stored["delivery"]["status"] == "failed" and stored["status"] == "ok"
        clock.advance(seconds=31)
        assert runner.tick() == []  # nothing new runs; the delivery is tried again
        (stored,) = store.runs(job["id"])
        assert stored["delivery"]["status"] == "delivered"
        assert stored["delivery"]["messageId"] == "m-42" and len(provider.requests) == 1
        request = hook.requests[-1]
        body = request.body
        stamp = request.headers["x-clawd-timestamp"]
        mac = hmac.new(job["secret"].encode(), stamp.encode() + b"." + body, hashlib.sha256)
        assert request.headers["x-clawd-signature"] == "sha256=" + mac.hexdigest()
        assert json.loads(body)["text"] == "Call the landlord."


def test_a_job_made_by_the_model_runs_with_its_tools_only(tmp_path, store):
    clock = Clock()
    runner, provider, _ = runner_over(tmp_path, store, ["ok"], clock)
    store.add(new_job("main", sched.at(clock.now + timedelta(minutes=1)), "look",
                      clock.now, tools=["read"], made_by="model"))
    clock.advance(minutes=1)
    runner.tick()
    (request,) = provider.requests
    assert [t.name for t in request.tools] == ["read"]


def test_run_now_runs_a_paused_job_once(tmp_path, store):
    clock = Clock()
    runner, provider, _ = runner_over(tmp_path, store, ["done"], clock)
    job = store.add(new_job("main", sched.every("1d", clock.now), "x", clock.now))
    store.update(job["id"], lambda j: {**j, "enabled": False})
    run = runner.run_now(job["id"][:4])
    assert run["status"] == "ok" and run["reply"] == "done"


def test_a_telegram_delivery_is_delivered_with_telegram_s_message_id(tmp_path, store):
    """``--deliver telegram:<chatId>``: the run's reply reaches the chat through the channel
    the front end hands in (here the Bot API stand-in), "delivered" with the id Telegram
    gave; a send Telegram refused is tried again without asking the model again."""
    import asyncio

    from clawd.automation.jobs import checked_target
    from clawd.channels.delivery import deliver
    from clawd.config import Config

    from telegram_standin import TOKEN, BotApi

    clock = Clock()
    assert checked_target("telegram:-100500") == "telegram:-100500"
    with BotApi() as api:
        # the first send with a token Telegram refuses (revoked, say), then the right one
        tokens = ["999:a-revoked-token-value", TOKEN]

        def to_channel(target: str, text: str) -> str:
            config = Config.model_validate({"channels": {"telegram": {
                "enabled": True, "apiRoot": api.url, "botToken": tokens.pop(0)}}})
            return str(asyncio.run(deliver(config, target, text)))

        provider = ScriptedProvider(["Stand up and stretch."])
        runtime = make_runtime(tmp_path, provider, clock=clock)
        runner = Runner(store, lambda agent: runtime, clock, channel=to_channel)
        job = store.add(new_job("main", sched.at(clock.now + timedelta(minutes=5)),
                                "remind me to stretch", clock.now, deliver="telegram:1001"))
        clock.advance(minutes=5)
        runner.tick()
        (stored,) = store.runs(job["id"])
        assert stored["delivery"]["status"] == "failed"
        clock.advance(seconds=31)
        runner.tick()
        (stored,) = store.runs(job["id"])
        assert stored["delivery"]["status"] == "delivered", stored["delivery"]
        assert stored["delivery"]["messageId"] == str(api.sent[-1]["message_id"])
        assert api.sent[-1]["chat_id"] == "1001"
        assert api.sent[-1]["text"] == "Stand up and stretch."
        assert len(provider.requests) == 1
