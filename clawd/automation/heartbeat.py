"""Whether a heartbeat turn is worth a model call: pure decisions over what is handed in.

The heartbeat (``agents.defaults.heartbeat``, off unless ``every`` is set) is a turn in the
main session that reads ``HEARTBEAT.md``. It is skipped, with no model call, when that file
holds no task (only headings, comments, blank list items or nothing), outside
``activeHours`` (in the user's zone; an end before the start spans midnight), after
``maxRunsPerDay`` runs today, or when the person has not written in the main session for
more than ``idleDays`` (so a heartbeat never runs on for weeks beside an empty chair). A
reply of ``HEARTBEAT_OK`` means nothing needs the person, and is dropped.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

FILE = "HEARTBEAT.md"
OK = "HEARTBEAT_OK"
PROMPT = ("This is your periodic check. Do what the tasks below ask now. If nothing needs "
          "the user's attention, reply with exactly HEARTBEAT_OK and nothing else.")
_EMPTY_LINE = re.compile(r"^\s*(#.*|[-*+]\s*(\[ ?\])?\s*|\d+[.)]\s*|>\s*)?$")


def has_task(text: str | None) -> bool:
    """Whether ``HEARTBEAT.md`` asks anything: a line that is not blank, a heading, an
    HTML comment or an empty list item."""
    if not text:
        return False
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return any(not _EMPTY_LINE.match(line) for line in text.splitlines())


def is_ok(reply: str) -> bool:
    """A reply that is only ``HEARTBEAT_OK`` (any case, punctuation or Markdown around it)."""
    return reply.strip().strip("*_`.! \n").upper() == OK


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def in_active_hours(active: Any, local: datetime) -> bool:
    """Whether ``local`` (the user's time) is within ``activeHours`` (None: always)."""
    if active is None:
        return True
    start, end = _minutes(active.start), _minutes(active.end)
    now = local.hour * 60 + local.minute
    if start <= end:
        return start <= now < end
    return now >= start or now < end


def skip_reason(settings: Any, text: str | None, now: datetime, tz: ZoneInfo,
                runs_today: int, last_person: datetime | None) -> str | None:
    """Why this heartbeat is skipped (None: it runs). ``settings``: the ``heartbeat``
    section; ``text``: HEARTBEAT.md (None: there is none); ``last_person``: when the person
    last wrote in the main session (None: never)."""
    if not has_task(text):
        return f"{FILE} holds no task"
    if not in_active_hours(settings.active_hours, now.astimezone(tz)):
        return "outside activeHours"
    if runs_today >= settings.max_runs_per_day:
        return f"maxRunsPerDay ({settings.max_runs_per_day}) reached"
    if last_person is None or now - last_person > timedelta(days=settings.idle_days):
        return f"the main session has been idle more than {settings.idle_days:g} days"
    return None


def day_start(now: datetime, tz: ZoneInfo) -> datetime:
    """The start of ``now``'s day in the user's zone."""
    local = now.astimezone(tz)
    return datetime.combine(local.date(), time(0), tzinfo=tz)


def message(prompt: str, text: str) -> str:
    """The heartbeat turn's message: the prompt, then the tasks (HEARTBEAT.md as it is now),
    so the turn needs no step to read the file."""
    return f"{prompt}\n\nTasks:\n{text.strip()}"
