"""The schedule core: times read in the user's zone, occurrences across DST, missed runs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from clawd.automation import schedule as sched
from clawd.automation.when import parse_duration, parse_when, time_phrase
from clawd.automation.zones import both, host_zone_name, iso_utc, user_zone, zone
from clawd.core.errors import ClawdError

UTC = timezone.utc
LISBON = zone("Europe/Lisbon")
FRIDAY = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)  # 10:00 in Lisbon (winter: UTC+0)


@pytest.mark.parametrize(("phrase", "local"), [
    ("tomorrow at 9", "2026-11-28 09:00"),
    ("Friday 18:30", "2026-11-27 18:30"),
    ("next friday 9am", "2026-12-04 09:00"),
    ("at 7pm on Sunday", "2026-11-29 19:00"),
    ("Dec 5 at 9", "2026-12-05 09:00"),
    ("5 December 18:00", "2026-12-05 18:00"),
    ("2026-12-05 09:00", "2026-12-05 09:00"),
    ("at 9", "2026-11-28 09:00"),  # 09:00 has passed today
    ("noon", "2026-11-27 12:00"),
    ("tonight at 10", "2026-11-27 22:00"),
    ("tomorrow", "2026-11-28 09:00"),
    ("on the 5th of december at 9pm", "2026-12-05 21:00"),
])
def test_phrases_are_read_in_the_users_zone(phrase, local):
    tokyo = zone("Asia/Tokyo")
    for tz in (LISBON, tokyo):
        now = FRIDAY if tz is LISBON else datetime(2026, 11, 27, 1, 0, tzinfo=UTC)  # 10:00
        moment = parse_when(phrase, now, tz)
        assert moment.tzinfo == UTC
        assert moment.astimezone(tz).strftime("%Y-%m-%d %H:%M") == local


def test_in_twenty_minutes_is_twenty_minutes_in_any_zone():
    for name in ("UTC", "Europe/Lisbon", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"):
        assert parse_when("in 20 minutes", FRIDAY, zone(name)) == FRIDAY + timedelta(minutes=20)
    # across the October change too: 20 minutes of real time
    before = datetime(2026, 10, 25, 0, 50, tzinfo=UTC)  # 01:50 Lisbon summer time
    assert parse_when("in 20 minutes", before, LISBON) == before + timedelta(minutes=20)


def test_an_iso_time_without_an_offset_is_local_and_one_with_an_offset_is_kept():
    assert iso_utc(parse_when("2027-07-01T09:00", FRIDAY, LISBON)) == "2027-07-01T08:00:00Z"
    assert iso_utc(parse_when("2026-12-01T09:00+02:00", FRIDAY, LISBON)) == "2026-12-01T07:00:00Z"
    assert iso_utc(parse_when("2026-12-01T09:00Z", FRIDAY, LISBON)) == "2026-12-01T09:00:00Z"


def test_a_local_time_skipped_by_dst_moves_forward():
    # 2026-03-29 01:30 does not exist in Lisbon (01:00 -> 02:00)
    moment = parse_when("2026-03-29 01:30", datetime(2026, 3, 1, tzinfo=UTC), LISBON)
    assert moment.astimezone(LISBON).strftime("%H:%M") == "02:30"


@pytest.mark.parametrize("phrase", ["yesterday", "sometime soon", "at 25", "in 3 parsecs",
                                    "friday 9 and more", "2026-02-30 09:00"])
def test_what_is_not_understood_is_refused_not_guessed(phrase):
    with pytest.raises(ClawdError):
        parse_when(phrase, FRIDAY, LISBON)


def test_a_time_in_the_past_is_refused():
    with pytest.raises(ClawdError, match="has passed"):
        parse_when("2026-11-27 09:00", FRIDAY, LISBON)


@pytest.mark.parametrize("message, phrase", [
    ("Can you remind me on Friday at 6pm to water the plants?", "Friday at 6pm"),
    ("Please remind me next Monday to renew my bike insurance.", "next Monday"),
    ("remind me in 20 minutes to stretch", "in 20 minutes"),
    ("Remind me to take 2 pills at 8", "at 8"),  # the count is no time
    ("ping me at 18:30 on Friday about the train", "at 18:30 on Friday"),
    ("In half an hour remind me to check the oven.", "In half an hour"),
    ("remind me Dec 5 at 9 to pay the rent", "Dec 5 at 9"),
    ("remind me to call mum", None),
    ("remind me that I may need sunscreen", None),  # "may" alone is no date
])
def test_the_words_of_a_message_that_name_a_time(message, phrase):
    """What the runtime hands the model for ``schedule``'s ``at``: the person's own words
    for the time, the longest run that reads as one."""
    assert time_phrase(message, FRIDAY, LISBON) == phrase


def test_durations():
    assert parse_duration("1h30m") == parse_duration("90 minutes") == timedelta(minutes=90)
    assert parse_duration("2 days") == timedelta(days=2)
    assert parse_duration("half an hour") == timedelta(minutes=30)
    with pytest.raises(ClawdError):
        parse_duration("soon")


def test_cron_at_nine_lisbon_stays_at_nine_across_both_dst_changes():
    daily = sched.cron("0 9 * * *", "Europe/Lisbon")
    for start in (datetime(2026, 3, 26, tzinfo=UTC), datetime(2026, 10, 22, tzinfo=UTC)):
        runs = sched.occurrences(daily, start, start + timedelta(days=6))
        assert [r.astimezone(LISBON).strftime("%H:%M") for r in runs] == ["09:00"] * 6
        assert len({r.astimezone(UTC).hour for r in runs}) == 2  # 08:00 and 09:00 UTC


def test_an_injected_clock_walks_a_daily_job_across_the_march_change():
    daily = sched.cron("0 9 * * *", "Europe/Lisbon")
    now = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    next_run = sched.first(daily, now)
    seen = []
    for _ in range(96):  # four days, an hour at a time
        now += timedelta(hours=1)
        assert next_run is not None
        decided = sched.plan(daily, next_run, now, "once")
        if decided.run is not None:
            seen.append(decided.run)
            assert not decided.late and decided.missed == []
        next_run = decided.next_run or next_run
    assert [iso_utc(s) for s in seen] == ["2026-03-28T09:00:00Z", "2026-03-29T08:00:00Z",
                                          "2026-03-30T08:00:00Z", "2026-03-31T08:00:00Z"]


def test_cron_reads_a_zone_of_its_own_not_the_hosts(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    daily = sched.cron("30 18 * * *", "Asia/Tokyo")
    (run,) = sched.occurrences(daily, FRIDAY, FRIDAY + timedelta(days=1))
    assert iso_utc(run) == "2026-11-28T09:30:00Z"


def test_every_counts_whole_spans_from_its_anchor():
    job = sched.every("20m", FRIDAY)
    assert sched.next_after(job, FRIDAY) == FRIDAY + timedelta(minutes=20)
    assert sched.next_after(job, FRIDAY + timedelta(minutes=41)) == FRIDAY + timedelta(hours=1)
    with pytest.raises(ClawdError):
        sched.every("30s", FRIDAY)


def test_bad_cron_and_zone_are_refused():
    with pytest.raises(ClawdError, match="cron"):
        sched.cron("0 25 * * *", "UTC")
    with pytest.raises(ClawdError, match="time zone"):
        sched.cron("0 9 * * *", "Mars/Olympus")


def test_missed_once_runs_one_catch_up_and_skip_runs_none():
    hourly = sched.every("1h", FRIDAY - timedelta(hours=1))  # anchor: FRIDAY
    now = FRIDAY + timedelta(hours=5, minutes=30)  # six occurrences due, the last 30 min late
    once = sched.plan(hourly, FRIDAY, now, "once")
    assert once.run == FRIDAY + timedelta(hours=5) and once.late
    assert once.missed_count == 5 and len(once.missed) == 5
    skip = sched.plan(hourly, FRIDAY, now, "skip")
    assert skip.run is None and skip.missed_count == 6
    assert once.next_run == skip.next_run == FRIDAY + timedelta(hours=6)


def test_an_occurrence_found_within_the_grace_is_on_time_for_either_policy():
    hourly = sched.every("1h", FRIDAY - timedelta(hours=1))
    for policy in ("once", "skip"):
        decided = sched.plan(hourly, FRIDAY, FRIDAY + timedelta(minutes=1), policy)
        assert decided.run == FRIDAY and not decided.late and decided.missed_count == 0


def test_a_minutely_job_down_for_a_year_is_planned_at_once():
    minutely = sched.every("1m", FRIDAY - timedelta(minutes=1))
    decided = sched.plan(minutely, FRIDAY, FRIDAY + timedelta(days=365), "skip")
    # the latest is on time (a minute's job always has one): it runs, the rest were missed
    assert decided.run == FRIDAY + timedelta(days=365) and not decided.late
    assert decided.missed_count == 365 * 24 * 60 and len(decided.missed) == sched.MISSED_KEPT


def test_a_one_off_is_done_after_its_run():
    once = sched.at(FRIDAY)
    decided = sched.plan(once, FRIDAY, FRIDAY + timedelta(seconds=3), "once")
    assert decided.run == FRIDAY and decided.next_run is None


def test_zones_default_to_the_hosts(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Lisbon")
    assert host_zone_name() == "Europe/Lisbon"
    assert user_zone(None).key == "Europe/Lisbon"
    assert user_zone("Asia/Tokyo").key == "Asia/Tokyo"
    assert both(FRIDAY, zone("Asia/Tokyo")) == ("Fri 2026-11-27 19:00 Asia/Tokyo (10:00 UTC)")
