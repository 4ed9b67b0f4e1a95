"""Shared fixtures: an isolated HOME/CLAWD_HOME per test and a runtime over a scripted model."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from clawd.config import AgentDefaults, Config
from clawd.core.messages import iso_clock
from clawd.loop.runtime import Runtime, fixed_models
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.backups import DiskBackups
from clawd.storage.files.storage import FileStorage
from clawd.storage.files.workspace import DiskFiles
from clawd.tools.base import ToolContext
from clawd.tools.exec import exec_tool
from clawd.tools.files import file_tools


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAWD_HOME", str(home / ".clawd"))
    monkeypatch.delenv("CLAWD_CONFIG", raising=False)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    return home


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collection makes and drops millions of small objects (the rewritten test modules'
    syntax trees): the garbage collector runs less often meanwhile. Once the tests are
    collected, what is there (the imported modules, the test items) is frozen out of the
    collector's way, so a full collection, and every test's ``gc.collect()``, walks only
    what the tests made since, not a few hundred thousand long-lived objects."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, *thresholds[1:])
    try:
        return (yield)
    finally:
        gc.set_threshold(*thresholds)
        gc.freeze()


@pytest.fixture(autouse=True, scope="session")
def no_fsync():
    """``os.fsync`` only checks its file descriptor: no test can tell whether a write reached
    the disk (that takes a power cut), and the session store's fsync of every update cost
    several milliseconds each, thousands of times a run. The writes themselves, the
    temporary files and the renames into place are all as in use."""
    def check_only(fd):
        os.fstat(fd if isinstance(fd, int) else fd.fileno())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", check_only)
        yield


@pytest.fixture(autouse=True, scope="session")
def one_onnx_session_per_model():
    """The local embedding model's onnxruntime session is created once a run, not once a
    ``LocalEmbedder`` (about 0.35 s each, and dozens of tests open an index on it).

    ``LocalEmbedder._load`` still runs in full for every embedder (the SHA-256 checks, the
    tokenizers, the errors a bad file gives); only ``onnxruntime.InferenceSession`` hands
    back the session already made for the same file (path, size, mtime), threads and
    providers. A session is read-only at inference and safe to run from several threads.
    onnxruntime is imported at the first load, never here."""
    from clawd.memory import local

    sessions: dict[tuple, object] = {}
    real: dict[str, Callable] = {}
    real_load = local.LocalEmbedder._load

    def shared(model, options=None, providers=None, **kwargs):
        try:
            stat = Path(model).stat()
        except (OSError, TypeError):
            return real["session"](model, options, providers=providers, **kwargs)
        key = (str(model), stat.st_size, stat.st_mtime_ns,
               getattr(options, "intra_op_num_threads", None), tuple(providers or ()),
               tuple(sorted(kwargs)))
        if key not in sessions:
            sessions[key] = real["session"](model, options, providers=providers, **kwargs)
        return sessions[key]

    def load(self):
        if self._session is None and not real:
            import onnxruntime

            real["session"] = onnxruntime.InferenceSession
            patch.setattr(onnxruntime, "InferenceSession", shared)
        real_load(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local.LocalEmbedder, "_load", load)
        yield


class Clock:
    """A settable clock for tests."""

    def __init__(self, start: datetime | None = None):
        self.now = start or datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> None:
        from datetime import timedelta
        self.now += timedelta(**delta)


def make_runtime(tmp_path: Path, provider: ScriptedProvider, *, window: int = 200_000,
                 settings: dict | None = None, clock: Clock | None = None,
                 allow_exec: bool = False, cache: bool = False, tools=None) -> Runtime:
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    agent = AgentDefaults.model_validate({"workspace": str(workspace), **(settings or {})})
    clock = clock or Clock()
    storage = storage_for_tests(tmp_path, workspace, clock)
    return Runtime(config=Config(), agent_id="main", settings=agent, workspace=workspace,
                   storage=storage, models=fixed_models(provider, window, cache=cache),
                   tools=file_tools() + [exec_tool()] if tools is None else tools,
                   allow_exec=allow_exec, clock=clock)


def disk_tool_context(workspace: Path, settings: AgentDefaults, **more) -> ToolContext:
    """What a tool gets, over the folder ``workspace``."""
    return ToolContext(workspace, settings, files=DiskFiles(workspace),
                       backups=DiskBackups(workspace), **more)


def ctrl_c_as_in_a_terminal() -> None:
    """``preexec_fn`` of a child a test sends Ctrl-C (SIGINT) to: SIGINT as a terminal
    delivers it. A test run started in the background (``nohup``, ``cmd &`` in a script)
    ignores SIGINT, and the child would inherit that and never see the Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def local_server():
    """A stand-in OpenAI-compatible server (``FakeServer``) for ``local_config``."""
    from fakeserver import FakeServer

    with FakeServer() as server:
        yield server


def write_local_config(home: Path, url: str, *, model: str = "qwen", retries: int = 0) -> Path:
    """A config in ``home`` whose model is ``local/<model>`` on the server at ``url`` (32k
    window, memory search off); returns the workspace."""
    workspace = home / "ws"
    (workspace / "memory").mkdir(parents=True)
    state = home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": f"local/{model}",
                                "memorySearch": {"enabled": False}}},
        "models": {"providers": {"local": {
            "api": "openai-completions", "baseUrl": url + "/v1",
            "models": [{"id": model, "contextWindow": 32000}], "maxRetries": retries}}}}))
    return workspace


@pytest.fixture
def local_config(isolated_home, local_server):
    """A config in the isolated home whose model is ``local/qwen`` on ``local_server``
    (32k window, no retries, memory search off); returns the workspace."""
    return write_local_config(isolated_home, local_server.url)


# --- the web chat's browser tests (tests/webchat.py): one server and one browser a module ---

@pytest.fixture(scope="module")
def web_model():
    """The stand-in model behind ``web_served``: a ``StandIn`` (reset for each test by
    ``stand_in``) on a ``FakeServer``."""
    from fakeserver import FakeServer
    from webchat import StandIn

    model = StandIn()
    with FakeServer() as server:
        server.default("POST", "/v1/chat/completions", model)
        yield model, server.url


@pytest.fixture(scope="module", params=["one", "two"], ids=["one-process", "two-workers"])
def web_served(web_model, tmp_path_factory, request):
    """``clawd serve`` as a process over ``web_model``: one process on files, then two
    workers on a fresh database; it must stop without a traceback."""
    from webchat import serve

    storage_url = fresh_database() if request.param == "two" else None
    served = serve(tmp_path_factory.mktemp("web") / "home", web_model[1], storage_url)
    yield served
    errors = served.stop()
    if storage_url:
        drop_database(storage_url)
    assert "Traceback" not in errors, errors


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """The system's Chromium through Playwright (skipped, saying why, when it is missing)."""
    from webchat import CHROMIUM, launch

    if not CHROMIUM.exists():
        pytest.skip(f"the web chat's browser tests need Chromium at {CHROMIUM} "
                    f"(apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright, tmp_path_factory.mktemp("chromium"))
        yield browser
        browser.close()


@pytest.fixture
def stand_in(web_model):
    """The stand-in model, answering ``echo: ...`` at full speed until the test says else."""
    model = web_model[0]
    model.reset()
    yield model
    model.reset()


@pytest.fixture
def web(chromium, web_served):
    """Pages of the web chat (``WebChat``); a JavaScript error in any of them fails the test."""
    from webchat import WebChat

    chat = WebChat(chromium, web_served)
    yield chat
    assert chat.close() == []


# --- PostgreSQL: one server a test run (a worker), a fresh database a test ----------------------

_PG: dict[str, object] = {}  # the server of this process: "url", "server"
TEMPLATE = "clawd_test_template"


def pg_base_url() -> str:
    """The URL of a PostgreSQL server with pgvector: ``CLAWD_TEST_POSTGRES_URL``, else a
    ``pgserver`` (PostgreSQL 16 and pgvector from the test extra) started once in this
    process in a temporary folder and stopped when it exits. A template database with
    clawd's schema is made once, so each test's fresh database is a copy of it."""
    if "url" in _PG:
        return str(_PG["url"])
    import atexit
    import tempfile

    import psycopg

    from clawd.storage.postgres.database import Database

    url = os.environ.get("CLAWD_TEST_POSTGRES_URL")
    if not url:
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="clawd-pg-"), cleanup_mode="stop")
        atexit.register(server.cleanup)
        url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    Database(_with_database(url, TEMPLATE)).close()  # migrated once
    _PG["url"] = url
    return url


def fresh_database() -> str:
    """The URL of a new, migrated database (a copy of the template)."""
    import uuid

    import psycopg

    url = pg_base_url()
    name = f"clawd_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    return _with_database(url, name)


def drop_database(own: str) -> None:
    import psycopg

    from clawd.storage.postgres.database import forget

    forget(own)
    from urllib.parse import urlsplit

    name = urlsplit(own).path.lstrip("/")
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_MADE: list[str] = []  # the databases runtimes of the test under way were given


@pytest.fixture(autouse=True)
def drop_made_databases():
    """Drop the databases ``storage_for_tests`` made for a test, after it."""
    yield
    while _MADE:
        drop_database(_MADE.pop())


@pytest.fixture
def pg_url():
    """A fresh, migrated database of its own for one test; dropped after it."""
    own = fresh_database()
    yield own
    drop_database(own)


def _with_database(url: str, name: str) -> str:
    """The ``postgresql://`` URL ``url`` naming the database ``name`` instead."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def storage_for_tests(tmp_path: Path, workspace: Path, clock: Callable[[], datetime]):
    """The storage a test's runtime gets: the files under ``tmp_path``, or with
    ``CLAWD_TEST_STORAGE=postgresql`` a fresh database of its own (the loop's tests run
    on both)."""
    if os.environ.get("CLAWD_TEST_STORAGE") == "postgresql":
        from clawd.storage.postgres import database

        url = fresh_database()
        _MADE.append(url)
        return database(url).agent("main", now=iso_clock(clock))
    return FileStorage("main", workspace, tmp_path / "state" / "agents" / "main" / "sessions",
                       now=iso_clock(clock))


# --- the loop's tests on both storages ----------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line(
        "markers", "files_only(why): a test of the files themselves (bytes on disk, file "
                   "modes, sessions.json): ``both_storages`` runs it on files only")


@pytest.hookimpl(trylast=True)  # after a test's own parametrize marks: ids end in the kind
def pytest_generate_tests(metafunc):
    """``both_storages``: each test once on files and once on PostgreSQL (ids ending in
    ``files`` and ``postgresql``); a test marked ``files_only`` on files alone."""
    if "both_storages" in metafunc.fixturenames:
        kinds = (["files"] if metafunc.definition.get_closest_marker("files_only")
                 else ["files", "postgresql"])
        metafunc.parametrize("both_storages", kinds, indirect=True)


@pytest.fixture(params=["one", "two"], ids=["one-process", "two-workers"])
def one_or_two_workers(request, monkeypatch):
    """A gateway test once as one process on files, and once as two workers on one
    PostgreSQL database taking the requests in turn (``gateway_client.served_app``)."""
    if request.param == "two":
        monkeypatch.setenv("CLAWD_TEST_STORAGE", "postgresql")
        monkeypatch.setenv("CLAWD_TEST_GATEWAY", "two")
    else:
        monkeypatch.delenv("CLAWD_TEST_STORAGE", raising=False)
        monkeypatch.delenv("CLAWD_TEST_GATEWAY", raising=False)
    return request.param


@pytest.fixture
def both_storages(request, monkeypatch):
    """The storage ``make_runtime`` gives in this run of the test: files, or a fresh
    database (``CLAWD_TEST_STORAGE=postgresql``). A module of the loop's tests runs every
    test on both with ``pytestmark = pytest.mark.usefixtures("both_storages")``."""
    kind = getattr(request, "param", "files")
    if kind == "postgresql":
        monkeypatch.setenv("CLAWD_TEST_STORAGE", "postgresql")
    else:
        monkeypatch.delenv("CLAWD_TEST_STORAGE", raising=False)
    return kind


def _log(of):
    """The transcript of a ``Session`` (or the ``TranscriptLog`` itself)."""
    return getattr(of, "transcript", of)


def transcript_lines(of) -> list[dict]:
    """Every entry of a session's transcript as stored, its header first (read through the
    storage interface: a file's lines or a database's rows alike)."""
    loaded = _log(of).load()
    return ([loaded.header] if loaded.header is not None else []) + loaded.entries


def transcript_entries(of) -> list[dict]:
    """The entries of a session's transcript after its header line."""
    return _log(of).load().entries


def stored_text(of) -> str:
    """A transcript exactly as stored, one line each: the JSONL file's text, or the
    database's lines as written (``PgTranscript.raw_text``)."""
    log = _log(of)
    path = getattr(log, "path", None)
    if path is not None:
        return path.read_text(encoding="utf-8") if path.exists() else ""
    return log.raw_text()


@pytest.fixture
def fresh_mcp():
    """The process's MCP connections start afresh in the test and are closed after it."""
    from clawd.frontends import compose

    compose._MCP.clear()
    yield
    for clients in compose._MCP.values():
        clients.close()
    compose._MCP.clear()
