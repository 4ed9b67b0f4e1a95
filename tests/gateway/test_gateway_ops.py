"""What an operator looks at, on real processes: ``/ready`` through a database outage (a
PostgreSQL of the test's own, its postmaster killed and started again), the request lines
(one per request, with the person, a forged line break escaped), ``/metrics`` (the
operator's only, in Prometheus' text format, its counters moving with a turn) and ``clawd
users unlock`` lifting a sign-in lockout of a running server."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import pytest

from conftest import write_local_config
from fakeserver import openai_stream
from gateway_client import AUTH, TOKEN, free_port, start_serve

pytestmark = pytest.mark.slow  # processes and a database


def _configure(home: Path, port: int, url: str | None, **gateway) -> dict[str, str]:
    config = home / ".clawd" / "clawd.json"
    data = json.loads(config.read_text())
    data["gateway"] = {"port": port, "shutdownGraceSeconds": 1, **gateway}
    if url:
        data["storage"] = {"url": url}
    config.write_text(json.dumps(data))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    return env


def _ready(url: str) -> tuple[int, dict]:
    response = httpx.get(f"{url}/ready", timeout=10)
    return response.status_code, response.json()


def _until(url: str, status: int, seconds: float) -> float:
    """How long until ``/ready`` answers ``status`` (an AssertionError past ``seconds``)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if _ready(url)[0] == status:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"/ready did not answer {status} within {seconds} s")


# --- /ready through an outage -------------------------------------------------------------------

@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (pgserver), to be killed: (server, URL)."""
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="clawd-pg-own-"), cleanup_mode="delete")
    try:
        yield server, server.get_uri()
    finally:
        server.cleanup()


def _kill_postmaster(server) -> None:
    postmaster = psutil.Process(server.get_pid())
    family = [postmaster, *postmaster.children(recursive=True)]
    postmaster.send_signal(signal.SIGKILL)
    psutil.wait_procs(family, timeout=20)  # its backends notice and go


def _start_again(server) -> str:
    with server._lock:  # pgserver starts a server whose postmaster.pid is stale
        server.ensure_postgres_running()
    return server.get_uri()


def test_ready_is_503_while_the_database_is_down_and_200_once_it_is_back(
        isolated_home, local_server, own_postgres):
    server, url = own_postgres
    write_local_config(isolated_home, local_server.url)
    port = free_port()
    child, base = start_serve(_configure(isolated_home, port, url), port)
    try:
        assert _ready(base) == (200, {"ready": True})
        _kill_postmaster(server)
        took = _until(base, 503, 10)
        assert took < 5
        status, body = _ready(base)
        assert (status, body) == (503, {"ready": False, "reason": "database"})
        assert httpx.get(f"{base}/health", timeout=5).status_code == 200  # alive all along
        assert _start_again(server) == url
        assert _until(base, 200, 20) < 10  # back by itself
        assert _ready(base) == (200, {"ready": True})
    finally:
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=30)
    # the change is told once each way, however often /ready was asked
    assert err.count("not ready: the database does not answer") == 1, err
    assert err.count("ready again: the database answers") == 1, err


# --- request lines and /metrics -----------------------------------------------------------------

def _parse_metrics(text: str) -> dict[tuple[str, frozenset], float]:
    """Prometheus' text format (0.0.4), strictly enough to catch a malformed line: every
    sample is ``name{label="value",...} number``, and its family was declared by ``# TYPE``
    (a histogram's ``_bucket``, ``_sum``, ``_count``)."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    samples: dict[tuple[str, frozenset], float] = {}
    label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    line_re = re.compile(rf"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{label})(?:,{label})*)?\}})? "
                         r"(\S+)$")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            assert name not in types, f"{name} declared twice"
            types[name] = kind
            continue
        found = line_re.match(line)
        assert found, f"not a sample: {line!r}"
        name, labels, value = found.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or types.get(family) == "histogram", f"undeclared {name}"
        pairs = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                     labels or ""))
        number = float(value)  # +Inf, NaN too
        assert not math.isnan(number)
        key = (name, pairs)
        assert key not in samples, f"{line!r} twice"
        samples[key] = number
    return samples


def _metric(samples: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that carry ``labels``."""
    want = set(labels.items())
    return sum(v for (n, pairs), v in samples.items() if n == name and want <= set(pairs))


def _users_add(env: dict[str, str], name: str) -> str:
    done = subprocess.run([sys.executable, "-m", "clawd", "users", "add", name], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_request_lines_and_metrics(isolated_home, local_server, pg_url):
    local_server.default("POST", "/v1/chat/completions", lambda r: openai_stream("hi there"))
    write_local_config(isolated_home, local_server.url)
    port = free_port()
    env = _configure(isolated_home, port, pg_url)
    alice = {"Authorization": f"Bearer {_users_add(env, 'alice')}"}
    child, url = start_serve(env, port)
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/metrics").status_code == 401
            assert client.get("/metrics", headers=alice).status_code == 403  # a person's
            before = _parse_metrics(client.get("/metrics", headers=AUTH).text)
            assert client.get("/api/sessions", headers=alice).status_code == 200
            forged = "/api/x%0A2025-01-01T00:00:00.000+00:00 1 127.0.0.1 bob GET /api 200 1ms"
            assert client.get(forged, headers=alice).status_code == 404
            sent = client.post("/api/sessions/main/messages", json={"text": "hello"},
                               headers={**AUTH, "Accept": "application/json"})
            assert sent.status_code == 200
            assert sent.json()["events"][-1]["failed"] is False
            response = client.get("/metrics", headers=AUTH)
            assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
            after = _parse_metrics(response.text)
    finally:
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=30)
    pid = str(child.pid)
    # every sample is this worker's
    assert all(dict(pairs).get("pid") == pid for _, pairs in after)
    for name in ("clawd_turns_started_total", "clawd_turns_ended_total"):
        assert _metric(after, name) == _metric(before, name) + 1
    assert _metric(after, "clawd_turns_failed_total") == _metric(before, "clawd_turns_failed_total")
    assert _metric(after, "clawd_turn_queue_wait_seconds_count") == \
        _metric(before, "clawd_turn_queue_wait_seconds_count") + 1
    assert _metric(after, "clawd_turn_queue_wait_seconds_bucket", le="+Inf") == \
        _metric(after, "clawd_turn_queue_wait_seconds_count")
    assert _metric(after, "clawd_lease_wait_seconds_count") >= 1
    assert _metric(after, "clawd_http_requests_total", code="2xx") >= \
        _metric(before, "clawd_http_requests_total", code="2xx") + 3
    assert _metric(after, "clawd_http_requests_total", code="4xx") >= 3
    assert _metric(after, "clawd_db_pool_max") >= 1  # the database pool's own statistics
    assert _metric(after, "clawd_db_requests_num_total") > 0
    assert _metric(after, "clawd_ready") == 1
    # a line per request: when, pid, client, person, method, path, status, time
    lines = [line.split(" ") for line in err.splitlines() if f" {pid} 127.0.0.1 " in line]
    assert all(len(fields) == 8 and re.fullmatch(r"\d+ms", fields[7]) for fields in lines)
    assert ["alice", "GET", "/api/sessions", "200"] in [f[3:7] for f in lines]
    assert ["-", "POST", "/api/sessions/main/messages", "200"] in [f[3:7] for f in lines]
    assert ["-", "GET", "/metrics", "401"] in [f[3:7] for f in lines]
    forged_lines = [f for f in lines if f[5].startswith("/api/x")]
    assert len(forged_lines) == 1 and forged_lines[0][3] == "alice"
    assert forged_lines[0][5].startswith("/api/x%0A2025-01-01T00:00:00.000+00:00%201%20")
    assert not re.search(r"^2025-01-01", err, re.M)  # no line of the request's own
    assert TOKEN not in err


# --- clawd users unlock -------------------------------------------------------------------------

def _clawd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawd", *args], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("storage", ["files", "postgresql"])
def test_clawd_users_unlock_lets_a_locked_out_address_in_again(isolated_home, local_server,
                                                                storage, request):
    url = request.getfixturevalue("pg_url") if storage == "postgresql" else None
    write_local_config(isolated_home, local_server.url)
    port = free_port()
    env = _configure(isolated_home, port, url, auth={"rateLimit": {
        "maxAttempts": 3, "windowSeconds": 60, "lockoutSeconds": 600}})
    child, base = start_serve(env, port)
    try:
        wrong = {"Authorization": "Bearer wrong-token-0123456789"}
        with httpx.Client(base_url=base, timeout=10) as client:
            assert [client.get("/api/sessions", headers=wrong).status_code
                    for _ in range(3)] == [401, 401, 429]
            assert client.get("/api/sessions", headers=AUTH).status_code == 429  # even so
            listed = _clawd(env, "users", "lockouts")
            assert listed.returncode == 0 and re.search(
                r"^127\.0\.0\.1 +locked out until \d{4}-", listed.stdout, re.M), listed
            done = _clawd(env, "users", "unlock", "127.0.0.1")
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("127.0.0.1 may sign in again (it was locked out "
                                          "until ")
            deadline = time.monotonic() + 5  # a server on the files looks once a second
            while client.get("/api/sessions", headers=AUTH).status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert client.get("/api/sessions", headers=wrong).status_code == 401  # counted anew
        again = _clawd(env, "users", "unlock", "127.0.0.1")
        assert again.returncode == 1
        assert again.stderr.strip() == ("clawd: 127.0.0.1 is not locked out (clawd users "
                                        "lockouts lists those that are)")
        assert "no address is locked out" in _clawd(env, "users", "lockouts").stdout
    finally:
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=30)
