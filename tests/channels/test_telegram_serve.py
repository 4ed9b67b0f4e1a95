"""A real ``clawd serve`` with the Telegram channel, over the stand-in model server and the
Bot API stand-in: one process on files, and two workers on one PostgreSQL database of which
exactly one polls. A person on the allow-list is answered, a stranger gets a pairing code,
``clawd channels status`` in another process sees the counts, and the token is in none of
what the processes print."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fakeserver import Response, openai_chunks
from gateway_client import free_port, start_serve
from telegram_standin import TOKEN, BotApi

pytestmark = pytest.mark.slow  # starts processes

SECRET = TOKEN.partition(":")[2]


def _echo(request) -> Response:
    said = request.json()["messages"][-1]["content"]
    text = said if isinstance(said, str) else " ".join(p.get("text", "") for p in said)
    return Response(200, b"".join(openai_chunks(f"echo: {text}")),
                    {"content-type": "text/event-stream"})


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_clawd_serve_answers_on_telegram(isolated_home, local_config, local_server, workers):
    local_server.default("POST", "/v1/chat/completions", _echo)
    config_path = isolated_home / ".clawd" / "clawd.json"
    config = json.loads(config_path.read_text())
    port = free_port()
    with BotApi() as api:
        config["gateway"] = {"port": port, "shutdownGraceSeconds": 2}
        config["channels"] = {"telegram": {"enabled": True, "apiRoot": api.url,
                                           "allowFrom": ["@ann"]}}
        more: list[str] = []
        if workers == 2:
            from conftest import fresh_database

            config["storage"] = {"url": fresh_database()}
            more = ["--workers", "2"]
        config_path.write_text(json.dumps(config))
        env = {**os.environ, "CLAWD_GATEWAY_TOKEN": "serve-token-0123456789",
               "TELEGRAM_BOT_TOKEN": TOKEN}
        child, _ = start_serve(env, port, more)
        try:
            api.dm("hello from my phone", user=1001, username="ann")
            assert api.wait_sent(1, timeout=60)[0]["text"] == "echo: hello from my phone"
            api.dm("who are you?", user=5005, username="stranger")
            assert "clawd pairing approve" in api.wait_sent(2, timeout=30)[1]["text"]
            status = subprocess.run([sys.executable, "-m", "clawd", "channels", "status",
                                     "--json"], env=env, capture_output=True, text=True,
                                    timeout=60)
            found = json.loads(status.stdout)["channels"]["telegram"]
            assert (found["connected"], found["messagesIn"], found["messagesOut"]) == (
                True, 2, 2)
            assert SECRET not in status.stdout + status.stderr
            time.sleep(1.0)  # long enough for a second poller to show itself
            assert api.most_polling == 1
        finally:
            child.send_signal(signal.SIGTERM)
            out, err = child.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert SECRET not in out + err
