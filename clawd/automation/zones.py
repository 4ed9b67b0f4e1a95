"""The user's time zone: ``agents.defaults.userTimezone``, else the host's (an IANA name).

The host's zone is taken from ``TZ``, then ``/etc/timezone``, then where ``/etc/localtime``
points; a host that says none of these is read as UTC. Zones come from ``zoneinfo`` with the
``tzdata`` package beside it, so they work on a machine without a system database too.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from clawd.core.errors import ClawdError

UTC = timezone.utc


def zone(name: str) -> ZoneInfo:
    """The zone ``name`` (an IANA name such as ``Europe/Lisbon``), or a ``ClawdError``."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ClawdError(f"unknown time zone {name!r}: use an IANA name such as "
                         f"Europe/Lisbon or America/New_York") from None


def host_zone_name() -> str:
    """The host's zone as an IANA name (``UTC`` when the host does not say)."""
    env = os.environ.get("TZ", "").lstrip(":").strip()
    if env and _known(env):
        return env
    try:
        named = Path("/etc/timezone").read_text(encoding="utf-8").strip()
        if named and _known(named):
            return named
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            named = target.split("zoneinfo/", 1)[1]
            if _known(named):
                return named
    except OSError:
        pass
    return "UTC"


def user_zone(configured: str | None) -> ZoneInfo:
    """The zone times are read and shown in: ``configured``, else the host's."""
    return zone(configured) if configured else ZoneInfo(host_zone_name())


def _known(name: str) -> bool:
    try:
        ZoneInfo(name)
        return True
    except (ZoneInfoNotFoundError, ValueError):
        return False


def both(moment: datetime, tz: ZoneInfo) -> str:
    """``moment`` as the user reads it and as UTC: ``Fri 2026-12-04 09:00 Europe/Lisbon
    (09:00 UTC)``."""
    local = moment.astimezone(tz)
    utc = moment.astimezone(UTC)
    same_day = local.date() == utc.date()
    return (f"{local:%a %Y-%m-%d %H:%M} {tz.key} "
            f"({utc:%H:%M} UTC{'' if same_day else f' on {utc:%Y-%m-%d}'})")


def iso_utc(moment: datetime) -> str:
    """``moment`` in ISO 8601, UTC, to the second: ``2026-12-04T09:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    """An ISO 8601 time as stored (``…Z`` or with an offset), aware."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
