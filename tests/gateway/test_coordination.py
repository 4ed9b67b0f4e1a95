"""The hub's ``Coordination`` contract: the same behaviour from one process
(``LocalCoordination``, on files) and from a worker on a real PostgreSQL database
(``PgCoordination``). Each test runs once on each (ids ending in ``local`` and
``postgresql``): a session's turns run one at a time in arrival order, its busy state,
the bound on waiting turns, a retried send, an abort of the running turn, a turn found by
its id, a session let go when asked, the wrong tokens that lock an address out, and each
person's turns counted against their quota."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from clawd.config import Config
from clawd.core.messages import Message, ModelResponse, TextDelta, Usage
from clawd.frontends.gateway.agents import ServedAgents
from clawd.frontends.hub.coordination import Coordination
from clawd.frontends.hub.hub import Hub
from clawd.frontends.hub.turns import IdempotencyConflict, QueueFull
from clawd.loop.runtime import fixed_models

from conftest import make_runtime

pytestmark = pytest.mark.slow  # worker threads, and a database for half of them

KEY = "agent:main:main"
LIMIT = Config.model_validate({"gateway": {"auth": {"rateLimit": {
    "maxAttempts": 3, "windowSeconds": 60, "lockoutSeconds": 30}}}}).gateway.auth.rate_limit


class Echo:
    """Replies "re: <message>"; with ``hold``, the reply to that message stops after its
    first words until ``gate`` is set."""

    name, model = "echo", "echo"

    def __init__(self, hold: str | None = None):
        self.hold = hold
        self.started, self.gate = threading.Event(), threading.Event()

    def stream(self, request):
        text = request.messages[-1].text
        yield TextDelta("re:")
        if text == self.hold:
            self.started.set()
            self.gate.wait(10)
        yield TextDelta(f" {text}")
        yield ModelResponse(Message.assistant(f"re: {text}", usage=Usage(10, 4),
                                              stop_reason="stop"))


@pytest.fixture(params=["local", "postgresql"])
def kind(request, monkeypatch):
    """Which coordination: one process on files, or a worker on a fresh database."""
    if request.param == "postgresql":
        monkeypatch.setenv("CLAWD_TEST_STORAGE", "postgresql")
    else:
        monkeypatch.delenv("CLAWD_TEST_STORAGE", raising=False)
    return request.param


def _coordination(runtime, tmp_path) -> Coordination:
    """The coordination of the runtime's storage: its database's, else one process's."""
    db = getattr(runtime.storage, "db", None)
    if db is None:
        from clawd.frontends.hub.local import LocalCoordination
        from clawd.frontends.hub.sign_ins import FailedAuth
        from clawd.storage.files.lockouts import FileLockouts

        return LocalCoordination(FailedAuth(LIMIT, kept=FileLockouts(tmp_path / "lockouts")))
    from clawd.frontends.hub.postgres import PgCoordination
    from clawd.frontends.hub.stored import stopped_lines
    from clawd.storage.postgres.auth import PgFailedAuth
    from clawd.storage.postgres.shared import PgShared

    return PgCoordination(PgShared(db, stopped_lines), PgFailedAuth(db, LIMIT))


def _play(tmp_path, model, scenario, **options):
    """Run ``scenario(hub, model)`` on a hub over one agent answered by ``model``."""
    runtime = make_runtime(tmp_path, None)
    runtime.models = fixed_models(model, 200_000)
    coordination = _coordination(runtime, tmp_path)

    async def main():
        hub = Hub(ServedAgents.of_runtimes([runtime]), coordination,
                  **{"idle_seconds": 0, "grace_seconds": 0, **options})
        hub.listen(asyncio.get_running_loop())
        try:
            return await scenario(hub, model)
        finally:
            await hub.stop()
            coordination.close()

    return asyncio.run(main())


async def _lines(turn) -> list[dict]:
    return [line async for _, line in turn.feed.lines_of()]


async def _until(check, what: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def test_a_session_s_turns_run_one_at_a_time_in_arrival_order(tmp_path, kind):
    async def scenario(hub, model):
        sent = [(await hub.submit("main", KEY, text))[0] for text in ("one", "two", "three")]
        replies = [[line["text"] for line in await _lines(turn) if line["type"] == "reply"]
                   for turn in sent]
        assert replies == [["re: one"], ["re: two"], ["re: three"]]
        assert await hub.busy("main", KEY) == {"running": None, "queued": 0}

    _play(tmp_path, Echo(), scenario)


def test_a_busy_session_says_which_turn_runs_and_how_many_wait(tmp_path, kind):
    async def scenario(hub, model):
        first, _ = await hub.submit("main", KEY, "one")
        assert await asyncio.to_thread(model.started.wait, 5)
        second, _ = await hub.submit("main", KEY, "two")
        assert await hub.busy("main", KEY) == {"running": first.id, "queued": 1}
        assert (await hub.busy_of("main", [KEY, "agent:main:other"]))["agent:main:other"] == \
            {"running": None, "queued": 0}
        model.gate.set()
        assert (await _lines(second))[-1]["failed"] is False
        assert await hub.busy("main", KEY) == {"running": None, "queued": 0}

    _play(tmp_path, Echo(hold="one"), scenario)


def test_past_its_bound_a_session_refuses_another_turn(tmp_path, kind):
    async def scenario(hub, model):
        await hub.submit("main", KEY, "one")
        assert await asyncio.to_thread(model.started.wait, 5)
        second, _ = await hub.submit("main", KEY, "two")
        with pytest.raises(QueueFull) as refused:
            await hub.submit("main", KEY, "three")
        assert refused.value.retry_after >= 1
        model.gate.set()
        assert (await _lines(second))[-1]["failed"] is False

    _play(tmp_path, Echo(hold="one"), scenario, max_queued=1)


def test_a_retried_send_is_the_turn_it_started(tmp_path, kind):
    async def scenario(hub, model):
        turn, new = await hub.submit("main", KEY, "hello", "key-1")
        assert new and (await _lines(turn))[-1]["failed"] is False
        again, new = await hub.submit("main", KEY, "hello", "key-1")
        assert again.id == turn.id and not new
        with pytest.raises(IdempotencyConflict):
            await hub.submit("main", KEY, "something else", "key-1")

    _play(tmp_path, Echo(), scenario)


def test_an_abort_stops_the_running_turn_its_words_so_far_kept(tmp_path, kind):
    async def scenario(hub, model):
        turn, _ = await hub.submit("main", KEY, "tell me")
        assert await asyncio.to_thread(model.started.wait, 5)
        stopped = await hub.abort("main", KEY)
        assert stopped is not None and stopped.id == turn.id
        model.gate.set()
        lines = await _lines(turn)
        assert lines[-1]["type"] == "done" and lines[-1]["interrupted"] is True
        assert await hub.abort("main", KEY) is None  # nothing runs any more

    _play(tmp_path, Echo(hold="tell me"), scenario)


def test_a_turn_is_found_by_its_id(tmp_path, kind):
    async def scenario(hub, model):
        turn, _ = await hub.submit("main", KEY, "hello")
        await _lines(turn)
        found = await hub.turn(turn.id)
        assert found is not None and found.to_json()["sessionKey"] == KEY
        assert await hub.turn("no-such-turn") is None

    _play(tmp_path, Echo(), scenario)


def test_an_idle_session_is_let_go_when_asked(tmp_path, kind):
    async def scenario(hub, model):
        turn, _ = await hub.submit("main", KEY, "hello")
        await _lines(turn)
        slot = hub.slots[("main", KEY)]  # held for idleSessionSeconds

        async def drained() -> bool:
            return slot.worker is not None and slot.worker.done()

        async def gone() -> bool:
            return ("main", KEY) not in hub.slots and slot.chat is None

        await _until(drained, "the session's queue was never drained")
        assert slot.chat is not None
        await hub.release("main", KEY)
        await _until(gone, "the idle session was never let go")

    _play(tmp_path, Echo(), scenario, idle_seconds=60)


def test_wrong_tokens_lock_an_address_out(tmp_path, kind):
    runtime = make_runtime(tmp_path, None)
    coordination = _coordination(runtime, tmp_path)

    async def scenario():
        assert await coordination.failed("192.0.2.1") is None
        assert await coordination.failed("192.0.2.1") is None
        assert await coordination.retry_after("192.0.2.1") is None
        assert await coordination.failed("192.0.2.1") == 30
        assert 1 <= (await coordination.retry_after("192.0.2.1") or 0) <= 31
        assert await coordination.retry_after("192.0.2.2") is None

    try:
        asyncio.run(scenario())
    finally:
        coordination.close()


def test_a_person_s_turns_are_counted_against_their_quota(tmp_path, kind):
    from clawd.core.quotas import Refusal

    runtime = make_runtime(tmp_path, None)
    coordination = _coordination(runtime, tmp_path)
    try:
        counter = coordination.turn_quota()
        first = counter.reserve("alice", 1, None)
        assert isinstance(first, str)
        refused = counter.reserve("alice", 1, None)
        assert isinstance(refused, Refusal) and 1 <= refused.retry_after <= 60
        assert isinstance(counter.reserve("bob", 1, None), str)  # each person's own
        counter.cancel(first)  # a ticket that started no turn is given back
        assert isinstance(counter.reserve("alice", 1, None), str)
    finally:
        coordination.close()
