"""``clawd serve``'s automation (docs/automation.md): due jobs run in the background, and the web
page's notifications.

With ``automation.enabled`` (the default), every ``automation.tickSeconds`` a worker thread
runs one ``Runner.tick`` over the served agents: the store claims each due occurrence for
one process only (several workers, or a ``clawd jobs tick`` beside the server, never run one
twice), runs it as a turn and sends its delivery (``web``, ``webhook:``). A run in a
session the page may hold (``main``, a named key) is a turn of the hub's queue for that
session (``Hub.submit`` with the job's ``scheduler.in_session.spec``): it waits behind the
turn running there and the turns sent meanwhile wait behind it; its reply and error are read
from its event lines (``outcome``), whichever worker ran it. An isolated run opens its own.

``GET /api/notifications`` lists the agent's delivered ``web`` runs, newest last, ``since``
an ISO time (``deliveredAt``); with ``Accept: text/event-stream`` it follows them as SSE
events named ``notification`` (each ``{"jobId", "name", "scheduledFor", "deliveredAt",
"text", "sessionKey"}``), looking for new ones every ``POLL_SECONDS`` (a delivery another
worker made too), so the page shows a reminder when it comes and after a reload.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from clawd.automation.jobs import SESSION_ISOLATED
from clawd.frontends.gateway.common import agent_of, ok, state
from clawd.frontends.hub.feed import KEEP_ALIVE

log = logging.getLogger(__name__)
POLL_SECONDS = 2.0
KEEP_ALIVE_SECONDS = 15.0
RECENT = 50


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Background:
    """The served agents' due jobs, run every ``tick_seconds`` until the hub stops."""

    def __init__(self, config: Any, agents: Any, hub: Any):
        from clawd.scheduler.runner import Runner, direct_turn
        from clawd.storage import open_jobs

        self.hub = hub
        self.seconds = config.automation.tick_seconds
        self.loop: asyncio.AbstractEventLoop | None = None
        self.agents = agents

        def turn(runtime: Any, job: dict[str, Any], key: str, origin: dict[str, Any]
                 ) -> tuple[str, str | None]:
            if (job.get("session") or SESSION_ISOLATED) == SESSION_ISOLATED or not self.loop:
                return direct_turn(runtime, job, key, origin)
            return asyncio.run_coroutine_threadsafe(  # in the session's queue
                self.queued(runtime.agent_id, key, job, origin), self.loop).result()

        def to_channel(target: str, text: str) -> str:  # through the running channel
            from clawd.channels.delivery import deliver

            assert self.loop is not None
            return str(asyncio.run_coroutine_threadsafe(
                deliver(config, target, text, service=self.channels), self.loop
            ).result(timeout=120))

        self.channels: Any = None  # the running channels (``channels.service``), if any
        self.runner = Runner(open_jobs(config), agents.runtime, utc_now, turn=turn,
                             channel=to_channel)

    async def queued(self, agent_id: str, key: str, job: dict[str, Any],
                     origin: dict[str, Any]) -> tuple[str, str | None]:
        """Run ``job`` as a turn queued behind the session's others (run by the worker
        holding the session); its reply and error, once it has ended."""
        from clawd.scheduler.in_session import spec

        turn, _ = await self.hub.submit(agent_id, key, str(job["message"]),
                                        job=spec(job, origin))
        return outcome([line async for _, line in turn.feed.lines_of()])

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        self.task = self.loop.create_task(self.run())

    async def run(self) -> None:
        while not self.stopping.is_set():
            self.runner.agents = {agent.lower() for agent in self.agents.ids}
            try:
                await asyncio.to_thread(self.beat)
            except Exception:  # noqa: BLE001 - one bad beat (a database blip) is logged
                log.exception("automation: the tick failed; trying again")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.seconds)

    def beat(self) -> None:
        """On a thread: the heartbeat jobs brought in line with the config, then a tick."""
        from clawd.scheduler import heartbeat

        served = [(agent, self.agents.runtime(agent).settings) for agent in self.agents.ids]
        heartbeat.sync(self.runner.store, served, utc_now(), "web")
        self.runner.tick()

    async def stop(self, grace: float) -> None:
        """No new beat; a run under way gets ``grace`` seconds (then it is left to end with
        the process: its occurrence is recorded, never run again)."""
        self.stopping.set()
        done, _ = await asyncio.wait([self.task], timeout=grace)
        if not done:
            log.warning("automation: a run was still going when the server stopped")


def outcome(lines: list[dict[str, Any]]) -> tuple[str, str | None]:
    """A run's reply and error (None: it went well) from its turn's event lines, as
    ``runner.direct_turn`` tells them."""
    from clawd.scheduler.runner import verdict

    errors = [str(line.get("message")) for line in lines if line.get("type") == "error"]
    replies = [str(line.get("text") or "") for line in lines if line.get("type") == "reply"]
    done = next((line for line in reversed(lines) if line.get("type") == "done"), None)
    failed = done is None or any(done.get(how) for how in ("failed", "aborted", "interrupted"))
    return verdict(replies[-1] if replies else "", errors, failed)


def notification(job: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    from clawd.scheduler.delivery import text_of

    return {"jobId": job["id"], "name": job.get("name") or "",
            "scheduledFor": run["scheduledFor"],
            "deliveredAt": run["delivery"].get("deliveredAt"), "text": text_of(run),
            "sessionKey": job.get("origin") or run.get("sessionKey")}


def delivered(store: Any, agent_id: str, since: str | None) -> list[dict[str, Any]]:
    """The agent's ``web`` runs delivered after ``since``, oldest first."""
    found = []
    for job in store.all(agent_id):
        if job.get("deliver") != "web":
            continue
        for run in store.runs(job["id"], RECENT):
            sent = run.get("delivery") or {}
            if sent.get("status") == "delivered" and sent.get("target") == "web" and (
                    since is None or str(sent.get("deliveredAt") or "") > since):
                found.append(notification(job, run))
    found.sort(key=lambda item: str(item["deliveredAt"]))
    return found[-RECENT:]


async def notifications(request: Request) -> Response:
    from clawd.storage import open_jobs

    agent_id = agent_of(request, request.query_params.get("agent"))
    store = open_jobs(state(request).config)
    since = request.query_params.get("since")
    if "text/event-stream" not in request.headers.get("accept", ""):
        return ok({"agent": agent_id, "notifications": await run_in_threadpool(
            delivered, store, agent_id, since)})

    async def stream() -> AsyncIterator[bytes]:
        seen = since or utc_now().strftime("%Y-%m-%dT%H:%M:%SZ")
        quiet = 0.0
        while not state(request).hub.stopping:
            fresh = await run_in_threadpool(delivered, store, agent_id, seen)
            for item in fresh:
                seen = max(seen, str(item["deliveredAt"]))
                yield (f"event: notification\ndata: {json.dumps(item, ensure_ascii=False)}"
                       f"\n\n").encode()
            quiet = 0.0 if fresh else quiet + POLL_SECONDS
            if quiet >= KEEP_ALIVE_SECONDS:
                quiet = 0.0
                yield KEEP_ALIVE
            if await request.is_disconnected():
                return
            await asyncio.sleep(POLL_SECONDS)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


ROUTES = [Route("/api/notifications", notifications)]
