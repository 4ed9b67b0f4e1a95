"""Reading a time (``--at``, the ``schedule`` tool's ``at``) and a duration (``--every``).

A time is ISO 8601 (an offset or ``Z`` is kept; without one it is read in the user's zone)
or a phrase in English, read in the user's zone from an injected ``now``:

- relative: ``in 20 minutes``, ``in an hour``, ``in half an hour``, ``in 1h30m``,
  ``in 2 days`` (an absolute span: 20 minutes are 20 minutes in any zone);
- a day and a time, either way round: ``tomorrow at 9``, ``today 18:30``, ``tonight``,
  ``Friday 18:30``, ``next Monday at 9am``, ``at 7pm on Sunday``, ``Dec 5 at 9``,
  ``5 December 18:00``, ``2026-12-05 09:00``;
- a time alone (``at 9``, ``18:30``, ``noon``): its next occurrence, today or tomorrow.

A day without a time is 09:00 (``tonight``: 20:00). A local time that a DST change skips is
moved forward by the gap. Anything else is a ``ClawdError`` listing what is understood: the
phrase grammar is small and exact on purpose, so a time is never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from clawd.automation.zones import UTC
from clawd.core.errors import ClawdError

UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
         "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
         "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800,
         "weeks": 604800}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
DEFAULT_TIME = time(9, 0)
UNDERSTOOD = ("ISO 8601 (2026-12-05T09:00, with an offset or read in your zone), "
              "\"in 20 minutes\", \"tomorrow at 9\", \"Friday 18:30\", \"next Monday 9am\", "
              "\"Dec 5 at 9\", \"at 18:30\"")

_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_TIME = re.compile(r"(?:at\s+)?(?:(noon|midday|midnight)|(\d{1,2})(?:[:.h](\d{2}))?\s*"
                   r"(am|pm|a\.m\.|p\.m\.|o'?clock)?)$")


def parse_duration(text: str) -> timedelta:
    """``20m``, ``1h30m``, ``90 minutes``, ``2 days``, ``an hour``, ``half an hour``."""
    words = text.strip().lower().replace(",", " ").replace(" and ", " ")
    words = re.sub(r"\bhalf an? hour\b", "30 minutes", words)
    words = re.sub(r"\ban?\s+(?=[a-z])", "1 ", words)
    total, at = 0.0, 0
    for found in _SPAN.finditer(words):
        if words[at:found.start()].strip():
            break
        if found.group(2) not in UNITS:
            break
        total += float(found.group(1)) * UNITS[found.group(2)]
        at = found.end()
    if total <= 0 or words[at:].strip():
        raise ClawdError(f"not a duration: {text!r} (e.g. 20m, 1h30m, 90 minutes, 2 days)")
    return timedelta(seconds=total)


def parse_when(text: str, now: datetime, tz: ZoneInfo) -> datetime:
    """The moment ``text`` names (aware, UTC), read in ``tz`` as of ``now``."""
    raw = text.strip()
    iso = _iso(raw, tz)
    if iso is not None:
        return _ahead(iso, text, now, tz)
    words = re.sub(r"\s+", " ", raw.lower().strip(" .!?")).removeprefix("on ")
    if words.startswith("in "):
        return (now + parse_duration(words[3:])).astimezone(UTC)
    local_now = now.astimezone(tz)
    day, clock = _split(words, local_now.date())
    if day is None and clock is None:
        raise ClawdError(f"cannot read the time {text!r}; say it as {UNDERSTOOD}")
    evening = re.search(r"\b(tonight|this evening)\b", words) is not None
    if evening and clock is not None and clock.hour < 12 and not re.search(r"am\b", words):
        clock = clock.replace(hour=clock.hour + 12)
    at = clock or (time(20, 0) if evening else DEFAULT_TIME)
    if day is None:
        day = local_now.date()
        if _local(day, at, tz) <= now:
            day += timedelta(days=1)
    return _ahead(_local(day, at, tz), text, now, tz)


def _ahead(moment: datetime, text: str, now: datetime, tz: ZoneInfo) -> datetime:
    if moment <= now:
        raise ClawdError(f"{text!r} is {moment.astimezone(tz):%a %Y-%m-%d %H:%M} {tz.key}, "
                         f"which has passed")
    return moment


def _iso(raw: str, tz: ZoneInfo) -> datetime | None:
    if not re.match(r"\d{4}-\d{2}-\d{2}", raw):
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ClawdError(f"not an ISO 8601 time: {raw!r}") from None
    if len(raw) == 10:
        moment = datetime.combine(moment.date(), DEFAULT_TIME)
    if moment.tzinfo is None:
        return _local(moment.date(), moment.time(), tz)
    return moment.astimezone(UTC)


def _local(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The moment of ``day`` ``at`` in ``tz``: with ``fold=0`` (PEP 495) a local time a DST
    change skips moves forward by the gap, and one it repeats is its first occurrence."""
    return datetime.combine(day, at).replace(tzinfo=tz, fold=0).astimezone(UTC)


def _split(words: str, today: date) -> tuple[date | None, time | None]:
    """(the day, the time) a phrase names; (None, None) when it names neither."""
    day: date | None = None
    rest = words
    for pattern, reader in _DAYS:
        found = re.search(pattern, rest)
        if found:
            day = reader(found, today)
            rest = (rest[:found.start()] + " " + rest[found.end():]).strip()
            break
    rest = re.sub(r"\b(on|at|the)\s*$", "", re.sub(r"^\s*(on|the)\b", "", rest)).strip()
    rest = rest.rstrip(",").strip()
    if not rest:
        return day, None
    clock = _clock(rest)
    if clock is None:
        return None, None
    return day, clock


def _clock(text: str) -> time | None:
    found = _TIME.match(text.strip())
    if not found:
        return None
    named, hour, minute, half = found.groups()
    if named:
        return time(0, 0) if named == "midnight" else time(12, 0)
    h, m = int(hour), int(minute or 0)
    if half and half.startswith(("p", "a")):
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if half.startswith("p") else 0)
    if h > 23 or m > 59:
        return None
    return time(h, m)


def _weekday(found: re.Match[str], today: date) -> date:
    wanted = WEEKDAYS.index(_full(found.group(2), WEEKDAYS))
    ahead = (wanted - today.weekday()) % 7
    if found.group(1) and ahead == 0:
        ahead = 7  # "next friday" on a Friday: a week on
    return today + timedelta(days=ahead)


def _full(word: str, names: tuple[str, ...]) -> str:
    return next(name for name in names if name.startswith(word[:3]))


def _month_day(month: str, day: str, today: date) -> date:
    number = MONTHS.index(_full(month, MONTHS)) + 1
    try:
        found = date(today.year, number, int(day))
        return found if found >= today else date(today.year + 1, number, int(day))
    except ValueError:
        raise ClawdError(f"there is no {month} {day}") from None


_WEEKDAY = r"(mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|nesday|sday|urday)?"
_MONTH = (r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*")
_DAYS: list[tuple[str, Callable[[re.Match[str], date], date]]] = [
    (r"\bday after tomorrow\b", lambda f, t: t + timedelta(days=2)),
    (r"\btomorrow\b", lambda f, t: t + timedelta(days=1)),
    (r"\b(?:today|tonight|this evening)\b", lambda f, t: t),
    (rf"\b(next\s+)?{_WEEKDAY}\b", _weekday),
    (rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b",
     lambda f, t: _month_day(f.group(2), f.group(1), t)),
    (rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?![:.h]\d)",
     lambda f, t: _month_day(f.group(1), f.group(2), t)),
]


def time_phrase(text: str, now: datetime, tz: ZoneInfo, longest: int = 7) -> str | None:
    """The words of ``text`` that name a time ``parse_when`` reads ("Can you remind me on
    Friday at 6pm to water the plants?" -> "Friday at 6pm"): the longest run of up to
    ``longest`` words that reads as a time still ahead, the first of those; None when no
    run does. What a person wrote, so a model can pass it on instead of a time of its own."""
    words = [w.strip(".,!?;:\"'()") for w in text.split()]
    for size in range(min(longest, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            phrase = " ".join(w for w in words[start:start + size] if w)
            try:
                parse_when(phrase, now, tz)
            except ClawdError:
                continue
            return re.sub(r"^on\s+", "", phrase, flags=re.I)  # "on Friday at 6pm"
    return None
