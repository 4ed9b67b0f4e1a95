"""The failed sign-ins of one ``clawd serve`` process: wrong tokens per client address
(``rate_key``: an IPv4 address, or an IPv6 address's /64, which one host usually holds
whole), counted in memory, each lockout also written where ``clawd users unlock`` finds it
(``storage.files.lockouts``). Several workers on one database count them together instead
(``storage.postgres.auth``); either is the coordination's (``coordination.Coordination``).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clawd.config.gateway import RateLimit
from clawd.core.errors import ClawdError


def address_in(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address in one hop of ``X-Forwarded-For`` (``1.2.3.4``, ``1.2.3.4:5678``,
    ``[::1]:80``, ``::1``), or None when it holds none."""
    hop = text.strip()
    if hop.startswith("["):
        hop = hop[1:].partition("]")[0]
    elif hop.count(":") == 1:
        hop = hop.partition(":")[0]
    try:
        return ipaddress.ip_address(hop)
    except ValueError:
        return None


def rate_key(address: str) -> str:
    """What wrong tokens are counted by: an IPv4 address, or an IPv6 address's /64."""
    found = address_in(address)
    if isinstance(found, ipaddress.IPv6Address):
        if found.ipv4_mapped is not None:
            return str(found.ipv4_mapped)
        return str(ipaddress.ip_network(f"{found}/64", strict=False))
    return str(found) if found is not None else address


@dataclass
class FailedAuth:
    """Wrong tokens per client (``rate_key``), within ``windowSeconds``; past
    ``maxAttempts`` the client's tokens are refused unread for ``lockoutSeconds``. Only a
    token presented and wrong counts: a request with none (what any web page can make a
    browser send) is a guess at nothing. A right token clears nothing (the address may be
    another person's, guessing between sign-ins): wrong ones end only with their window.
    Bounded: the oldest clients are forgotten past ``MAX_CLIENTS``."""

    limit: RateLimit
    clock: Callable[[], float] = time.monotonic
    failures: dict[str, list[float]] = field(default_factory=dict)
    locked: dict[str, float] = field(default_factory=dict)
    # where lockouts are written for ``clawd users unlock`` (``storage.files.lockouts``): a client
    # locked out here and no longer there was let in again
    kept: Any = None
    unkept: set[str] = field(default_factory=set)  # lockouts that could not be written

    MAX_CLIENTS = 10_000

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        until = self.locked.get(client)
        if until is None:
            return None
        left = until - self.clock()
        if left <= 0 or (self.kept is not None and client not in self.unkept
                         and not self.kept.holds(client)):
            del self.locked[client]
            self.failures.pop(client, None)
            self.unkept.discard(client)
            return None
        return max(1, round(left + 0.5))

    def failed(self, client: str) -> int | None:
        """Count a failure; the seconds of the lockout it starts, if it starts one."""
        now = self.clock()
        recent = [t for t in self.failures.get(client, []) if now - t < self.limit.window_seconds]
        recent.append(now)
        if len(recent) >= self.limit.max_attempts:
            self.failures.pop(client, None)
            self.locked[client] = now + self.limit.lockout_seconds
            if self.kept is not None:
                try:
                    self.kept.lock(client, time.time() + self.limit.lockout_seconds)
                except (OSError, ClawdError):  # locked out all the same, here
                    self.unkept.add(client)
            return max(1, round(self.limit.lockout_seconds))
        self.failures[client] = recent
        while len(self.failures) > self.MAX_CLIENTS:
            self.failures.pop(next(iter(self.failures)))
        return None
