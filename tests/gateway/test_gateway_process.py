"""``clawd serve`` as a real process over the stand-in model server: SIGTERM in the middle of
a turn ends it cleanly (the turn finished within the grace period, or stopped as Ctrl-C
stops it) and every transcript line is there; while it drains, new turns and the health
check are answered 503."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fakeserver import Response, openai_chunks
from gateway_client import free_port, start_serve

pytestmark = pytest.mark.slow  # starts processes

TOKEN = "process-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WORDS = "one two three four five six seven eight nine ten "


def _slow_reply(request) -> Response:
    def body():
        for chunk in openai_chunks(WORDS, chunk=4):
            time.sleep(0.08)
            yield chunk
    return Response(200, body(), {"content-type": "text/event-stream"})


def _serve(home: Path, grace: float) -> tuple[subprocess.Popen, str]:
    config_path = home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "shutdownGraceSeconds": grace}
    config_path.write_text(json.dumps(config))
    return start_serve({**os.environ, "CLAWD_GATEWAY_TOKEN": TOKEN}, port)


def _during_drain(url: str) -> tuple[int, int, int, str, dict]:
    """A new turn, the health and readiness checks just after SIGTERM: (statuses, the error
    type, what /ready said)."""
    time.sleep(0.3)  # the signal handled
    sent = httpx.post(f"{url}/api/sessions/other/messages", headers=AUTH,
                      json={"text": "too late"}, timeout=5)
    health = httpx.get(f"{url}/health", timeout=5)
    ready = httpx.get(f"{url}/ready", timeout=5)
    return (sent.status_code, health.status_code, ready.status_code,
            sent.json()["error"]["type"], ready.json())


@pytest.mark.parametrize("grace, finished", [(30, True), (0, False)])
def test_sigterm_mid_turn_loses_no_transcript_line(isolated_home, local_config, local_server,
                                                   grace, finished):
    local_server.default("POST", "/v1/chat/completions", _slow_reply)
    child, url = _serve(isolated_home, grace)
    assert httpx.get(f"{url}/ready", timeout=5).json() == {"ready": True}  # files: no database
    try:
        seen: list[dict] = []
        refused: list[tuple[int, int, str]] = []
        with httpx.stream("POST", f"{url}/api/sessions/main/messages", headers=AUTH,
                          json={"text": "count to ten"}, timeout=20) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                seen.append(json.loads(line[6:]))
                if len(seen) == 2:  # words are arriving: stop the server
                    child.send_signal(signal.SIGTERM)
                    if finished:  # still listening while the turn runs: 503 to new work
                        refused.append(_during_drain(url))
        # uvicorn stops cleanly, then lets the signal end the process as it would have
        assert child.wait(20) in (0, -signal.SIGTERM)
    finally:
        if child.poll() is None:
            child.kill()
    out, err = child.communicate()
    assert "Traceback" not in err
    if finished:
        assert refused == [(503, 503, 503, "stopping", {"ready": False, "reason": "stopping"})]
    streamed = "".join(e["text"] for e in seen if e["type"] == "delta")
    done = seen[-1]
    assert done["type"] == "done" and done["interrupted"] is not finished
    sessions = isolated_home / ".clawd" / "agents" / "main" / "sessions"
    entry = json.loads((sessions / "sessions.json").read_text())["agent:main:main"]
    lines = [json.loads(line) for line in Path(entry["sessionFile"]).read_text().splitlines()]
    messages = [line for line in lines if line.get("type") == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["content"][0]["text"] == "count to ten"
    kept = messages[1]["content"][0]["text"]
    if finished:
        assert kept == streamed == WORDS
    else:
        assert messages[1].get("aborted") is True
        assert kept == streamed and 0 < len(kept) < len(WORDS)


def test_serve_says_where_v1_is_and_logs_a_line_per_request(isolated_home, local_config):
    config_path = isolated_home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    config["gateway"] = {"port": port,
                         "http": {"endpoints": {"chatCompletions": {"enabled": True}}}}
    config_path.write_text(json.dumps(config))
    child, url = start_serve({**os.environ, "CLAWD_GATEWAY_TOKEN": TOKEN}, port)
    try:
        assert httpx.get(f"{url}/api/sessions?q=secret", headers=AUTH).status_code == 200
        assert httpx.get(f"{url}/api/sessions", headers={
            "Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    finally:
        child.terminate()
        _, err = child.communicate(timeout=20)
    first = err.splitlines()[0]
    assert first.startswith(f"clawd serve: {url}") and f"OpenAI endpoint {url}/v1" in first
    assert TOKEN not in err and "secret" not in err  # no token, no query in the log
    # when, pid, client, person (none: the operator's token), method, path, status, time
    line = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d \d+ 127\.0\.0\.1 - "
    assert re.search(line + r"GET /api/sessions 200 \d+ms$", err, re.M)
    assert re.search(line + r"GET /api/sessions 401 \d+ms$", err, re.M)


def test_a_cli_on_a_session_the_gateway_holds_is_told_who_and_until_when(isolated_home,
                                                                         local_config):
    config_path = isolated_home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "idleSessionSeconds": 60}
    config_path.write_text(json.dumps(config))
    child, url = start_serve({**os.environ, "CLAWD_GATEWAY_TOKEN": TOKEN}, port)
    try:
        sent = httpx.post(f"{url}/api/sessions/main/messages", headers=AUTH,
                          json={"text": "/status"}, timeout=20)
        assert sent.status_code == 200
        started = time.monotonic()
        cli = subprocess.run([sys.executable, "-m", "clawd", "chat", "-m", "/status"],
                             capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    finally:
        child.terminate()
        child.wait(20)
    assert cli.returncode == 1
    err = cli.stderr.strip()
    assert f"in use by clawd serve ({url})" in err and "lets it go at" in err, err
    assert len(err.splitlines()) == 1
    assert took < 8  # it would be let go in a minute: no point waiting ten seconds first
