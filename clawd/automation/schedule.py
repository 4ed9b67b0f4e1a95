"""A job's schedule and its occurrences: ``at`` once, ``every`` a span, ``cron`` in a zone.

A ``cron`` expression is read in its own zone (``--tz``, else the user's), by ``cronsim``,
so ``0 9 * * *`` in Europe/Lisbon is 09:00 Lisbon time on both sides of a DST change (a
local time the change skips runs at the first minute after the gap; one it repeats runs
once). ``every`` counts whole spans from its anchor (when the job was added): absolute time,
untouched by DST. Every moment here is aware and handed in; ``plan`` decides, for a job
found due at ``now``, which occurrence runs and which are recorded as missed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from clawd.automation.when import parse_duration
from clawd.automation.zones import UTC, iso_utc, parse_iso, zone
from clawd.core.errors import ClawdError

Kind = Literal["at", "every", "cron"]
Missed = Literal["once", "skip"]
GRACE = timedelta(minutes=5)  # an occurrence found this late is still on time
MISSED_KEPT = 20  # the missed occurrences recorded at most, the latest ones
MIN_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    at: str | None = None  # ISO 8601, UTC
    every_seconds: int | None = None
    anchor: str | None = None  # the first occurrence of an ``every``, ISO 8601 UTC
    expr: str | None = None
    tz: str | None = None  # the zone a cron expression is read in

    def to_json(self) -> dict[str, Any]:
        """OpenClaw's shape: ``{"kind": "at", "at"}``, ``{"kind": "every", "everyMs",
        "anchor"}``, ``{"kind": "cron", "expr", "tz"}``."""
        if self.kind == "at":
            return {"kind": "at", "at": self.at}
        if self.kind == "every":
            return {"kind": "every", "everyMs": (self.every_seconds or 0) * 1000,
                    "anchor": self.anchor}
        return {"kind": "cron", "expr": self.expr, "tz": self.tz}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        kind = data.get("kind")
        if kind == "at":
            return cls("at", at=str(data["at"]))
        if kind == "every":
            return cls("every", every_seconds=int(data["everyMs"]) // 1000,
                       anchor=str(data["anchor"]))
        if kind == "cron":
            return cls("cron", expr=str(data["expr"]), tz=str(data.get("tz") or "UTC"))
        raise ClawdError(f"unknown schedule kind {kind!r}")


def at(moment: datetime) -> Schedule:
    return Schedule("at", at=iso_utc(moment))


def every(span: str, now: datetime) -> Schedule:
    """Every ``span`` (``20m``, ``1h``, ``2 days``), the first occurrence one span from now."""
    length = parse_duration(span)
    if length < MIN_EVERY:
        raise ClawdError(f"--every {span}: at least one minute between runs")
    return Schedule("every", every_seconds=int(length.total_seconds()),
                    anchor=iso_utc(now + length))


def cron(expr: str, tz: str) -> Schedule:
    """``expr`` (five fields, or a nickname such as ``@daily``) read in ``tz``."""
    from cronsim import CronSim, CronSimError

    zone(tz)
    try:
        CronSim(expr, datetime.now(UTC))
    except CronSimError as exc:
        raise ClawdError(f"not a cron expression: {expr!r} ({exc})") from None
    return Schedule("cron", expr=expr.strip(), tz=tz)


def next_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` (None: there is none)."""
    if schedule.kind == "at":
        moment = parse_iso(schedule.at or "")
        return moment if moment > after else None
    if schedule.kind == "every":
        anchor = parse_iso(schedule.anchor or "")
        step = timedelta(seconds=schedule.every_seconds or 60)
        if after < anchor:
            return anchor
        return anchor + step * ((after - anchor) // step + 1)
    from cronsim import CronSim

    local = after.astimezone(zone(schedule.tz or "UTC"))
    return next(CronSim(schedule.expr or "", local)).astimezone(UTC)


def first(schedule: Schedule, now: datetime) -> datetime | None:
    """The job's first occurrence from ``now`` on (an ``at`` in the past: None)."""
    if schedule.kind == "at":
        moment = parse_iso(schedule.at or "")
        return moment if moment >= now else None
    return next_after(schedule, now - timedelta(microseconds=1))


def occurrences(schedule: Schedule, after: datetime, until: datetime,
                limit: int = 100_000) -> list[datetime]:
    """The occurrences in (``after``, ``until``], at most ``limit`` (the earliest)."""
    found: list[datetime] = []
    moment = next_after(schedule, after)
    while moment is not None and moment <= until and len(found) < limit:
        found.append(moment)
        moment = next_after(schedule, moment)
    return found


@dataclass(frozen=True)
class Plan:
    """What a job due at ``now`` does: run one occurrence (or none), record the missed ones,
    and wait for ``next_run`` (None: the job is done)."""

    run: datetime | None
    late: bool  # the run is a catch-up, not on time
    missed: list[datetime] = field(default_factory=list)
    missed_count: int = 0
    next_run: datetime | None = None


def plan(schedule: Schedule, next_run: datetime, now: datetime, missed: Missed,
         grace: timedelta = GRACE) -> Plan:
    """The occurrences from ``next_run`` to ``now``: the latest runs when it is on time
    (within ``grace``), or as the one catch-up of all missed with ``once``; with ``skip`` a
    late one does not run. The others are missed (the latest ``MISSED_KEPT`` recorded)."""
    if next_run > now:
        return Plan(None, False, next_run=next_run)
    if schedule.kind == "every":  # by arithmetic: a minutely job down for a year is one step
        step = timedelta(seconds=schedule.every_seconds or 60)
        count = (now - next_run) // step
        due = [next_run + step * k for k in range(max(0, count - MISSED_KEPT), count + 1)]
        skipped_before = max(0, count - MISSED_KEPT)
    else:
        due = [next_run] + occurrences(schedule, next_run, now)
        skipped_before = 0
    latest = due[-1]
    on_time = now - latest <= grace
    runs = on_time or missed == "once"
    skipped = due[:-1] if runs else due
    return Plan(latest if runs else None, not on_time, skipped[-MISSED_KEPT:],
                len(skipped) + skipped_before, next_after(schedule, now))


def describe(schedule: Schedule) -> str:
    """A schedule in a few words: ``once``, ``every 20m``, ``cron 0 9 * * * (Europe/Lisbon)``."""
    if schedule.kind == "at":
        return "once"
    if schedule.kind == "every":
        return f"every {span_text(schedule.every_seconds or 0)}"
    return f"cron {schedule.expr} ({schedule.tz})"


def span_text(seconds: int) -> str:
    """``5400`` as ``1h30m``."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"
