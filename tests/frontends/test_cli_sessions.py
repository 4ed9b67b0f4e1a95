"""``clawd sessions list | show | export | delete | rebuild`` and ``clawd chat --resume``,
through the CLI against a local OpenAI-compatible server."""

from __future__ import annotations

import gc
import json
import re

import pytest

from clawd.frontends import cli

from conftest import write_local_config
from fakeserver import FakeServer, openai_stream

pytestmark = pytest.mark.slow  # the command line end to end, against a local server

OPENAI_PATH = "/v1/chat/completions"


@pytest.fixture
def server():
    with FakeServer() as s:
        s.default("POST", OPENAI_PATH, lambda r: openai_stream(
            "answer to " + r.json()["messages"][-1]["content"][-10:]))
        yield s


@pytest.fixture
def sessions_dir(isolated_home, server):
    write_local_config(isolated_home, server.url, model="qwen-test", retries=1)
    return isolated_home / ".clawd" / "agents" / "main" / "sessions"


def run(args, capsys):
    code = cli.main(args)
    gc.collect()  # a finished command's Session lets go of its session, as at process exit
    out, err = capsys.readouterr()
    return code, out, err


def _chat(capsys, *args):
    code, out, err = run(["chat", *args], capsys)
    assert code == 0, err
    return out


def test_list_show_export(sessions_dir, capsys):
    _chat(capsys, "-m", "plan the kyoto trip in october")
    _chat(capsys, "-m", "what about hotels?")
    _chat(capsys, "--session", "work", "-m", "the quarterly report is due friday")
    code, out, _ = run(["sessions", "list"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3  # header and two sessions, newest first
    assert "work" in lines[1] and "the quarterly report is due friday" in lines[1]
    assert "main" in lines[2] and "plan the kyoto trip in october" in lines[2]
    assert " 4  " in lines[2] and "local/qwen-test" in lines[2]  # two turns: 4 messages
    listed = json.loads(run(["sessions", "list", "--json"], capsys)[1])
    main = next(s for s in listed if s["key"] == "agent:main:main")
    assert main["messages"] == 4 and main["title"] == "plan the kyoto trip in october"
    assert main["current"] and main["lastActivity"]
    stamps = [s[k] for s in listed for k in ("createdAt", "lastActivity")]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in stamps), stamps

    code, out, _ = run(["sessions", "show", "main", "-n", "2"], capsys)
    assert code == 0 and main["sessionId"] in out and "Messages:   4" in out
    assert "you: what about hotels?" in out and "assistant: answer to ut hotels?" in out
    assert "plan the kyoto" not in out.split("Last 2 messages:")[1]
    by_id = run(["sessions", "show", main["sessionId"][:6]], capsys)[1]  # a prefix
    assert by_id.splitlines()[0] == out.splitlines()[0]

    code, md, _ = run(["sessions", "export", "main"], capsys)
    assert md.startswith("# plan the kyoto trip in october\n")
    # one time format wherever a time is shown: local, to the minute
    minute = r"\d{4}-\d\d-\d\d \d\d:\d\d"
    assert re.search(rf"- started: {minute} · last activity: {minute}\n", md), md
    assert re.search(rf"## You · {minute}\n", md)
    assert "## You ·" in md and "what about hotels?" in md and "## Assistant ·" in md
    target = sessions_dir.parent / "trip.md"
    assert run(["sessions", "export", "main", "-o", str(target)], capsys)[0] == 0
    assert target.read_text() == md


def test_show_and_export_mark_the_turns_taken_back(sessions_dir, capsys):
    script = sessions_dir.parent.parent.parent / "undo.txt"
    script.write_text("first question\n/undo\nsecond question\n/retry\n")
    _chat(capsys, "--script", str(script))
    code, out, _ = run(["sessions", "show", "main", "-n", "6"], capsys)
    assert "you (taken back with /undo): first question" in out
    assert "assistant (taken back with /undo): answer to t question" in out
    assert "you (taken back with /retry): second question" in out
    assert out.rstrip().endswith("assistant: answer to d question")  # the retried turn
    md = run(["sessions", "export", "main"], capsys)[1]
    assert md.count("(taken back with /undo)") == 2 and md.count("(taken back with /retry)") == 2


def test_new_leaves_an_ended_session_that_resume_brings_back(sessions_dir, capsys):
    _chat(capsys, "-m", "first topic")
    first = json.loads(run(["sessions", "list", "--json"], capsys)[1])[0]["sessionId"]
    code, _, err = run(["chat", "-m", "/new"], capsys)
    assert code == 0, err
    _chat(capsys, "-m", "second topic")
    assert len(json.loads(run(["sessions", "list", "--json"], capsys)[1])) == 1
    everything = json.loads(run(["sessions", "list", "--all", "--json"], capsys)[1])
    assert {s["sessionId"]: s["current"] for s in everything}[first] is False
    assert "(ended)" in run(["sessions", "list", "--all"], capsys)[1]

    _chat(capsys, "--resume", first[:8], "-m", "back to the first")
    store = json.loads((sessions_dir / "sessions.json").read_text())
    assert store["agent:main:main"]["sessionId"] == first
    lines = (sessions_dir / f"{first}.jsonl").read_text().splitlines()
    assert "back to the first" in lines[-2]
    code, _, err = run(["chat", "--resume", "nope", "-m", "x"], capsys)
    assert code == 1 and "no session 'nope'" in err and "\n" not in err.strip()
    code, _, err = run(["chat", "--resume", first, "--session", "work", "-m", "x"], capsys)
    assert code == 1 and "belongs to agent:main:main" in err


def test_delete_keeps_the_transcript_aside_unless_purged(sessions_dir, capsys):
    _chat(capsys, "-m", "keep me")
    _chat(capsys, "--session", "scratch", "-m", "throw me away")
    listed = {s["key"]: s["sessionId"] for s in json.loads(
        run(["sessions", "list", "--json"], capsys)[1])}
    code, out, _ = run(["sessions", "delete", "main"], capsys)
    assert code == 0 and "deleted/" in out
    kept = sessions_dir / "deleted" / f"{listed['agent:main:main']}.jsonl"
    assert kept.exists() and "keep me" in kept.read_text()
    code, out, _ = run(["sessions", "delete", listed["agent:main:scratch"], "--purge"], capsys)
    assert code == 0
    assert not list(sessions_dir.rglob(f"{listed['agent:main:scratch']}*.jsonl"))
    assert json.loads(run(["sessions", "list", "--all", "--json"], capsys)[1]) == []
    # a rebuild does not bring a deleted session back
    (sessions_dir / "sessions.json").unlink()
    assert run(["sessions", "list"], capsys)[1].startswith("no sessions yet")


def test_a_store_deleted_under_the_user_is_rebuilt(sessions_dir, capsys):
    _chat(capsys, "-m", "remember the lighthouse")
    _chat(capsys, "--session", "work", "-m", "and the budget")
    before = json.loads((sessions_dir / "sessions.json").read_text())
    (sessions_dir / "sessions.json").unlink()
    code, out, _ = run(["sessions", "list"], capsys)
    assert "remember the lighthouse" in out and "and the budget" in out
    _chat(capsys, "-m", "where were we?")  # continues the same session, not a new one
    after = json.loads((sessions_dir / "sessions.json").read_text())
    assert after["agent:main:main"]["sessionId"] == before["agent:main:main"]["sessionId"]
    code, out, _ = run(["sessions", "rebuild"], capsys)
    assert code == 0 and "2 entries recounted" in out


def test_a_rebuild_of_one_session_says_entry(sessions_dir, capsys, caplog):
    _chat(capsys, "-m", "remember the lighthouse")
    (sessions_dir / "sessions.json").unlink()
    code, out, _ = run(["sessions", "rebuild"], capsys)
    assert code == 0 and ": 1 entry recounted from their transcripts, 0 added" in out
    assert "rebuilt 1 entry from the transcripts" in caplog.text


def test_show_of_an_unknown_session_is_one_line(sessions_dir, capsys):
    code, _, err = run(["sessions", "show", "nothing-here"], capsys)
    assert code == 1 and err.count("\n") == 1 and "no session" in err


@pytest.mark.parametrize("where, says", [
    ("no/such/dir/out.md", "the folder no/such/dir does not exist"),
    (".", "it is a folder"),
    ("/proc/version", "cannot write the export to /proc/version: "),
])
def test_export_to_a_place_that_cannot_be_written_is_one_line(sessions_dir, capsys,
                                                              monkeypatch, tmp_path, where,
                                                              says):
    _chat(capsys, "-m", "plan the kyoto trip")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["sessions", "export", "main", "-o", where], capsys)
    assert code == 1 and out == ""
    assert err.startswith("clawd: cannot write the export to ") and says in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
