"""``clawd mcp`` and ``doctor`` say what the model will not get: MCP tools its profile leaves
out (in ``mcp list``, ``mcp tools``, ``doctor`` and at a chat's start), an allowed tool name
a server does not have, and nothing secret of a command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clawd.frontends.cli import main

from conftest import write_local_config

RAW = str(Path(__file__).parents[1] / "mcp_raw.py")


def _config(home: Path, url: str, servers: dict) -> Path:
    write_local_config(home, url)
    path = home / ".clawd" / "clawd.json"
    config = json.loads(path.read_text())
    config["mcp"] = {"servers": servers}
    path.write_text(json.dumps(config))
    return path


def _raw(home: Path, name: str, listed: list[str], **more) -> dict:
    spec = home / f"{name}.json"
    spec.write_text(json.dumps({"tools": [
        {"name": t, "description": f"tool {t}", "inputSchema": {"type": "object"}}
        for t in listed]}))
    return {"command": sys.executable, "args": [RAW, str(spec)], **more}


@pytest.mark.slow
def test_a_weak_profile_leaving_tools_out_is_said_everywhere(
        isolated_home, local_server, capfd, fresh_mcp):
    from fakeserver import openai_stream

    tools = [f"t{i:02}" for i in range(12)]
    _config(isolated_home, local_server.url, {"many": _raw(isolated_home, "many", tools)})
    assert main(["mcp", "list"]) == 0
    out, _ = capfd.readouterr()
    assert "· mcp: local/qwen is told of 8 of 12 MCP tools (its profile, weak, allows 8)" \
        in out
    assert main(["mcp", "tools"]) == 0
    out, _ = capfd.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("many__t00") and not lines[0].endswith("(not told of)")
    assert lines[11].startswith("many__t11") and lines[11].endswith("(not told of)")
    assert "is told of 8 of 12" in out
    main(["doctor"])
    out, _ = capfd.readouterr()
    assert "ok    mcp tools: local/qwen is told of 8 of 12 MCP tools" in out
    local_server.queue("POST", "/v1/chat/completions", lambda r: openai_stream("Hi."))
    assert main(["chat", "-m", "hi"]) == 0
    _, err = capfd.readouterr()
    assert err.count("· mcp: local/qwen is told of 8 of 12 MCP tools") == 1


@pytest.mark.slow
def test_an_allowed_name_the_server_lacks_fails_list_and_doctor(
        isolated_home, local_server, capfd, fresh_mcp):
    _config(isolated_home, local_server.url, {"time": _raw(
        isolated_home, "time", ["get_current_time", "convert_time"],
        tools=["get_curent_time", "convert_time"])})
    assert main(["mcp", "list"]) == 1
    out, _ = capfd.readouterr()
    assert "ready" in out and "1 tools" in out
    assert "time has no tool get_curent_time (its tools: convert_time, get_current_time)" \
        in out
    assert main(["doctor"]) == 1
    out, _ = capfd.readouterr()
    assert "FAIL  mcp time: stdio, 1 tools; time has no tool get_curent_time" in out


@pytest.mark.slow
def test_mcp_list_prints_no_secret_given_as_an_argument(
        isolated_home, local_server, capfd, fresh_mcp):
    server = _raw(isolated_home, "keys", ["t"])
    server["args"] += ["--api-key", "sk-live-0123456789", "--url=https://h/x?token=abcd1234"]
    _config(isolated_home, local_server.url, {"keys": server})
    assert main(["mcp", "list"]) == 0
    out, _ = capfd.readouterr()
    assert "sk-live-0123456789" not in out and "abcd1234" not in out
    assert "--api-key *** --url=https://h/x?token=***" in out


@pytest.mark.slow
def test_a_server_a_run_does_not_use_is_not_started(isolated_home, local_server, capfd,
                                                     fresh_mcp):
    from clawd.frontends import compose

    from fakeserver import openai_stream

    log = isolated_home / "starts.log"
    spec = isolated_home / "lazy.json"
    spec.write_text(json.dumps({"startLog": str(log), "tools": [
        {"name": "ping", "description": "answers", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": True}}]}))
    _config(isolated_home, local_server.url, {"lazy": {"command": sys.executable,
                                                       "args": [RAW, str(spec)]}})

    def chat(*replies) -> list[str]:
        for reply in replies:
            local_server.queue("POST", "/v1/chat/completions", lambda r, reply=reply: reply)
        assert main(["chat", "-m", "hi"]) == 0
        for clients in compose._MCP.values():  # as a process that ends
            clients.close()
        compose._MCP.clear()
        return log.read_text().splitlines() if log.exists() else []

    assert len(chat(openai_stream("Hi."))) == 1  # the first run lists its tools
    assert len(chat(openai_stream("Hi again."))) == 1  # known: not started
    sent = local_server.requests[-1].json()
    assert "lazy__ping" in [t["function"]["name"] for t in sent["tools"]]
    starts = chat(openai_stream("", [{"id": "c1", "name": "lazy__ping", "arguments": {}}]),
                  openai_stream("Pinged."))
    assert len(starts) == 2  # started at its first call
    result = local_server.requests[-1].json()["messages"][-1]
    assert result["role"] == "tool" and "ping {}" in result["content"]
    assert (isolated_home / ".clawd" / "cache" / "mcp-tools.json").exists()


@pytest.mark.slow
def test_verbose_lines_hold_no_key_of_a_url(isolated_home, local_server, tmp_path):
    import os
    import subprocess

    _config(isolated_home, local_server.url, {"web": {
        "url": local_server.url + "/mcp?api_key=sekrit-key-1234", "connectionTimeoutMs": 5000}})
    done = subprocess.run([sys.executable, "-m", "clawd", "-v", "mcp", "list"],
                          env=dict(os.environ), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1  # nothing answers MCP there
    assert "HTTP Request: POST" in done.stderr and "api_key=***" in done.stderr  # masked
    assert "sekrit-key-1234" not in done.stdout + done.stderr
    assert "no MCP endpoint at this URL (HTTP 404" in done.stdout
