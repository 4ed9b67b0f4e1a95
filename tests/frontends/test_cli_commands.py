"""The command line's shape and its informational commands, through ``cli.main``: global
options in any position, default actions, ``clawd models`` and ``clawd doctor`` (against the
local fake server)."""

from __future__ import annotations

import json
import re

import pytest

from clawd.frontends import cli

from fakeserver import FakeServer, Response


def run(args, capsys):
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def write_config(home, data) -> None:
    state = home / ".clawd"
    state.mkdir(exist_ok=True)
    (state / "clawd.json").write_text(json.dumps(data))


@pytest.fixture
def two_agents(isolated_home):
    write_config(isolated_home, {"agents": {
        "defaults": {"memorySearch": {"enabled": False}},
        "list": [{"id": "main", "default": True, "workspace": str(isolated_home / "m")},
                 {"id": "work", "workspace": str(isolated_home / "w")}]}})
    return isolated_home


@pytest.mark.parametrize("args", [
    ["--agent", "work", "sessions", "list"],
    ["sessions", "--agent", "work", "list"],
    ["sessions", "list", "--agent", "work"],
    ["--agent", "work", "sessions"],
])
def test_agent_is_a_global_option_in_any_position(two_agents, capsys, args):
    code, out, err = run(args, capsys)
    assert code == 0, err
    assert "agent work" in out


def test_an_agent_after_the_command_wins_over_none_before(two_agents, capsys):
    assert run(["-v", "sessions", "--agent", "work"], capsys)[1].count("agent work") == 1
    code, _, err = run(["--agent", "nobody", "sessions"], capsys)
    assert code == 2 and "unknown agent 'nobody'" in err


@pytest.mark.parametrize("args", [["-v", "models"], ["models", "-v"], ["sessions", "list", "-v"],
                                  ["memory", "-v"], ["doctor", "-v"], ["init", "-v", "--dry-run"]])
def test_verbose_is_accepted_on_every_command(isolated_home, capsys, args):
    code, _, err = run(args, capsys)
    assert "unrecognized arguments" not in err and code in (0, 1), err


def test_memory_without_an_action_is_status(isolated_home, capsys):
    write_config(isolated_home, {"agents": {"defaults": {"workspace": str(isolated_home / "w")}}})
    (isolated_home / "w" / "memory").mkdir(parents=True)
    code, out, err = run(["memory"], capsys)
    assert code == 0, err
    assert "chunks" in out and "embeddings" in out


def test_chat_help_documents_every_flag(capsys):
    assert cli.main(["chat", "--help"]) == 0
    out = capsys.readouterr().out
    parser = cli.build_parser()
    chat = parser._subparsers._group_actions[0].choices["chat"]
    for action in chat._actions:
        assert action.help, action.option_strings
        for flag in action.option_strings:
            assert flag in out


def test_models_lists_providers_models_windows_and_keys(isolated_home, capsys, monkeypatch):
    write_config(isolated_home, {
        "agents": {"defaults": {"model": "local/qwen"}},
        "models": {"providers": {"local": {
            "api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
            "models": [{"id": "qwen", "contextWindow": 32000,
                        "cost": {"input": 0.5, "output": 1.5}},
                       {"id": "small", "contextWindow": 8000}]}}}})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code, out, err = run(["models"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("anthropic (anthropic-messages) · key not set (ANTHROPIC_API_KEY)")
    assert any(line.startswith("openai (openai-completions) · key set (OPENAI_API_KEY)")
               for line in lines)
    qwen = next(line for line in lines if "local/qwen" in line)
    assert "32,000" in qwen and "$0.5/$1.5" in qwen and "model of agent main" in qwen
    assert any("local/small" in line and "8,000" in line for line in lines)
    rows = json.loads(run(["models", "--json"], capsys)[1])
    local = next(r for r in rows if r["provider"] == "local")
    assert local["key"] == "not needed" and local["models"][0]["contextWindow"] == 32000


@pytest.mark.slow  # the command line end to end
def test_doctor_checks_each_part_in_one_line(isolated_home, capsys, server):
    workspace = isolated_home / "ws"
    (workspace / "memory").mkdir(parents=True)
    write_config(isolated_home, {
        "agents": {"defaults": {"workspace": str(workspace), "model": "local/qwen"}},
        "models": {"providers": {
            "local": {"api": "openai-completions", "baseUrl": server.url + "/v1",
                      "models": [{"id": "qwen"}]},
            "down": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
                     "models": [{"id": "m"}]}}}})
    server.default("GET", "/v1/models", lambda r: Response.json(
        {"object": "list", "data": [{"id": "qwen", "object": "model", "created": 0,
                                     "owned_by": "me"}]}))
    code, out, err = run(["doctor"], capsys)
    lines = out.splitlines()
    assert code == 1, out + err  # the second server is down
    assert lines[0].startswith("ok    config: ") and "is valid" in lines[0]
    assert "ok    model local/qwen: reachable, qwen listed" in lines
    assert any(line.startswith("FAIL  model down/m: unreachable at http://127.0.0.1:9/v1/: ")
               for line in lines)
    assert any(line.startswith("ok    embedder: local/") for line in lines)
    assert any(line.startswith("ok    memory index: ") and "integrity ok" in line
               for line in lines)
    assert f"ok    workspace: {workspace} is writable" in lines
    assert [r.path for r in server.requests] == ["/v1/models"]  # no tokens spent
    assert len(lines) == 6


def test_doctor_reports_a_bad_config_and_a_missing_workspace(isolated_home, capsys):
    write_config(isolated_home, {"agents": {"defaults": {"modle": "x"}}})
    code, out, _ = run(["doctor"], capsys)
    assert code == 1 and out.startswith("FAIL  config: ") and "modle" in out
    write_config(isolated_home, {"agents": {"defaults": {
        "workspace": str(isolated_home / "nowhere"), "memorySearch": {"enabled": False}}}})
    code, out, _ = run(["doctor"], capsys)
    assert "FAIL  model anthropic/claude-sonnet-4-6: no API key for anthropic" in out
    assert "does not exist (run clawd init)" in out and code == 1


@pytest.mark.slow  # the command line end to end
def test_memory_index_prints_a_summary_and_ends_its_progress_line(isolated_home, capsys):
    workspace = isolated_home / "w"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "a.md").write_text("# notes\nthe gateway runs on box7\n")
    write_config(isolated_home, {"agents": {"defaults": {"workspace": str(workspace)}}})
    code, out, err = run(["memory", "index"], capsys)
    assert code == 0, err
    assert out.startswith("1 memory file: 1 indexed (1 chunk), 0 removed")
    assert "Vectors: 1 computed with local." in out
    assert err.startswith("\rindexing [") and err.endswith(" 1/1 chunks\n")
    code, out, err = run(["memory", "index"], capsys)
    assert out == "1 memory file, all up to date.\n" and err == ""
    # a daily log of several sections: more vectors than chunks, and the line says why
    (workspace / "memory" / "b.md").write_text(
        "".join(f"## Topic {i}\n" + f"- a note about topic {i} that runs on for a while\n" * 6
                for i in range(4)))
    code, out, err = run(["memory", "index"], capsys)
    chunks = int(re.search(r"\((\d+) chunks?\)", out).group(1))
    made = int(re.search(r"Vectors: (\d+) computed", out).group(1))
    assert made > chunks, out
    assert "(one per chunk, and one per piece of a chunk with several sections)" in out
