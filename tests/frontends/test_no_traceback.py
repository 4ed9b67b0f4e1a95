"""Never a traceback: unwritable workspaces, input that is not UTF-8, a closed stdout, Ctrl-C.

Most of these run clawd as a real process against the local fake OpenAI server, because
what they are about (argv and stdin bytes, pipes, signals, what reaches stderr) only exists
there.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from clawd.core.events import ErrorEvent, Notice, ToolFinished
from clawd.core.messages import ToolSpec
from clawd.frontends import cli
from clawd.frontends.commands import Chat
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.base import Tool

from conftest import ctrl_c_as_in_a_terminal, make_runtime
from fakeserver import FakeServer, Response, openai_chunks, openai_stream

pytestmark = pytest.mark.slow  # runs clawd as a process (most of these)

CHAT = "/v1/chat/completions"


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def home(isolated_home, server, tmp_path):
    """A state dir whose config points the model at the fake server."""
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    state = isolated_home / ".clawd"
    state.mkdir()
    write_config(state, workspace, server)
    return state, workspace


def write_config(state: Path, workspace: Path, server, **defaults) -> None:
    (state / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": "local/m",
                                "memorySearch": {"enabled": False}, **defaults}},
        "models": {"providers": {"local": {"api": "openai-completions",
                                           "baseUrl": server.url + "/v1", "maxRetries": 0}}}}))


def clawd(*args: str, stdin: bytes | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawd", *args], input=stdin,
                          capture_output=True, env=os.environ.copy(), timeout=60, **kw)


def transcript_texts(state: Path) -> list[str]:
    store = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    lines = Path(store["agent:main:main"]["sessionFile"]).read_text().splitlines()
    entries = [json.loads(line) for line in lines[1:]]
    return [_text(e) for e in entries if e["type"] == "message"]


def _text(entry: dict) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def no_traceback(result: subprocess.CompletedProcess) -> None:
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "Exception ignored" not in err, err


# --- input that is not UTF-8 ----------------------------------------------------------------

@pytest.mark.parametrize("how", ["stdin", "message", "script"])
def test_input_that_is_not_utf8_is_decoded_with_replacement(home, server, tmp_path, how):
    state, _ = home
    server.queue("POST", CHAT, lambda r: openai_stream("got it"))
    if how == "stdin":
        result = clawd("chat", stdin=b"\xff\xfe x\n")
    elif how == "message":
        result = clawd("chat", "-m", os.fsdecode(b"a \xff"))
    else:
        script = tmp_path / "s.txt"
        script.write_bytes(b"a \xff b\n")
        result = clawd("chat", "--script", str(script))
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert b"got it" in result.stdout
    err = result.stderr.decode()
    assert err.count("not valid UTF-8") == 1 and len(err.strip().splitlines()) == 1, err
    sent = server.requests[0].json()["messages"][-1]["content"]
    assert "\ufffd" in json.dumps(sent, ensure_ascii=False)
    user = transcript_texts(state)[0]
    assert "\ufffd" in user and user.replace("\ufffd", "").strip() in ("x", "a", "a  b")


# --- a closed stdout ------------------------------------------------------------------------

def closed_stdout(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run clawd with a stdout whose reader has already gone (``| head`` that exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "clawd", *args], input=stdin,
                              stdout=write, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(write)


def test_sessions_list_into_a_closed_pipe_is_quiet(home, server):
    state, _ = home
    server.queue("POST", CHAT, lambda r: openai_stream("hi"))
    assert clawd("chat", "-m", "hello").returncode == 0
    for args in (["sessions", "list"], ["sessions", "list", "--json"], ["memory", "--help"],
                 ["--help"], ["chat", "--help"]):
        result = closed_stdout(*args)
        no_traceback(result)
        assert result.stderr == b""
        assert result.returncode == 141  # stdout is flushed before exit, on every path


class GoneStdout(io.StringIO):
    """A stdout whose reader went away: text is buffered, and a flush fails (as a pipe's
    does once ``| true`` exited), whatever the machine's load."""

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno")


@pytest.mark.parametrize("args", [["--help"], ["memory", "--help"], ["chat", "--help"],
                                  ["sessions", "--help"], []])
def test_help_into_a_gone_reader_exits_141_without_a_traceback(monkeypatch, args):
    monkeypatch.setattr(sys, "stdout", GoneStdout())
    assert cli.main(args) == 141


def test_help_into_a_reader_still_there_exits_0(capsys):
    assert cli.main(["memory", "--help"]) == 0
    assert "usage: clawd memory" in capsys.readouterr().out


def test_a_real_head_gets_its_line_and_clawd_says_nothing(home, server):
    state, _ = home
    server.queue("POST", CHAT, lambda r: openai_stream("hi"))
    clawd("chat", "-m", "hello")
    shell = (f"{sys.executable} -m clawd sessions list | head -1; "
             f"{sys.executable} -m clawd chat --help | head -c 5")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                            timeout=60)
    assert result.stdout.startswith(b"ID ") and result.stderr == b""


def test_chat_into_a_closed_pipe_finishes_the_turn_then_stops(home, server):
    state, _ = home
    server.queue("POST", CHAT, lambda r: openai_stream(
        "", [{"id": "c1", "name": "write", "arguments": {"path": "a.md", "content": "A"}}]))
    server.queue("POST", CHAT, lambda r: openai_stream("first reply " * 50))
    server.queue("POST", CHAT, lambda r: openai_stream("second reply"))
    result = closed_stdout("chat", stdin=b"one\ntwo\n")
    no_traceback(result)
    assert result.returncode == 141
    assert len(server.requests) == 2  # the second line never ran
    texts = transcript_texts(state)
    assert texts[0] == "one" and texts[-1].startswith("first reply")  # the turn is whole
    assert (home[1] / "a.md").read_text() == "A"


# --- Ctrl-C ---------------------------------------------------------------------------------

def test_ctrl_c_in_chat_m_exits_130_and_keeps_the_partial_reply(home, server):
    state, _ = home
    chunks = openai_chunks("partial words then more")

    def slow(request) -> Response:
        def body():
            yield from chunks[:4]
            time.sleep(30)  # the reply stalls; the user presses Ctrl-C
            yield from chunks[4:]
        return Response(200, body(), {"content-type": "text/event-stream"})

    server.queue("POST", CHAT, slow)
    proc = subprocess.Popen([sys.executable, "-m", "clawd", "chat", "-m", "hello"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=ctrl_c_as_in_a_terminal)
    first = proc.stdout.read(1)  # the reply has started streaming (the render flushes)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    out = first + out
    assert proc.returncode == 130, err
    assert b"Traceback" not in err and b"interrupted" in err
    texts = transcript_texts(state)
    assert texts[0] == "hello" and texts[1] and "partial words then more".startswith(texts[1])


# --- an unwritable workspace ----------------------------------------------------------------

def blocked_workspace(rt) -> None:
    """A memory/ that cannot be written: a file stands where the folder should be (tests
    run as root too, where permission bits would not stop a write)."""
    (rt.workspace / "memory").rmdir()
    (rt.workspace / "memory").write_text("not a folder")


def test_unwritable_workspace_memory_add_and_new_are_one_line_each(tmp_path):
    provider = ScriptedProvider(["hello", "slug-name"], default="ok")
    rt = make_runtime(tmp_path, provider)
    chat = Chat.open(rt, "agent:main:main")
    list(chat.handle("hi"))
    blocked_workspace(rt)
    events = list(chat.handle("/memory add remember the milk"))
    assert isinstance(events[0], ErrorEvent) and "remember the milk" in events[0].message
    old = chat.session
    events = list(chat.handle("/new"))
    notice = next(e for e in events if isinstance(e, Notice)).text
    assert "was not saved" in notice and str(old.transcript.path) in notice
    assert chat.session is not old and old.transcript.path.exists()


@pytest.mark.parametrize("access", ["ro", "none"])
def test_read_only_access_writes_nothing_into_memory(tmp_path, access):
    provider = ScriptedProvider(["hello"], default="slug")
    rt = make_runtime(tmp_path, provider, settings={"workspaceAccess": access})
    chat = Chat.open(rt, "agent:main:main")
    list(chat.handle("hi"))
    events = list(chat.handle("/memory add a note"))
    assert isinstance(events[0], ErrorEvent) and "read-only" in events[0].message
    assert "a note" in events[0].message  # what the user typed is shown, not lost
    events = list(chat.handle("/new"))
    assert any(isinstance(e, Notice) and "not saved" in e.text for e in events)
    assert list((rt.workspace / "memory").iterdir()) == []


def test_a_failing_write_tool_is_one_error_line_for_the_model_and_the_log(tmp_path, caplog):
    def broken(args, ctx):
        raise RuntimeError("disk on fire")

    provider = ScriptedProvider([
        Reply(tool_calls=[tool("write", path="memory/x.md", content="x")]),
        Reply(tool_calls=[tool("boom")]), "done"])
    rt = make_runtime(tmp_path, provider)
    rt.tools.append(Tool(ToolSpec("boom", "breaks", {"type": "object", "properties": {}}),
                         broken))
    blocked_workspace(rt)
    session = Session.open(rt, "agent:main:main")
    with caplog.at_level(logging.INFO):
        events = list(session.run_turn("write it"))
    failed = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.is_error for e in failed] == [True, True]
    assert failed[0].preview.startswith("error: cannot write memory/x.md")
    assert "disk on fire" in failed[1].preview
    assert not any(r.exc_info for r in caplog.records)
    assert any("tool boom failed: RuntimeError: disk on fire" in r.getMessage()
               for r in caplog.records)


def test_unwritable_workspace_through_the_cli(home, server):
    state, workspace = home
    (workspace / "memory").rmdir()
    (workspace / "memory").write_text("not a folder")
    server.default("POST", CHAT, lambda r: openai_stream("fine"))
    result = clawd("chat", stdin=b"hello\n/memory add keep me\n/new\n")
    no_traceback(result)
    err = result.stderr.decode()
    assert "keep me" in err and "was not saved" in err
    assert result.returncode == 1  # the /memory add failed, and said so


def test_permission_denied_is_reported_like_any_unwritable_workspace(tmp_path, monkeypatch):
    """What a read-only directory does for a user who is not root (these tests may run as
    root, where permission bits do not stop a write): every write raises PermissionError."""
    import pathlib

    provider = ScriptedProvider([Reply(tool_calls=[tool("write", path="SOUL.md",
                                                        content="new")]), "ok"],
                                default="fine")
    rt = make_runtime(tmp_path, provider)
    chat = Chat.open(rt, "agent:main:main")
    real_open = pathlib.Path.open

    def denied(self, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+") and rt.workspace in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, mode, *args, **kwargs)

    real_mkstemp = tempfile.mkstemp

    def denied_temp(*args, dir=None, **kwargs):  # a whole-file write goes through one
        if dir is not None and rt.workspace in (Path(dir), *Path(dir).parents):
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", denied)
    monkeypatch.setattr(tempfile, "mkstemp", denied_temp)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    events = list(chat.handle("change your soul"))
    failed = next(e for e in events if isinstance(e, ToolFinished))
    assert failed.is_error and "Permission denied" in failed.preview
    events = list(chat.handle("/memory add milk"))
    assert isinstance(events[0], ErrorEvent) and "Permission denied" in events[0].message
    assert "milk" in events[0].message
    events = list(chat.handle("/new"))
    assert any(isinstance(e, Notice) and "not saved" in e.text for e in events)


# --- benchmarks -----------------------------------------------------------------------------

def test_retrieval_benchmark_without_its_data_says_where_to_get_it(tmp_path):
    script = Path(__file__).resolve().parents[2] / "scripts" / "bench_retrieval.py"
    result = subprocess.run([sys.executable, str(script), "--data", str(tmp_path / "none.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "none.json" in result.stderr and "--data" in result.stderr
    assert "shared/data/locomo-dev.json" in result.stderr
