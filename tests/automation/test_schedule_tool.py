"""The ``schedule`` tool: "remind me in 20 minutes" becomes a job whose time the runtime
worked out, in the user's zone; offered in private sessions only; the reminder aside asks
for it instead of saying reminders are impossible."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from clawd.automation.zones import parse_iso
from clawd.core.paths import state_dir
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.storage.files.jobs import FileJobs
from clawd.tools.exec import exec_tool
from clawd.tools.files import file_tools
from clawd.tools.schedule import schedule_tool

from conftest import Clock, make_runtime


def runtime_with_schedule(tmp_path, replies, clock, zone="Europe/Lisbon"):
    store = FileJobs(state_dir())
    provider = ScriptedProvider(replies)
    tools = file_tools() + [exec_tool(), schedule_tool(lambda: store, "web")]
    runtime = make_runtime(tmp_path, provider, clock=clock, tools=tools,
                           settings={"userTimezone": zone})
    return runtime, provider, store


def test_remind_me_in_twenty_minutes_becomes_a_job_twenty_minutes_on(tmp_path):
    clock = Clock(datetime(2026, 11, 27, 10, 0, tzinfo=timezone.utc))
    runtime, provider, store = runtime_with_schedule(tmp_path, [
        Reply("", [tool("schedule", action="add", at="in 20 minutes", message="stretch")]),
        "Done: I'll remind you at 10:20."], clock)
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("remind me in 20 minutes to stretch"))
    session.close()
    (job,) = store.all()
    assert parse_iso(job["nextRun"]) == clock.now + timedelta(minutes=20)
    assert job["deliver"] == "web" and job["madeBy"] == "model"
    assert job["origin"] == "agent:main:main"
    assert "schedule" not in job["tools"] and "read" in job["tools"]
    first = provider.requests[0]
    said = first.messages[-1].text
    assert "schedule" in said and "can't remind" not in said  # the aside asks for the tool
    result = provider.requests[1].messages[-1].text
    assert "10:20 Europe/Lisbon (10:20 UTC)" in result


def test_the_aside_names_the_persons_words_for_the_time(tmp_path):
    """A small model copied the aside's example ("in 20 minutes") for "on Friday at 6pm":
    the aside names the words of the message that give the time instead."""
    clock = Clock(datetime(2026, 11, 27, 10, 0, tzinfo=timezone.utc))
    runtime, provider, _ = runtime_with_schedule(tmp_path, ["ok"], clock)
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("Can you remind me on Friday at 6pm to water the plants?"))
    said = provider.requests[0].messages[-1].text
    assert '\'at\' "Friday at 6pm"' in said and "in 20 minutes" not in said


def test_tomorrow_at_nine_is_read_in_the_users_zone(tmp_path):
    clock = Clock(datetime(2026, 11, 27, 20, 0, tzinfo=timezone.utc))
    runtime, _, store = runtime_with_schedule(tmp_path, [
        Reply("", [tool("schedule", action="add", at="tomorrow at 9", message="call")]),
        "set"], clock, zone="Asia/Tokyo")  # 05:00 on the 28th in Tokyo
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("remind me tomorrow at 9 to call the landlord"))
    session.close()
    (job,) = store.all()
    assert job["nextRun"] == "2026-11-29T00:00:00Z"  # 09:00 on the 29th, Tokyo


def test_list_and_remove(tmp_path):
    clock = Clock()
    runtime, provider, store = runtime_with_schedule(tmp_path, [
        Reply("", [tool("schedule", action="add", every="1h", message="water")]), "ok",
        Reply("", [tool("schedule", action="list")]), "listed"], clock)
    session = Session.open(runtime, "agent:main:main")
    list(session.run_turn("every hour remind me to drink water"))
    (job,) = store.all()
    list(session.run_turn("what reminders do I have?"))
    assert job["id"] in provider.requests[-1].messages[-1].text
    session.close()


def test_a_group_session_is_not_offered_the_tool(tmp_path):
    runtime, provider, _ = runtime_with_schedule(tmp_path, ["no"], Clock())
    session = Session.open(runtime, "agent:main:telegram:group:42")
    list(session.run_turn("remind me in 20 minutes to stretch"))
    session.close()
    assert "schedule" not in [t.name for t in provider.requests[0].tools]
    assert "can't remind" in provider.requests[0].messages[-1].text


# --- a reminder the model did not set (``reminder_set``, weak profile) --------------------------

def weak(runtime, provider, profile="weak"):
    from clawd.loop.runtime import fixed_models

    runtime.models = fixed_models(provider, 200_000, profile=profile)
    return Session.open(runtime, "agent:main:main")


def notices_of(events):
    from clawd.core.events import Notice

    return [e.text for e in events if isinstance(e, Notice)]


def test_a_reminder_the_model_only_promised_is_set_from_the_persons_words(tmp_path):
    """A 1.5B model answered "I will remind you tomorrow at 9 to call the landlord." and
    called nothing: no job existed."""
    clock = Clock(datetime(2026, 11, 27, 20, 0, tzinfo=timezone.utc))
    runtime, provider, store = runtime_with_schedule(
        tmp_path, ["I will remind you tomorrow at 9 to call the landlord."], clock)
    with weak(runtime, provider) as session:
        events = list(session.run_turn("Remind me tomorrow at 9 to call the landlord."))
    (job,) = store.all()
    assert job["message"] == "call the landlord" and job["madeBy"] == "model"
    assert job["nextRun"] == "2026-11-28T09:00:00Z"  # 09:00 in Lisbon, UTC in winter
    assert notices_of(events)[-1] == (
        f"the model did not set the reminder, so clawd did: scheduled job {job['id']}: "
        "Sat 2026-11-28 09:00 Europe/Lisbon (09:00 UTC) (call the landlord)")


def test_a_reminder_the_model_set_is_not_set_twice_and_a_strong_model_is_left_alone(tmp_path):
    clock = Clock(datetime(2026, 11, 27, 20, 0, tzinfo=timezone.utc))
    runtime, provider, store = runtime_with_schedule(tmp_path, [
        Reply("", [tool("schedule", action="add", at="tomorrow at 9", message="call")]),
        "Set for 9:00."], clock)
    with weak(runtime, provider) as session:
        list(session.run_turn("Remind me tomorrow at 9 to call the landlord."))
    assert len(store.all()) == 1
    runtime, provider, store = runtime_with_schedule(tmp_path / "strong", ["At 9am or 9pm?"],
                                                     clock)
    with weak(runtime, provider, "strong") as session:  # its question stands
        events = list(session.run_turn("Remind me tomorrow at 9 to call the landlord."))
    assert len(store.all()) == 1 and not notices_of(events)


def test_a_reminder_whose_time_clawd_cannot_read_whole_is_said_not_set(tmp_path):
    """"on Monday at 10" on a Monday evening reads as "at 10" today at best: clawd does not
    guess, it says no reminder was set."""
    clock = Clock(datetime(2026, 11, 30, 20, 0, tzinfo=timezone.utc))  # a Monday
    runtime, provider, store = runtime_with_schedule(tmp_path, ["Sure, I will."], clock)
    with weak(runtime, provider) as session:
        events = list(session.run_turn("Don't let me forget to pay rent on Monday at 10."))
    assert store.all() == []
    assert notices_of(events)[-1].startswith("no reminder was set: the model did not set one")


def test_the_words_for_the_time_and_for_what():
    from clawd.context.requests import reminder_request

    now = datetime(2026, 3, 2, 20, 0, tzinfo=timezone.utc)
    assert reminder_request("Can you remind me on Friday at 6pm to water the plants?", now,
                            None) == ("Friday at 6pm", "water the plants")
    assert reminder_request("Please remind me in 20 minutes that the oven is on.", now,
                            None) == ("in 20 minutes", "the oven is on")
    assert reminder_request("Set a reminder for 5pm: take the pills", now, None) == \
        ("5pm", "take the pills")
    assert reminder_request("Remind me at 7 tomorrow morning to take my pills", now,
                            None) is None  # "morning" left over: not all of when was read
    assert reminder_request("Remind me to call mum", now, None) is None  # no time


def test_a_reminder_set_and_answered_with_nothing_says_its_time(tmp_path):
    clock = Clock(datetime(2026, 11, 27, 20, 0, tzinfo=timezone.utc))
    runtime, provider, store = runtime_with_schedule(tmp_path, [
        Reply("", [tool("schedule", action="add", at="tomorrow at 9", message="call")]),
        "", ""], clock)
    with weak(runtime, provider) as session:
        events = list(session.run_turn("Remind me tomorrow at 9 to call the landlord."))
    (job,) = store.all()
    assert notices_of(events)[-1] == (f"what this turn did: scheduled job {job['id']}: "
                                      "Sat 2026-11-28 09:00 Europe/Lisbon (09:00 UTC)")
