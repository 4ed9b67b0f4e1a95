"""A job's run as a turn of a session already open: how ``clawd serve`` runs a job whose
session (``main``, a named key) its hub holds for the chats, in that session's queue.

``spec`` is what the queued turn carries: the job's message, tools, model, kind and the
run's ``origin``, as plain JSON (on PostgreSQL any worker holding the session may run it).
``run_in_chat`` runs it on the hub's worker thread through the session's open ``Chat``, as
``runner.direct_turn`` does in a session of its own: only the job's tools (never
``schedule``), its model for this turn only, the message marked with its origin, and a
heartbeat answered ``HEARTBEAT_OK`` forgotten from the history the model sees. The
session's own tools and model are back for the next turn.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from clawd.core.cancel import CancelToken
from clawd.core.errors import ClawdError
from clawd.core.events import ErrorEvent, Event, TurnDone
from clawd.core.messages import Usage
from clawd.loop.lifecycle import due_reset
from clawd.scheduler.runner import for_job, forget_beat, quiet_beat


def spec(job: dict[str, Any], origin: dict[str, Any]) -> dict[str, Any]:
    """What a queued turn carries to run ``job``'s message with ``origin``."""
    return {"jobId": job["id"], "kind": job.get("kind") or "job",
            "message": str(job["message"]), "tools": job.get("tools"),
            "model": job.get("model"), "origin": origin}


def run_in_chat(chat: Any, run: dict[str, Any], token: CancelToken
                ) -> Generator[Event, None, None]:
    """The events of the run ``run`` (a ``spec``) as one turn of ``chat``'s open session
    (a ``frontends.commands.Chat``; its daily or idle reset first, as for a message)."""
    chat.token = token
    try:
        if reason := due_reset(chat.session):
            yield from chat.new_session(reason)
    except ClawdError as exc:  # the turn did not start
        yield ErrorEvent(str(exc))
        yield chat.session.turn_done("", Usage(), failed=True)
        return
    session = chat.session
    runtime, reply, failed = session.rt, "", True
    session.rt = for_job(runtime, run)  # the tools it offers: the job's
    try:
        with session.in_use.lent(run.get("model")):
            for event in session.run_turn(str(run["message"]), origin=run["origin"],
                                          token=token):
                if isinstance(event, TurnDone):
                    reply, failed = event.text, event.failed or event.aborted
                yield event
    finally:
        session.rt = runtime
        session.reoffer()
    if quiet_beat(run, reply, failed):
        forget_beat(session)
