"""``clawd jobs``: add answers in local time and UTC, the ``--json`` shapes of docs/automation.md,
pause, resume, remove, and one-line errors."""

from __future__ import annotations

import json

import pytest

from clawd.frontends import cli

JOB_KEYS = ["id", "name", "schedule", "nextRun", "session", "deliver", "enabled"]


@pytest.fixture
def configured(isolated_home, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps({"agents": {"defaults": {
        "workspace": str(isolated_home / "ws"), "userTimezone": "Europe/Lisbon",
        "memorySearch": {"enabled": False}}}}))
    return state


def run(capsys, *args):
    code = cli.main(["jobs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_repeats_the_time_locally_and_in_utc(configured, capsys):
    code, out, _ = run(capsys, "add", "--at", "2031-07-01 09:00", "--message", "call")
    assert code == 0
    assert "Tue 2031-07-01 09:00 Europe/Lisbon (08:00 UTC)" in out  # summer time


def test_the_json_shapes(configured, capsys):
    code, out, _ = run(capsys, "add", "--cron", "0 9 * * 1-5", "--tz", "Asia/Tokyo",
                       "--message", "plan the day", "--name", "plan", "--deliver", "web",
                       "--json")
    job = json.loads(out)
    assert code == 0 and list(job) == JOB_KEYS
    assert job["schedule"] == {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Asia/Tokyo"}
    assert job["nextRun"].endswith("T00:00:00Z")  # 09:00 Tokyo
    assert (job["session"], job["deliver"], job["enabled"]) == ("isolated", "web", True)
    _, out, _ = run(capsys, "list", "--json")
    assert [j["id"] for j in json.loads(out)] == [job["id"]]
    _, out, _ = run(capsys, "runs", "plan", "--json")
    assert json.loads(out) == []
    assert run(capsys, "pause", "plan")[0] == 0
    _, out, _ = run(capsys, "show", job["id"][:4], "--json")
    assert json.loads(out)["enabled"] is False
    code, out, _ = run(capsys, "resume", "plan")
    assert code == 0 and "next" in out
    assert run(capsys, "remove", "plan")[0] == 0
    _, out, _ = run(capsys, "list", "--json")
    assert json.loads(out) == []


@pytest.mark.parametrize(("args", "says"), [
    (["add", "--at", "whenever", "--message", "x"], "cannot read the time"),
    (["add", "--at", "in 5 minutes", "--tz", "UTC", "--message", "x"], "--tz goes with"),
    (["add", "--every", "10s", "--message", "x"], "at least one minute"),
    (["add", "--cron", "61 * * * *", "--message", "x"], "not a cron expression"),
    (["add", "--at", "in 5 minutes", "--message", "x", "--deliver", "pigeon"], "--deliver"),
    (["show", "nope"], "no job nope"),
])
def test_errors_are_one_line(configured, capsys, args, says):
    code, _, err = run(capsys, *args)
    assert code == 1 and err.count("\n") == 1 and says in err
