"""The one retry policy of the remote embedding services: OpenAI and Gemini, their
synchronous endpoints and their batch jobs alike.

A call that fails for a reason a retry can cure (a timeout or a dropped connection, HTTP
408, 409, 429 or 5xx) is made again, up to ``RETRIES`` more times, after a backoff that
doubles from ``FIRST_DELAY`` up to ``MAX_DELAY``, shortened by up to a quarter at random so
that clients do not retry in step. A server's ``retry-after-ms`` or ``Retry-After`` of up to
``MAX_RETRY_AFTER`` seconds is waited instead; a longer one, or ``x-should-retry: false``,
means no retry. These are the OpenAI SDK's numbers; its own retries are turned off so that
this one policy covers every service. Each adapter says which of its errors are which
(``classify``); errors it does not know are raised at once.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRIES = 3  # calls after the first
FIRST_DELAY = 0.5  # seconds before the first retry; doubled for each one after
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 120.0  # a server asking for a longer wait is not retried
RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx


@dataclass(frozen=True, slots=True)
class Failure:
    """What a failed call means for the next one: whether a retry can help, and the wait
    the server asked for (seconds), if any."""

    retryable: bool
    retry_after: float | None = None


TRANSIENT = Failure(True)  # a timeout or a connection that failed or dropped


def for_status(status: int, headers: Any = None) -> Failure:
    """The failure an HTTP error status (with its response headers) stands for."""
    wait = retry_after(headers)
    if wait is not None and math.isfinite(wait) and wait > MAX_RETRY_AFTER:
        return Failure(False, wait)
    said = headers.get("x-should-retry") if headers is not None else None
    if said in ("true", "false"):
        return Failure(said == "true", wait)
    return Failure(status in RETRY_STATUSES or status >= 500, wait)


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, then ``Retry-After`` as seconds
    or as a date); None when it did not say."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    try:
        parsed = email.utils.parsedate_tz(headers.get("retry-after"))
        return float(email.utils.mktime_tz(parsed) - time.time()) if parsed else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def backoff(retry: int, server_wait: float | None = None) -> float:
    """Seconds before retry number ``retry`` (0 for the first)."""
    if server_wait is not None and math.isfinite(server_wait) \
            and 0 < server_wait <= MAX_RETRY_AFTER:
        return server_wait
    return min(FIRST_DELAY * 2.0 ** retry, MAX_DELAY) * (1 - 0.25 * random.random())


def call(fn: Callable[[], T], classify: Callable[[Exception], Failure | None], *,
         what: str = "call", sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()``, made again while it fails with an error ``classify`` calls retryable; the
    last error is raised as it is."""
    retry = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            failure = classify(exc)
            if failure is None or not failure.retryable or retry >= RETRIES:
                raise
            wait = backoff(retry, failure.retry_after)
            log.debug("%s failed (%s); retrying in %.2f s", what, exc, wait)
            sleep(wait)
            retry += 1
