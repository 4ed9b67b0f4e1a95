"""``clawd serve --workers N`` as processes on one PostgreSQL database: two workers serve
one conversation, a worker killed with SIGKILL leaves the other serving (its session
lease gone with it) and is replaced, and SIGTERM to the parent stops them all."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from conftest import write_local_config
from gateway_client import TOKEN, Drained, free_port, start_serve

pytestmark = pytest.mark.slow  # processes and a database


def _env(home, port: int, url: str) -> dict[str, str]:
    config = home / ".clawd" / "clawd.json"
    data = json.loads(config.read_text())
    data["gateway"] = {"port": port, "shutdownGraceSeconds": 1}
    data["storage"] = {"url": url}
    config.write_text(json.dumps(data))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    return env


def _say(url: str, text: str) -> httpx.Response:
    with httpx.Client(timeout=30) as client:  # a new connection: any worker may take it
        return client.post(f"{url}/api/sessions/main/messages", json={"text": text},
                           headers={"Authorization": f"Bearer {TOKEN}",
                                    "Accept": "application/json"})


def test_two_worker_processes_serve_one_conversation(isolated_home, local_server, pg_url):
    write_local_config(isolated_home, local_server.url)
    port = free_port()
    env = _env(isolated_home, port, pg_url)
    parent, url = start_serve(env, port, ["--workers", "2"])
    try:
        workers = psutil.Process(parent.pid).children()
        assert len(workers) == 2
        for n in range(4):
            assert _say(url, f"message {n}").status_code == 200
        os.kill(workers[0].pid, signal.SIGKILL)  # one worker dies; the other serves on
        workers[0].wait(10)
        for n in range(4, 6):
            assert _say(url, f"message {n}").status_code == 200
        with httpx.Client(timeout=30) as client:
            items = client.get(f"{url}/api/sessions/main/history?limit=50",
                               headers={"Authorization": f"Bearer {TOKEN}"}).json()["items"]
        assert [i["text"] for i in items if i["type"] == "user"] == [
            f"message {n}" for n in range(6)]
    finally:
        parent.send_signal(signal.SIGTERM)
        out, err = parent.communicate(timeout=30)
    assert parent.returncode == 0, err
    assert "2 workers" in err and "ended (signal 9, SIGKILL); 1 still serving" in err
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_several_workers_need_a_database(isolated_home):
    done = subprocess.run([sys.executable, "-m", "clawd", "serve", "--workers", "2"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(isolated_home),
                               "CLAWD_HOME": str(isolated_home / ".clawd")})
    assert done.returncode == 2
    assert done.stderr.strip().startswith("clawd: --workers: several workers share sessions")


def _workers(parent: subprocess.Popen, count: int, seconds: float = 30) -> list[int]:
    """The pids of the parent's ``count`` workers, once it has that many."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [p.pid for p in psutil.Process(parent.pid).children()
                 if p.status() != psutil.STATUS_ZOMBIE]
        if len(found) == count:
            return sorted(found)
        time.sleep(0.1)
    raise AssertionError(f"{parent.pid} has not {count} workers")


class Lines:
    """A process's stderr, read as it comes (so it can be looked at while it runs)."""

    def __init__(self, child: subprocess.Popen):
        if isinstance(child, Drained):  # read already, as it comes: the same lines
            self.lines, self.thread = child.said[1], child.readers[-1]
            return
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(child,), daemon=True)
        self.thread.start()

    def _read(self, child: subprocess.Popen) -> None:
        for line in child.stderr:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _answered_by(err: str, method: str, path: str) -> set[int]:
    """The pids of the workers whose request lines say they answered ``method path``
    with 200 (the line: when, pid, client, person, method, path, status, time)."""
    found = set()
    for line in err.splitlines():
        fields = line.split(" ")
        if len(fields) == 8 and fields[4:7] == [method, path, "200"]:
            found.add(int(fields[1]))
    return found


def test_a_killed_worker_is_replaced_and_the_new_one_serves(isolated_home, local_server,
                                                            pg_url):
    write_local_config(isolated_home, local_server.url)
    port = free_port()
    env = _env(isolated_home, port, pg_url)
    parent, url = start_serve(env, port, ["--workers", "2"])
    err = Lines(parent)
    try:
        first = _workers(parent, 2)
        os.kill(first[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # its successor starts after 1 s
            now = _workers(parent, 2)
            if first[0] not in now:
                break
            time.sleep(0.1)
        new = (set(now) - set(first)).pop()
        assert set(now) == {new, first[1]}
        # both answer: a connection goes to whichever worker accepts it first, so requests
        # are sent until each worker has answered some (the new one once it has started)
        for _ in range(300):
            with httpx.Client(timeout=30) as client:
                assert client.get(f"{url}/api/sessions", headers={
                    "Authorization": f"Bearer {TOKEN}"}).status_code == 200
            if _answered_by(err.text, "GET", "/api/sessions") == {new, first[1]}:
                break
        for n in range(2):
            assert _say(url, f"message {n}").status_code == 200
    finally:
        parent.send_signal(signal.SIGTERM)
        parent.wait(30)
        err.thread.join(10)
    text = err.text
    assert parent.returncode == 0, text
    assert re.search(rf"worker \d \(pid {first[0]}\) ended \(signal 9, SIGKILL\); 1 still "
                     rf"serving; a new worker \d starts in 1 s \(at ", text), text
    assert re.search(rf"worker \d started again \(pid {new}\)", text), text
    assert _answered_by(text, "GET", "/api/sessions") == {new, first[1]}
    assert _answered_by(text, "POST", "/api/sessions/main/messages")
    assert text.count("started again") == 1  # none after the SIGTERM


SUPERVISED = """
import os, signal, sys, time
from clawd.frontends.gateway.workers import listen, supervise
mode = sys.argv[1]
def serve(sock):
    if mode == "crash":  # each worker dies at once, and again, and again
        time.sleep(0.05)
        return 3
    if mode == "config":
        from clawd.core.errors import ConfigError
        raise ConfigError("agents.list: no such agent")
    signal.pause()  # serves until told to stop
    return 0
sys.exit(supervise(2, listen("127.0.0.1", 0), serve, first_backoff=0.2, max_backoff=0.8,
                   steady=60))
"""


def _supervised(mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SUPERVISED, mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_worker_that_keeps_dying_is_restarted_ever_more_slowly_until_sigterm():
    parent = _supervised("crash")
    err = Lines(parent)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and err.text.count("starts in 0.8 s") < 4:
        time.sleep(0.05)
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(10) == 0  # stopped on request: nothing failed then
    err.thread.join(10)
    lines = [line for line in err.text.splitlines() if "worker 1 " in line]
    waits = [float(m.group(1)) for line in lines
             if (m := re.search(r"starts in ([\d.]+) s", line))]
    assert waits[:4] == [0.2, 0.4, 0.8, 0.8]  # doubling, up to the most
    assert all(re.match(r"\d{4}-\d\d-\d\dT[\d:.]+[+-]\d\d:\d\d clawd serve: worker 1 \(pid "
                        r"\d+\) ended \(exit code 3\); [01] still serving; a new worker 1 "
                        r"starts in [\d.]+ s \(at ", line) for line in lines if "ended" in line)
    assert not psutil.Process().children()  # nothing left behind


def test_sigterm_stops_every_worker_and_starts_none():
    parent = _supervised("serve")
    workers = _workers(parent, 2)
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(10) == 0
    _, err = parent.communicate()
    assert "ended" not in err and "started again" not in err
    assert not [pid for pid in workers if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_a_worker_that_cannot_start_is_not_restarted():
    parent = _supervised("config")
    assert parent.wait(10) == 2
    _, err = parent.communicate()
    assert err.count("clawd: agents.list: no such agent") == 2  # one line each, no traceback
    assert "Traceback" not in err and "worker 1 started" not in err
    assert "ended (exit code 2); 0 still serving; not started again" in err


def test_workers_refuse_a_newer_schema_and_are_not_restarted(isolated_home, local_server,
                                                             pg_url):
    import psycopg

    from clawd.storage.postgres.database import MIGRATIONS

    with psycopg.connect(pg_url, autocommit=True) as conn:  # a newer clawd migrated it
        conn.execute("INSERT INTO clawd_schema (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    write_local_config(isolated_home, local_server.url)
    env = _env(isolated_home, free_port(), pg_url)
    done = subprocess.run([sys.executable, "-m", "clawd", "serve", "--workers", "2"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    said = (f"clawd: the database's schema is version {len(MIGRATIONS) + 1}; this clawd "
            f"knows {len(MIGRATIONS)}: upgrade clawd")
    assert done.stderr.count(said) == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("not started again") == 2
    status = subprocess.run([sys.executable, "-m", "clawd", "storage", "status"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 2 and status.stderr.startswith(said)


def test_connections_on_the_shared_socket_send_at_once():
    """Workers accept on the supervisor's socket; each accepted connection must have
    Nagle's algorithm off, as uvicorn's own sockets do, or a response written in two parts
    waits for the client's delayed acknowledgement (40 ms a turn, found by the benchmark)."""
    import asyncio
    import socket

    from clawd.frontends.gateway.workers import listen

    async def accepted_nodelay() -> int:
        sock = listen("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Accept(asyncio.Protocol):
            def connection_made(self, transport):
                raw = transport.get_extra_info("socket")
                seen.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        server = await asyncio.get_running_loop().create_server(Accept, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0
