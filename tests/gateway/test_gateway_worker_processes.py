"""``clawd serve --workers N`` as processes on one PostgreSQL database: two workers serve
one conversation, a worker killed with SIGKILL leaves the other serving (its session
lease gone with it), and SIGTERM to the parent stops them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import psutil
import pytest

from conftest import write_local_config
from gateway_client import TOKEN, free_port, start_serve

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
    assert "2 workers" in err and "ended (signal 9); 1 still serving" in err
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_several_workers_need_a_database(isolated_home):
    done = subprocess.run([sys.executable, "-m", "clawd", "serve", "--workers", "2"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(isolated_home),
                               "CLAWD_HOME": str(isolated_home / ".clawd")})
    assert done.returncode == 2
    assert done.stderr.strip().startswith("clawd: --workers: several workers share sessions")
