"""The web page's view of a session's jobs (docs/automation.md): list them, pause, resume, delete.

``GET /api/sessions/{key}/jobs`` lists the jobs of the session's agent that were made in
that session (``origin``, a reminder set in its chat) or that run in it (``main``, a named
session, an isolated ``cron:<jobId>`` session): each the ``--json`` shape of ``clawd jobs``
plus ``message``, ``madeBy``, ``pausedReason`` and ``nextRunLocal`` (the next run in the
user's zone, ``agents.defaults.userTimezone``, which the answer names as ``timezone``).

``POST /api/jobs/{id}/pause`` and ``/resume`` switch a job as ``clawd jobs pause|resume``
do; ``DELETE /api/jobs/{id}`` removes it and its runs. A job is named by its whole id only
(no prefix, no name), and only a job of an agent the token reaches is found: any other is
answered 404, exactly as a job that does not exist, so a person learns nothing of another's
jobs. The heartbeat's job is the config's (``agents.defaults.heartbeat``): it can be paused,
not deleted. Store calls run on a thread, never on the event loop.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawd.automation.jobs import public_job, session_key_for, switched
from clawd.automation.zones import parse_iso, user_zone
from clawd.frontends.gateway.bodies import BadRequest
from clawd.frontends.gateway.common import allowed, ok, session_of, state
from clawd.frontends.gateway.workspace import NotFound

HEARTBEAT = "heartbeat"  # ``scheduler.heartbeat.KIND``: the config's job


def view(job: dict[str, Any], tz: Any) -> dict[str, Any]:
    """A job as the page shows it: its public shape, what it says, its next run locally."""
    stamp = job.get("nextRun")
    local = parse_iso(stamp).astimezone(tz).strftime("%a %Y-%m-%d %H:%M") if stamp else None
    return {**public_job(job), "message": job.get("message") or "",
            "madeBy": job.get("madeBy") or "", "pausedReason": job.get("pausedReason"),
            "nextRunLocal": local, "timezone": tz.key}


def _zone(request: Request, agent_id: str) -> Any:
    """On a thread (a runtime is built on first use): the agent's user zone."""
    return user_zone(state(request).agents.runtime(agent_id).settings.user_timezone)


def _store(request: Request) -> Any:
    from clawd.storage import open_jobs

    return open_jobs(state(request).config)


async def session_jobs(request: Request) -> Response:
    agent_id, key = session_of(request, request.path_params["key"],
                               request.query_params.get("agent"))
    store = _store(request)

    def listed() -> tuple[Any, list[dict[str, Any]]]:
        tz = _zone(request, agent_id)
        return tz, [view(job, tz) for job in store.all(agent_id)
                    if job.get("origin") == key or session_key_for(job) == key]

    tz, found = await run_in_threadpool(listed)
    return ok({"agent": agent_id, "sessionKey": key, "timezone": tz.key, "jobs": found})


def _reachable(request: Request, store: Any, job_id: str) -> dict[str, Any]:
    """On a thread: the job whose whole id is ``job_id``, if the token reaches its agent;
    ``NotFound`` otherwise, whether it exists or not."""
    job = next((j for j in store.all() if j["id"] == job_id), None)
    if job is None or not allowed(request, str(job["agentId"])):
        raise NotFound(f"no job {job_id}")
    return job


async def _switch(request: Request, enabled: bool) -> Response:
    store, job_id = _store(request), request.path_params["id"]

    def change() -> dict[str, Any]:
        job = _reachable(request, store, job_id)
        now = datetime.now(timezone.utc)
        return view(store.update(job["id"], lambda j: switched(j, enabled, now)),
                    _zone(request, str(job["agentId"])))

    return ok({"job": await run_in_threadpool(change)})


async def pause_job(request: Request) -> Response:
    return await _switch(request, False)


async def resume_job(request: Request) -> Response:
    return await _switch(request, True)


async def delete_job(request: Request) -> Response:
    store, job_id = _store(request), request.path_params["id"]

    def remove() -> None:
        job = _reachable(request, store, job_id)
        if job.get("kind") == HEARTBEAT:
            raise BadRequest(f"job {job_id} is the heartbeat, set in the config "
                             f"(agents.defaults.heartbeat); pause it instead")
        store.remove(job["id"])

    await run_in_threadpool(remove)
    return ok({"deleted": True, "id": job_id})


ROUTES = [
    Route("/api/sessions/{key:session_key}/jobs", session_jobs, methods=["GET"]),
    Route("/api/jobs/{id}/pause", pause_job, methods=["POST"]),
    Route("/api/jobs/{id}/resume", resume_job, methods=["POST"]),
    Route("/api/jobs/{id}", delete_job, methods=["DELETE"]),
]
