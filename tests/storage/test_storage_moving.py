"""``clawd storage migrate | export | status`` on a real PostgreSQL: a files home moves in,
verified and untouched, the conversation goes on in the database, and the export gives back
what went in plus the new turns, byte for byte."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clawd.config import AgentDefaults, Config
from clawd.frontends.cli import main
from clawd.loop.runtime import Runtime, fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.storage.files.jobs import FileJobs
from clawd.storage.files.storage import FileStorage
from clawd.storage.postgres import database
from clawd.storage.postgres.database import MIGRATIONS
from clawd.storage.postgres.jobs import PgJobs
from clawd.tools.files import file_tools

KEY = "agent:main:main"


def _runtime(workspace: Path, storage, provider: ScriptedProvider) -> Runtime:
    return Runtime(config=Config(), agent_id="main",
                   settings=AgentDefaults(workspace=str(workspace)), workspace=workspace,
                   storage=storage, models=fixed_models(provider, 200_000, profile="strong"),
                   tools=file_tools())


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _files_home(home: Path) -> tuple[Path, Path]:
    """A files home as a user leaves it: two sessions (one ended by a fresh start), a note
    written by a tool, a kept version of MEMORY.md, a deleted session, a torn line."""
    workspace, sessions = home / "clawd", home / ".clawd" / "agents" / "main" / "sessions"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Memory\n\n- Ines is my sister.\n")
    storage = FileStorage("main", workspace, sessions)
    provider = ScriptedProvider([
        Reply("Noted.", [tool("write", path="memory/2026-11-20.md",
                              content="- The NAS is called tern.\n", append=True)]),
        "Saved.", "Hello again.", "Throwaway."])
    rt = _runtime(workspace, storage, provider)
    first = Session.open(rt, KEY)
    list(first.run_turn("Remember: the NAS is called tern."))
    first.close()
    second = Session.open(rt, KEY, fresh=True)  # the first session ends, kept on disk
    list(second.run_turn("hello"))
    second.close()
    scratch = Session.open(rt, "agent:main:scratch")
    list(scratch.run_turn("scratch this"))
    scratch.close()
    from clawd.storage.session_admin import delete, resolve
    delete(storage, resolve(storage, "main", "scratch"), purge=False)
    storage.backups.keep("MEMORY.md", datetime(2026, 11, 20, 9, 0, 0))
    with open(sessions / f"{storage.sessions.get(KEY)['sessionId']}.jsonl", "ab") as handle:
        handle.write(b'{"type":"message","role":"us')  # a crash cut this write
    _jobs_and_runs(home / ".clawd")
    return workspace, sessions


def _jobs_and_runs(state: Path) -> list[dict]:
    """Two jobs of two agents; the hourly one's runs: ok and delivered, an error, missed
    ones, and one whose delivery failed and waits for a retry (a line per change of each,
    as the store leaves them)."""
    from clawd.automation import runs as runlog
    from clawd.automation import schedule as sched
    from clawd.automation.jobs import new_job
    from clawd.storage.files.jobs import FileJobs

    start = datetime(2026, 11, 27, 10, 0, tzinfo=timezone.utc)
    store = FileJobs(state)
    store.add(new_job("main", sched.every("1h", start), "stretch ☕", start, name="stretch",
                      deliver="web"))
    store.add(new_job("work", sched.at(start + timedelta(days=3)), "call Ines", start,
                      deliver="webhook:https://example.org/hook"))
    for hours, reply, error in ((1, "Stretched.", None), (4, "", "the model is away")):
        at = start + timedelta(hours=hours, seconds=5)
        (claimed,) = store.claim_due(at)
        done = runlog.finished(claimed.run, "error" if error else "ok", at, reply=reply or None,
                               error=error)
        store.save_run(done)
    for claimed in store.claim_deliveries(start + timedelta(hours=5)):
        store.save_run(runlog.sent(claimed.run, start + timedelta(hours=5), "web:1", None))
    (claimed,) = store.claim_due(start + timedelta(hours=6))
    store.save_run(runlog.sent(runlog.finished(claimed.run, "ok", start + timedelta(hours=6),
                                               reply="Done."), start + timedelta(hours=6),
                               None, "the page was away"))
    return store.all()


def test_migrate_then_chat_then_export_gives_back_everything(isolated_home, pg_url, capsys,
                                                             monkeypatch):
    workspace, sessions = _files_home(isolated_home)
    before = _tree(isolated_home)
    state = isolated_home / ".clawd"
    assert main(["storage", "migrate", "--to", pg_url, "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert "dry run: nothing written" in said and "jobs: 2 jobs (6 runs)" in said, said
    assert database(pg_url).counts()["lines"] == 0
    assert PgJobs(database(pg_url)).all() == []

    assert main(["storage", "migrate", "--to", pg_url]) == 0
    said = capsys.readouterr().out
    assert "agent main: 1 session, 3 transcripts" in said and "verified by SHA-256" in said, said
    assert "jobs: 2 jobs (6 runs)" in said and "problem" not in said, said
    assert _tree(isolated_home) == before  # the files are left as they were
    assert main(["storage", "migrate", "--to", pg_url]) == 0  # a second run changes nothing
    said = capsys.readouterr().out
    assert "0 sessions, 0 transcripts" in said
    assert "jobs: 0 jobs (0 runs); 8 already there" in said and "problem" not in said, said
    hosted = PgJobs(database(pg_url))
    assert hosted.all() == FileJobs(state).all()  # in the order they were added
    for job in hosted.all():
        assert hosted.history(job["id"]) == FileJobs(state).history(job["id"])

    # the conversation goes on in the database, where the history it sees came from
    storage = database(pg_url).agent("main")
    provider = ScriptedProvider(["It is called tern."])
    session = Session.open(_runtime(workspace, storage, provider), KEY)
    list(session.run_turn("What is the NAS called?"))
    session.close()
    sent = [m.text for m in provider.requests[0].messages if m.role == "user"]
    assert sent[-2:] == ["hello", "What is the NAS called?"]
    assert _tree(isolated_home) == before  # nothing written to the files

    monkeypatch.setenv("CLAWD_STORAGE_URL", pg_url)
    out = isolated_home / "exported"
    assert main(["storage", "export", "--to", str(out)]) == 0
    back = out / "agents" / "main" / "sessions"
    for path in sessions.rglob("*.jsonl"):
        original = path.read_bytes()
        exported = (back / path.relative_to(sessions)).read_bytes()
        assert exported.startswith(original)  # byte for byte, torn line too
    current = storage.sessions.get(KEY)["sessionId"]
    tail = (back / f"{current}.jsonl").read_bytes().split(b'"role":"us\n', 1)[1]
    assert [json.loads(line)["content"][0]["text"] for line in tail.splitlines()] == [
        "What is the NAS called?", "It is called tern."]
    notes = out / "workspaces" / "main"
    for rel in ("MEMORY.md", "memory/2026-11-20.md"):
        assert (notes / rel).read_bytes() == (workspace / rel).read_bytes()
    assert [p.name for p in (notes / ".clawd" / "history" / "MEMORY.md").iterdir()] == [
        "20261120-090000.md"]
    stored = json.loads((back / "sessions.json").read_text())
    assert set(stored) == {KEY} and stored[KEY]["sessionFile"] == str(back / f"{current}.jsonl")
    assert list((back / "deleted").glob("*.jsonl"))  # the deleted session stays apart
    # the jobs come back byte for byte, every run as its last line had it, a line each
    assert (out / "jobs.json").read_bytes() == (state / "jobs.json").read_bytes()
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        p.name for p in (state / "runs").iterdir())
    for path in (state / "runs").iterdir():
        runs = FileJobs(state).history(path.stem)
        assert FileJobs(out).history(path.stem) == runs
        assert (out / "runs" / path.name).read_text() == "".join(
            json.dumps(run, ensure_ascii=False, sort_keys=True) + "\n" for run in runs)


def test_export_gives_back_the_workspace_s_modes_and_clawd_s_gitignore(isolated_home, pg_url,
                                                                      capsys, monkeypatch):
    import stat

    workspace, _ = _files_home(isolated_home)
    (workspace / "bin").mkdir()
    (workspace / "bin" / "backup.sh").write_text("#!/bin/sh\necho saved\n")
    (workspace / "bin" / "backup.sh").chmod(0o755)
    (workspace / "private.md").write_text("mine alone\n")
    (workspace / "private.md").chmod(0o600)
    assert (workspace / ".clawd" / ".gitignore").is_file()  # kept versions made it
    assert main(["storage", "migrate", "--to", pg_url]) == 0
    monkeypatch.setenv("CLAWD_STORAGE_URL", pg_url)
    out = isolated_home / "exported"
    assert main(["storage", "export", "--to", str(out)]) == 0
    capsys.readouterr()
    notes = out / "workspaces" / "main"

    def modes(root: Path) -> dict[str, int]:
        return {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode)
                for p in sorted(root.rglob("*")) if p.is_file()}

    assert _tree(notes) == _tree(workspace)  # .clawd/.gitignore included
    assert modes(notes) == modes(workspace)
    assert modes(notes)["bin/backup.sh"] == 0o755 and modes(notes)["private.md"] == 0o600


def test_a_dry_run_into_an_empty_database_creates_nothing_there(isolated_home, capsys):
    import uuid

    import psycopg

    from conftest import _with_database, drop_database, pg_base_url

    _files_home(isolated_home)
    name = f"clawd_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # empty: not a copy of the migrated template
    url = _with_database(pg_base_url(), name)
    try:
        assert main(["storage", "migrate", "--to", url, "--dry-run"]) == 0
        said = capsys.readouterr().out
        assert f"no schema yet: a run creates version {len(MIGRATIONS)}" in said
        assert "vector not created yet" in said
        assert "agent main: 1 session, 3 transcripts" in said and "problem" not in said
        assert "jobs: 2 jobs (6 runs)" in said and "dry run: nothing written" in said
        with psycopg.connect(url) as conn:
            tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = "
                                  "'public'").fetchone()[0]
            extensions = conn.execute("SELECT extname FROM pg_extension").fetchall()
        assert tables == 0 and extensions == [("plpgsql",)]
    finally:
        drop_database(url)


def test_status_names_the_store_schema_and_extension(pg_url, capsys, monkeypatch):
    assert main(["storage", "status"]) == 0
    assert "store: files under" in capsys.readouterr().out
    monkeypatch.setenv("CLAWD_STORAGE_URL", pg_url)
    assert main(["storage", "status"]) == 0
    said = capsys.readouterr().out
    assert "store: PostgreSQL" in said and f"schema: version {len(MIGRATIONS)}" in said
    assert "chunks: 0" in said
    assert "vector extension 0." in said and "transcripts: 0" in said


def test_an_unreachable_database_is_one_line(capsys):
    url = "postgresql://nobody@127.0.0.1:1/none"
    assert main(["storage", "migrate", "--to", url]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("clawd: cannot reach the database postgresql://nobody@127.0.0.1:1")
    assert len(err.splitlines()) == 1


WITHOUT_DRIVER = ("import sys; sys.modules['psycopg'] = None\n"
                  "from clawd.frontends.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("command", [["storage", "status"], ["sessions", "list"],
                                     ["chat", "-m", "hi"], ["users", "list"]])
def test_without_the_postgres_extra_a_command_says_what_to_install(isolated_home, command):
    """``storage.url`` set on a clawd installed without ``[postgres]``: one line, not a
    traceback (the driver's import is made to fail, as a missing package fails)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CLAWD_STORAGE_URL": "postgresql://nobody@127.0.0.1:1/none",
           "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", WITHOUT_DRIVER, *command], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "clawd: storage.url names a PostgreSQL database, but its driver is not installed "
        "(psycopg); pip install 'clawd[postgres]'"]


def test_the_doctor_checks_the_database(pg_url, capsys, monkeypatch):
    from clawd.frontends.cli.admin import doctor_checks

    monkeypatch.setenv("CLAWD_STORAGE_URL", pg_url)
    checks = {what: (ok, text) for ok, what, text in doctor_checks(None)}
    assert checks["storage"][0]
    assert f"schema version {len(MIGRATIONS)}, vector 0." in checks["storage"][1]
    assert checks["workspace"] == (True, checks["workspace"][1])
    monkeypatch.setenv("CLAWD_STORAGE_URL", "postgresql://nobody@127.0.0.1:1/none")
    checks = {what: (ok, text) for ok, what, text in doctor_checks(None)}
    assert checks["storage"][0] is False and "cannot reach" in checks["storage"][1]


def test_workers_starting_together_on_a_new_database_all_start(pg_url):
    """The vector extension and the migrations are made once, by whichever starts first."""
    import threading

    from clawd.storage.postgres.database import Database

    opened, failed = [], []

    def start() -> None:
        try:
            opened.append(Database(pg_url))
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            failed.append(exc)

    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:  # as a new database has it
        conn.execute("DROP SCHEMA public CASCADE")  # every table, and the extension
        conn.execute("CREATE SCHEMA public")
    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failed == [] and len(opened) == 4
    assert {db.schema_version for db in opened} == {len(MIGRATIONS)}
    for db in opened:
        db.close()


def test_migrate_carries_the_embedding_cache(isolated_home, pg_url, capsys):
    from functools import partial

    from clawd.core.paths import state_dir
    from clawd.storage.files.memory import open_file_index
    from clawd.storage.postgres.memory import PgIndexStore

    from memory_fakes import FakeEmbedder, settings

    workspace, _ = _files_home(isolated_home)
    local = open_file_index("main", workspace, settings(sync={"watch": False}), state_dir(),
                            embedder=FakeEmbedder())
    local.sync()
    cached = local.status()["cacheEntries"]
    local.close()
    assert cached > 0
    assert main(["storage", "migrate", "--to", pg_url, "--dry-run"]) == 0
    assert f"{cached} cached vector" in capsys.readouterr().out
    assert database(pg_url).counts()["cached vectors"] == 0
    assert main(["storage", "migrate", "--to", pg_url]) == 0
    assert f"{cached} cached vector" in capsys.readouterr().out
    embedder = FakeEmbedder()
    hosted = open_file_index("main", workspace, settings(sync={"watch": False}),
                             isolated_home / "elsewhere", embedder=embedder,
                             open_store=partial(PgIndexStore, database(pg_url), "main"))
    hosted.sync()
    assert embedder.embedded == []  # every note's vector came with the move
    hosted.close()
    assert main(["storage", "migrate", "--to", pg_url]) == 0  # nothing new the second time
    assert "cached vector" not in capsys.readouterr().out


def test_jobs_move_once_by_agent_and_a_job_changed_in_the_database_is_kept(isolated_home,
                                                                          pg_url, capsys):
    """``--agent`` moves that agent's jobs only; a second migrate adds no run twice; a job
    the database ran on meanwhile is reported (exit 1) and neither it nor its runs change."""
    jobs = _jobs_and_runs(isolated_home / ".clawd")
    hourly, call = jobs
    assert main(["storage", "migrate", "--to", pg_url, "--agent", "work"]) == 0
    assert "jobs: 1 job (0 runs)" in capsys.readouterr().out
    hosted = PgJobs(database(pg_url))
    assert [job["id"] for job in hosted.all()] == [call["id"]]
    assert main(["storage", "migrate", "--to", pg_url]) == 0
    assert "jobs: 1 job (6 runs); 1 already there" in capsys.readouterr().out
    assert [job["id"] for job in hosted.all()] == [call["id"], hourly["id"]]
    assert len(hosted.history(hourly["id"])) == 6

    hosted.update(hourly["id"], lambda job: {**job, "enabled": False})
    assert main(["storage", "migrate", "--to", pg_url]) == 1
    said = capsys.readouterr().out
    assert f"problem: job {hourly['id']}: the database has another version" in said, said
    assert hosted.get(hourly["id"])["enabled"] is False
    assert len(hosted.history(hourly["id"])) == 6
