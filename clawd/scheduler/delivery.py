"""Delivering a finished run to its target: the outbox's sending side.

A run's reply (or, after failed runs in a row, the notice for its owner) goes to the job's
target; ``delivered`` means the target took it, with its message id: a webhook's 2xx answer
(its ``id`` when the body has one), the web page's notification store (the run itself,
read by ``GET /api/notifications``), a channel's message id (``telegram:<chatId>``, sent
by what the front end hands in). ``cli`` is delivered by the REPL when it shows the run
at its next prompt, so a background sender leaves it be. A failure is recorded and tried
again later (``automation.runs.sent``) without asking the model again.

A webhook's body is JSON ``{"jobId", "name", "scheduledFor", "sessionKey", "text",
"status"}``, signed with the job's secret: ``X-Clawd-Signature: sha256=<hex HMAC-SHA256 of
"<timestamp>.<body>">`` and ``X-Clawd-Timestamp``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

BACKGROUND_KINDS = frozenset({"web", "webhook", "telegram"})  # a server sends; the REPL takes cli
TIMEOUT_SECONDS = 10.0


def text_of(run: dict[str, Any]) -> str:
    """What a delivery says: the reply, or the notice for the owner."""
    return str(run.get("reply") or run.get("notice") or "")


def kind_of(target: str) -> str:
    return target.split(":", 1)[0]


def deliver(job: dict[str, Any], run: dict[str, Any],
            channel: Callable[[str, str], str] | None = None) -> tuple[str | None, str | None]:
    """Send ``run`` to its target: (the target's message id, None) or (None, the error).
    ``channel(target, text)``: how this process sends to a channel (``telegram:<chatId>``),
    the message id the channel gave; it raises when the channel did not take it."""
    target = str(run["delivery"]["target"])
    kind = kind_of(target)
    if kind == "web":
        return f"web:{job['id']}:{run['scheduledFor']}", None
    if kind == "webhook":
        return webhook(target.removeprefix("webhook:"), str(job.get("secret") or ""), job, run)
    if kind == "telegram" and channel is not None:
        try:
            return channel(target, text_of(run)), None
        except Exception as exc:  # noqa: BLE001 - recorded, and tried again later
            return None, " ".join(str(exc).split()) or type(exc).__name__
    return None, f"no sender for the target {target!r} here"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``<timestamp>.<body>`` with the job's secret."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def webhook(url: str, secret: str, job: dict[str, Any], run: dict[str, Any]
            ) -> tuple[str | None, str | None]:
    body = json.dumps({"jobId": job["id"], "name": job.get("name") or "",
                       "scheduledFor": run["scheduledFor"], "sessionKey": run.get("sessionKey"),
                       "text": text_of(run), "status": run["status"]}).encode()
    stamp = str(int(time.time()))
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "clawd",
        "X-Clawd-Timestamp": stamp, "X-Clawd-Signature": signature(secret, stamp, body),
        "X-Clawd-Job": job["id"]})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310
            status, raw = answer.status, answer.read(65536)
            header = answer.headers.get("X-Message-Id")
    except urllib.error.HTTPError as exc:
        return None, f"the webhook answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return None, f"the webhook cannot be reached ({getattr(exc, 'reason', exc)})"
    try:
        found = json.loads(raw).get("id") if raw else None
    except (ValueError, AttributeError):
        found = None
    return str(found or header or f"http-{status}"), None


def take_cli(store: Any, agent_id: str, now: Any) -> list[str]:
    """The ``cli`` deliveries of ``agent_id`` waiting for a REPL, each taken (``delivered``,
    its message id this process and time) and returned as the line to show."""
    import os

    from clawd.automation import runs as runlog

    shown = []
    for claimed in store.claim_deliveries(now, {agent_id.lower()}, frozenset({"cli"})):
        job, run = claimed.job, claimed.run
        message_id = f"cli:{os.getpid()}:{run['scheduledFor']}"
        store.save_run(runlog.sent(run, now, message_id, None))
        name = job.get("name") or f"job {job['id']}"
        shown.append(f"⏰ {name}: {text_of(run)}")
    return shown
