"""How many turns one person may start: pure rules over the times their turns started.

``turn_refusal`` is the whole rule (``gateway.quotas``): at most ``per_minute`` turns started
in any ``WINDOW_SECONDS``, and at most ``at_once`` under way (running or waiting) at once. It
takes the start times and the count under way and answers why not and when to try again,
or None; where the times come from (one process's memory, ``LocalTurnQuota``, or a table
every worker writes, ``storage.postgres.quotas``) is the caller's.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

WINDOW_SECONDS = 60.0
AT_ONCE_RETRY_SECONDS = 5  # when one of the turns under way may have ended


@dataclass(frozen=True)
class Refusal:
    """Why a turn may not start now, and in how many seconds to ask again."""

    message: str
    retry_after: int


def in_window(starts: Iterable[float], now: float, window: float = WINDOW_SECONDS
              ) -> list[float]:
    """The starts within the last ``window`` seconds before ``now``, oldest first."""
    return sorted(t for t in starts if 0 <= now - t < window)


def retry_after(starts: Iterable[float], now: float, limit: int,
                window: float = WINDOW_SECONDS) -> int:
    """Whole seconds until fewer than ``limit`` of ``starts`` lie in the window (at least
    1; 0 when there is room now)."""
    recent = in_window(starts, now, window)
    if len(recent) < limit:
        return 0
    leaving = recent[len(recent) - limit]  # once it leaves, one more fits
    return max(1, math.ceil(leaving + window - now))


def turn_refusal(starts: Iterable[float], under_way: int, now: float, *,
                 per_minute: int | None, at_once: int | None,
                 window: float = WINDOW_SECONDS) -> Refusal | None:
    """Whether one more turn may start (None) or why not."""
    if per_minute is not None:
        wait = retry_after(starts, now, per_minute, window)
        if wait:
            return Refusal(f"{per_minute} turns were started in the last minute, the most "
                           f"one person may (gateway.quotas.turnsPerMinute); try again in "
                           f"{wait} s", wait)
    if at_once is not None and under_way >= at_once:
        return Refusal(f"{under_way} turns of yours are under way, the most one person may "
                       f"have at once (gateway.quotas.turnsAtOnce); try again when one has "
                       f"ended", AT_ONCE_RETRY_SECONDS)
    return None


@dataclass
class LocalTurnQuota:
    """The turns of each person in one process: when each started, and the turns of the
    tickets not given back (under way until their ``state`` is ``done``)."""

    clock: Callable[[], float] = time.monotonic
    starts: dict[str, dict[str, float]] = field(default_factory=dict)  # person: ticket: t
    turns: dict[str, Any] = field(default_factory=dict)  # ticket: its turn (None: queuing)

    remote = False

    def reserve(self, person: str, per_minute: int | None, at_once: int | None
                ) -> str | Refusal:
        now = self.clock()
        mine = self.starts.setdefault(person, {})
        for ticket, started in list(mine.items()):  # forget what no longer counts
            if now - started >= WINDOW_SECONDS and not self._under_way(ticket):
                del mine[ticket]
                self.turns.pop(ticket, None)
        under_way = sum(1 for ticket in mine if self._under_way(ticket))
        refusal = turn_refusal(in_window(mine.values(), now), under_way, now,
                               per_minute=per_minute, at_once=at_once)
        if refusal is not None:
            return refusal
        ticket = uuid.uuid4().hex
        mine[ticket], self.turns[ticket] = now, None
        return ticket

    def _under_way(self, ticket: str) -> bool:
        turn = self.turns.get(ticket)
        return ticket in self.turns and (turn is None or turn.state != "done")

    def attach(self, ticket: str, turn: Any) -> None:
        if ticket in self.turns:
            self.turns[ticket] = turn

    def cancel(self, ticket: str) -> None:
        self.turns.pop(ticket, None)
        for mine in self.starts.values():
            mine.pop(ticket, None)
