"""Running jobs: claim what is due, run each occurrence as a turn, record it, deliver it.

``Runner.tick`` is one pass (``clawd jobs tick``, and each beat of ``clawd serve``'s
background loop): the store claims the due occurrences (recorded as ``running`` before
anything runs, so a restart, a second worker or a ``jobs tick`` beside a server never runs
one twice), each runs as an ordinary turn of the loop in its session (``isolated``: a fresh
session ``agent:<id>:cron:<jobId>`` each run; ``main``; or a named key) with the message's
provenance (``origin``), then the run is recorded and its delivery tried. A job made by the
model runs with the tools its turn had (``tools``), never ``schedule`` itself. Failures in a
row are counted on the job (``automation.runs.ended``): the third tells the owner through
the job's target, the tenth pauses the job.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from clawd.automation import runs as runlog
from clawd.automation.heartbeat import is_ok
from clawd.automation.jobs import SESSION_ISOLATED
from clawd.automation.runs import Claimed
from clawd.core.errors import ClawdError
from clawd.scheduler import heartbeat
from clawd.scheduler.delivery import BACKGROUND_KINDS, deliver, kind_of

if TYPE_CHECKING:
    from clawd.loop.runtime import Runtime
    from clawd.storage.jobs import JobStore

log = logging.getLogger(__name__)
SESSION_WAIT_SECONDS = 60.0  # a main or named session in use: how long a run waits for it
NOT_IN_RUNS = ("schedule",)  # tools a job's run is never offered
# one turn: (runtime, job, session key, origin) -> (reply, error or None)
TurnFn = Callable[["Runtime", dict[str, Any], str, dict[str, Any]], tuple[str, str | None]]


def origin_of(job: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The provenance a run's message carries into the transcript."""
    return {"kind": job.get("kind") or "job", "jobId": job["id"],
            "scheduledFor": run["scheduledFor"],
            "remember": bool(job.get("remember"))}


def for_job(runtime: Runtime, job: dict[str, Any]) -> Runtime:
    """``runtime`` with only the tools the job may use."""
    allowed = job.get("tools")
    tools = [tool for tool in runtime.tools if tool.spec.name not in NOT_IN_RUNS
             and (allowed is None or tool.spec.name in allowed)]
    return dataclasses.replace(runtime, tools=tools)


def direct_turn(runtime: Runtime, job: dict[str, Any], key: str, origin: dict[str, Any]
                ) -> tuple[str, str | None]:
    """Run the job's message as one turn of a ``Session`` of this process."""
    from clawd.core.events import ErrorEvent, TurnDone
    from clawd.loop.session import Session

    fresh = (job.get("session") or SESSION_ISOLATED) == SESSION_ISOLATED
    reply, errors, failed = "", [], False
    with Session.open(for_job(runtime, job), key, job.get("model"), fresh=fresh, pin=False,
                      wait=SESSION_WAIT_SECONDS) as session:
        for event in session.run_turn(str(job["message"]), origin=origin):
            if isinstance(event, ErrorEvent):
                errors.append(event.message)
            elif isinstance(event, TurnDone):
                reply, failed = event.text, event.failed or event.aborted
        if quiet_beat(job, reply, failed):
            forget_beat(session)
    return verdict(reply, errors, failed)


def verdict(reply: str, errors: list[str], failed: bool) -> tuple[str, str | None]:
    """A run's reply and its error (None: it went well), from what its turn said: its
    reply, its error lines and whether it failed (or was stopped)."""
    if failed or (errors and not reply):
        return reply, "; ".join(errors) or "the turn failed"
    return reply, None


def quiet_beat(job: dict[str, Any], reply: str, failed: bool) -> bool:
    """Whether the run was a heartbeat that had nothing to say (``HEARTBEAT_OK``)."""
    return job.get("kind") == heartbeat.KIND and not failed and is_ok(reply)


def forget_beat(session: Any) -> None:
    """A beat answered ``HEARTBEAT_OK`` said nothing: its turn leaves the history the model
    sees (an ``undo`` entry; the transcript keeps it), so beats of a quiet day neither fill
    the main session's window nor show in its history."""
    try:
        session.undo_turn("forget the heartbeat")
    except ClawdError as exc:  # summarised meanwhile: it stays
        log.info("the heartbeat's turn stays in %s: %s", session.key, exc)


class Runner:
    """Runs the due jobs of ``agents`` (None: every agent) from ``store``."""

    def __init__(self, store: JobStore, runtime_for: Callable[[str], Runtime],
                 clock: Callable[[], datetime], *, agents: set[str] | None = None,
                 turn: TurnFn = direct_turn, kinds: frozenset[str] = BACKGROUND_KINDS,
                 channel: Callable[[str, str], str] | None = None):
        self.store = store
        self.runtime_for = runtime_for
        self.clock = clock
        self.agents = agents
        self.turn = turn
        self.kinds = kinds  # the delivery targets this process sends to
        self.channel = channel  # how it sends to a channel (``delivery.deliver``)

    def tick(self) -> list[dict[str, Any]]:
        """Run every occurrence due now, then send the deliveries due; the runs made."""
        for run in self.store.interrupted(self.clock()):
            log.warning("job %s: the run for %s was interrupted (its process stopped); it is "
                        "not run again", run["jobId"], run["scheduledFor"])
        done = []
        while claimed := self.store.claim_due(self.clock(), self.agents, limit=1):
            done += [self.run(one) for one in claimed]
        self.deliver_due()
        return done

    def run_now(self, wanted: str) -> dict[str, Any]:
        """Run a job now (``clawd jobs run``), whatever its schedule."""
        job = self.store.get(wanted)
        claimed = self.store.claim_now(job["id"], self.clock())
        if claimed is None:
            raise ClawdError(f"job {job['id']} has a run at this very second already")
        done = self.run(claimed)
        self.deliver_due()
        return done

    def run(self, claimed: Claimed) -> dict[str, Any]:
        """Run one claimed occurrence and record it (and what the job learns from it)."""
        job, run = claimed.job, claimed.run
        skipped = None
        try:
            runtime = self.runtime_for(str(job["agentId"]))
            if job.get("kind") == heartbeat.KIND:
                skipped, said = heartbeat.check(runtime, self.store, job, self.clock())
                job = {**job, "message": said}
            if skipped is None:
                reply, error = self.turn(runtime, job, run["sessionKey"], origin_of(job, run))
        except ClawdError as exc:
            reply, error = "", str(exc)
        except Exception as exc:  # noqa: BLE001 - a run's crash is its error, not the loop's
            log.exception("job %s: the run failed", job["id"])
            reply, error = "", f"{type(exc).__name__}: {exc}"
        if skipped is not None:  # no model call at all
            done = runlog.finished(run, "skipped", self.clock(), error=skipped)
            self.store.save_run(done)
            return done
        done = runlog.finished(run, "error" if error else "ok", self.clock(),
                               reply=reply or None, error=error)
        if job.get("kind") == heartbeat.KIND and is_ok(reply or ""):
            done["delivery"] = {**done["delivery"], "status": "none"}  # nothing to tell
        notice = self._ended(job["id"], done["status"])
        if notice is not None:
            done["notice"] = notice
            if done["delivery"]["status"] == "none" and done["delivery"]["target"] != "none":
                done["delivery"] = {**done["delivery"], "status": "pending"}
            log.warning("%s", notice)
        self.store.save_run(done)
        return done

    def _ended(self, job_id: str, status: str) -> str | None:
        told: list[str | None] = [None]

        def change(job: dict[str, Any]) -> dict[str, Any]:
            updated, told[0] = runlog.ended(job, status)
            return updated

        try:
            self.store.update(job_id, change)
        except ClawdError:  # removed while it ran
            return None
        return told[0]

    def deliver_due(self) -> int:
        """Send the deliveries due to the targets this process sends to; how many went."""
        sent = 0
        for claimed in self.store.claim_deliveries(self.clock(), self.agents, self.kinds):
            if kind_of(claimed.run["delivery"]["target"]) not in self.kinds:
                continue
            message_id, error = deliver(claimed.job, claimed.run, self.channel)
            self.store.save_run(runlog.sent(claimed.run, self.clock(), message_id, error))
            if error is None:
                sent += 1
            else:
                log.warning("job %s: delivery to %s failed: %s", claimed.job["id"],
                            claimed.run["delivery"]["target"], error)
        return sent
