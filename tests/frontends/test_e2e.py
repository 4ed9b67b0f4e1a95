"""End to end through the real SDKs: the loop and the CLI against a local HTTP server."""

from __future__ import annotations

import io
import json

import pytest

from clawd.frontends import cli

from fakeserver import FakeServer, anthropic_stream, openai_error, openai_stream

pytestmark = pytest.mark.slow  # the command line end to end, against a local server

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


@pytest.fixture
def setup(isolated_home, server, monkeypatch):
    """A config with a keyless local OpenAI-compatible server and Anthropic pointed at it."""
    workspace = isolated_home / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("Be brief.")
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": "local/qwen-test",
                                "memorySearch": {"enabled": False}}},
        "models": {"providers": {
            "local": {"api": "openai-completions", "baseUrl": server.url + "/v1",
                      "models": [{"id": "qwen-test", "contextWindow": 32000}],
                      "maxRetries": 1},
            "anthropic": {"baseUrl": server.url, "maxRetries": 1}}}}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-key")
    return workspace


def run_cli(args, capsys, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_multi_step_tool_turn_through_openai_sdk(setup, server, capsys):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "Let me write that.", [{"id": "call_1", "name": "write",
                                "arguments": {"path": "notes.md", "content": "alpha"}}]))
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "", [{"id": "call_2", "name": "read", "arguments": {"path": "notes.md"}}]))
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("It says alpha."))
    code, out, err = run_cli(["chat", "-m", "store alpha in notes.md"], capsys)
    assert code == 0, err
    assert "Let me write that." in out and "It says alpha." in out
    assert "· write path='notes.md'" in err and "· write" not in out  # side lines on stderr
    assert (setup / "notes.md").read_text() == "alpha"
    third = server.requests[2].json()
    assert third["messages"][-1]["role"] == "tool" and "alpha" in third["messages"][-1]["content"]
    assert third["messages"][0]["role"] == "system" and "Be brief." in json.dumps(third)
    assert "authorization" in server.requests[0].headers  # a placeholder key is sent


def test_multi_step_tool_turn_through_anthropic_sdk(setup, server, capsys):
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream(
        "Reading.", [{"id": "toolu_1", "name": "read", "arguments": {"path": "AGENTS.md"}}],
        usage={"input_tokens": 900, "cache_read_input_tokens": 100}))
    server.queue("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("It says be brief."))
    code, out, err = run_cli(["chat", "--model", "anthropic/claude-test-1", "--json", "-m",
                              "what does AGENTS.md say?"], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in events] == ["tool", "toolResult", "reply", "done"]
    tool_call, result, reply, done = events
    assert tool_call == {"type": "tool", "id": "toolu_1", "name": "read",
                         "arguments": {"path": "AGENTS.md"}}
    assert result == {"type": "toolResult", "id": "toolu_1", "name": "read", "isError": False,
                      "text": "Be brief.", "truncated": False}
    assert reply == {"type": "reply", "text": "It says be brief.", "aborted": False}
    store = json.loads((setup.parent / ".clawd/agents/main/sessions/sessions.json").read_text())
    assert done == {"type": "done", "sessionKey": "agent:main:main",
                    "sessionId": store["agent:main:main"]["sessionId"],
                    "model": "anthropic/claude-test-1",
                    "usage": {"input": 910, "output": 10, "cacheRead": 100, "cacheWrite": 0},
                    "steps": 2, "aborted": False, "interrupted": False, "failed": False}
    second = server.requests[1].json()
    results = second["messages"][-1]["content"]
    assert results[0]["type"] == "tool_result" and "Be brief." in json.dumps(results)
    assert second["system"][-1].get("cache_control") == {"type": "ephemeral"}


def test_script_from_piped_stdin_with_commands(setup, server, capsys, monkeypatch):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("pong"))
    script = "ping\n\n/status\n/context detail\nping again"  # no final newline
    code, out, err = run_cli(["chat", "--json"], capsys, stdin=script, monkeypatch=monkeypatch)
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    kinds = [(e["type"], e.get("name")) for e in events]
    assert kinds == [("reply", None), ("done", None), ("command", "status"),
                     ("command", "context"), ("reply", None), ("done", None)]
    assert "local/qwen-test" in events[2]["text"] and "32,000" in events[2]["text"]
    assert "AGENTS.md" in events[3]["text"]
    assert len(server.requests) == 2


def test_script_file_and_error_exit_code(setup, server, capsys, tmp_path):
    server.default("POST", OPENAI_PATH, lambda r: openai_error(400, "bad request here"))
    script = tmp_path / "conv.txt"
    script.write_text("hello\n")
    code, out, err = run_cli(["chat", "--script", str(script)], capsys)
    assert code == 1 and "bad request here" in err
    code, _, err = run_cli(["chat", "--script", str(tmp_path / "missing.txt")], capsys)
    assert code == 1 and "cannot read script" in err


def test_script_comment_lines_are_skipped_and_escaped_ones_sent(setup, server, capsys,
                                                                tmp_path):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    script = tmp_path / "conv.txt"
    script.write_text("# a comment\n  # an indented one\n\\# Heading\n"
                      "\\\\# two backslashes\nplain # not a comment\n")
    code, _, err = run_cli(["chat", "--script", str(script)], capsys)
    assert code == 0, err
    sent = [r.json()["messages"][-1]["content"] for r in server.requests]
    assert sent == ["# Heading", "\\# two backslashes", "plain # not a comment"]


def test_json_reply_cut_off_mid_stream_carries_the_partial_text(setup, server, capsys):
    # 1 role chunk + 3 text chunks of 5 characters, then the connection drops
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "The quick brown fox jumps.", cut_after=4))
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream("Sorry, where was I?"))
    code, out, _ = run_cli(["chat", "--json", "-m", "tell me"], capsys)
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and events[0]["type"] == "error"
    assert events[-2] == {"type": "reply", "text": "The quick brown", "aborted": True}
    assert events[-1]["type"] == "done" and events[-1]["failed"] and events[-1]["aborted"]
    # the next request shows the model where its reply was cut off
    assert run_cli(["chat", "-m", "go on"], capsys)[0] == 0
    sent = server.requests[-1].json()["messages"]
    assert sent[-2]["role"] == "assistant"
    assert sent[-2]["content"].startswith("The quick brown")
    assert sent[-2]["content"].endswith("[this reply was cut off here]")


def test_json_stream_prints_deltas_that_add_up_to_the_reply(setup, server, capsys):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "The quick brown fox.", usage={"prompt_tokens": 700, "completion_tokens": 6,
                                       "cached_tokens": 200}))
    code, out, err = run_cli(["chat", "--json", "--stream", "-m", "hi"], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "delta"]
    assert len(deltas) > 1 and "".join(deltas) == "The quick brown fox."
    assert events[0] == {"type": "waiting", "stage": "model"}  # until the first words
    assert [e["type"] for e in events[1 + len(deltas):]] == ["reply", "done"]
    assert events[-1]["usage"] == {"input": 500, "output": 6, "cacheRead": 200, "cacheWrite": 0}
    assert events[-1]["model"] == "local/qwen-test"


def test_json_failed_turn_is_an_error_and_a_done_without_a_reply(setup, server, capsys):
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(
        "", [{"id": "call_9", "name": "read", "arguments": {"path": "missing.md"}}]))
    server.queue("POST", OPENAI_PATH, lambda r: openai_error(400, "bad request here"))
    code, out, _ = run_cli(["chat", "--json", "-m", "read it"], capsys)
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [e["type"] for e in events] == ["tool", "toolResult", "error", "done"]
    result = events[1]
    assert result["id"] == "call_9" and result["isError"] is True and "missing.md" in result["text"]
    assert "bad request here" in events[2]["message"]
    assert events[3]["failed"] is True and events[3]["aborted"] is False
    assert events[3]["usage"]["input"] == 10  # the first call's; the failed one reported none


@pytest.mark.parametrize("problem", ["missing key", "unknown provider", "bad config",
                                     "window too small"])
def test_json_start_up_errors_are_an_error_event_too(isolated_home, capsys, problem):
    state = isolated_home / ".clawd"
    state.mkdir()
    args, expected_code = ["chat", "--json", "-m", "hi"], 1
    if problem == "unknown provider":
        args[1:1] = ["--model", "nosuch/model"]
    elif problem == "bad config":
        (state / "clawd.json").write_text("{agents: {defaults: {modle: 'x'}}}")
        expected_code = 2
    elif problem == "window too small":
        (state / "clawd.json").write_text(json.dumps({
            "agents": {"defaults": {"model": "local/tiny", "memorySearch": {"enabled": False}}},
            "models": {"providers": {"local": {
                "api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
                "models": [{"id": "tiny", "contextWindow": 1500}]}}}}))
    code, out, err = run_cli(args, capsys)
    assert code == expected_code and err.count("\n") == 1
    [event] = [json.loads(line) for line in out.splitlines()]
    assert event == {"type": "error", "message": err.strip().removeprefix("clawd: ")}


def test_missing_key_is_one_line(isolated_home, capsys):
    code, out, err = run_cli(["chat", "-m", "hi"], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "ANTHROPIC_API_KEY" in err
    assert "local OpenAI-compatible server" in err


def test_an_unusable_model_fails_before_the_session_is_touched(isolated_home, capsys):
    state = isolated_home / ".clawd"
    code, _, err = run_cli(["chat", "-m", "hi"], capsys)  # no key for the default model
    assert code == 1 and err.count("\n") == 1
    code, _, err = run_cli(["chat", "--model", "gpt4", "-m", "hi"], capsys)
    assert code != 0 and "PROVIDER/MODEL" in err and err.count("\n") == 1
    sessions = state / "agents" / "main" / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())


def test_a_session_follows_the_configured_model_unless_one_was_chosen(setup, server, capsys):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    server.default("POST", ANTHROPIC_PATH, lambda r: anthropic_stream("ok"))
    config = setup.parent / ".clawd" / "clawd.json"
    assert run_cli(["chat", "-m", "hi"], capsys)[0] == 0
    data = json.loads(config.read_text())
    data["agents"]["defaults"]["model"] = "anthropic/claude-test-1"
    config.write_text(json.dumps(data))
    assert run_cli(["chat", "-m", "hi again"], capsys)[0] == 0
    assert server.requests[-1].path == ANTHROPIC_PATH  # the config change reached it
    store = setup.parent / ".clawd" / "agents" / "main" / "sessions" / "sessions.json"
    assert json.loads(store.read_text())["agent:main:main"]["model"] == "anthropic/claude-test-1"
    # --model is for one run only, as in `llm -m`: the session keeps following the config
    assert run_cli(["chat", "--model", "local/qwen-test", "-m", "once"], capsys)[0] == 0
    assert server.requests[-1].path == OPENAI_PATH
    assert run_cli(["chat", "-m", "back?"], capsys)[0] == 0
    assert server.requests[-1].path == ANTHROPIC_PATH
    assert run_cli(["chat", "-m", "/model"], capsys)[1].strip() == (
        "model: anthropic/claude-test-1 (from the config)")
    # a model pinned with /model sticks, whatever the config says later
    assert run_cli(["chat", "-m", "/model local/qwen-test"], capsys)[0] == 0
    assert run_cli(["chat", "-m", "still local?"], capsys)[0] == 0
    assert server.requests[-1].path == OPENAI_PATH
    code, out, _ = run_cli(["chat", "-m", "/model"], capsys)
    assert out.startswith("model: local/qwen-test (from a pin on this session")
    assert "/model default" in out
    assert run_cli(["chat", "-m", "/model default"], capsys)[1].startswith(
        "model: anthropic/claude-test-1 (from the config")
    assert run_cli(["chat", "-m", "config again"], capsys)[0] == 0
    assert server.requests[-1].path == ANTHROPIC_PATH
    # the transcript names every reply's model the same way: provider/model
    entry = json.loads(store.read_text())["agent:main:main"]
    with open(entry["sessionFile"]) as transcript:
        models = {json.loads(line).get("model") for line in transcript} - {None}
    assert models == {"local/qwen-test", "anthropic/claude-test-1"}


def test_a_pin_to_a_removed_provider_says_so_and_can_be_switched_away(setup, server,
                                                                      capsys):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    config = setup.parent / ".clawd" / "clawd.json"
    data = json.loads(config.read_text())
    data["models"]["providers"]["gone"] = {"api": "openai-completions",
                                           "baseUrl": server.url + "/v1"}
    config.write_text(json.dumps(data))
    assert run_cli(["chat", "-m", "/model gone/m1"], capsys)[0] == 0
    del data["models"]["providers"]["gone"]
    config.write_text(json.dumps(data))
    code, out, err = run_cli(["chat", "-m", "hello"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "pinned to gone/m1, which cannot be used: unknown provider 'gone'" in err
    assert "/model default" in err
    code, out, err = run_cli(["chat", "-m", "/model local/qwen-test"], capsys)
    assert code == 0, err
    assert run_cli(["chat", "-m", "/model default"], capsys)[0] == 0
    code, out, err = run_cli(["chat", "-m", "works again"], capsys)
    assert code == 0 and out.strip() == "ok"


def test_bad_config_is_one_line_naming_key(isolated_home, capsys):
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text("{agents: {defaults: {modle: 'x'}}}")
    code, out, err = run_cli(["chat", "-m", "hi"], capsys)
    assert code == 2 and "agents.defaults.modle" in err and "clawd.json" in err


def test_sessions_list(setup, server, capsys):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    run_cli(["chat", "-m", "hi", "--session", "work"], capsys)
    code, out, _ = run_cli(["sessions", "list"], capsys)
    assert code == 0 and "work" in out and "local/qwen-test" in out
    code, out, _ = run_cli(["sessions", "list", "--json"], capsys)
    [listed] = json.loads(out)
    assert listed["key"] == "agent:main:work" and listed["model"] == "local/qwen-test"


def test_init_dry_run_then_real(isolated_home, capsys, tmp_path):
    ws = tmp_path / "myws"
    code, out, _ = run_cli(["init", "--workspace", str(ws), "--dry-run"], capsys)
    assert code == 0 and "would create" in out and not ws.exists()
    code, out, _ = run_cli(["init", "--workspace", str(ws)], capsys)
    assert (ws / "AGENTS.md").exists() and "created" in out
    code, out, _ = run_cli(["init", "--workspace", str(ws)], capsys)
    assert "0 created" in out


def test_a_hand_broken_session_entry_is_one_line_not_a_traceback(setup, server, capsys,
                                                                  caplog):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("ok"))
    store = setup.parent / ".clawd" / "agents" / "main" / "sessions" / "sessions.json"
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({"agent:main:main": "x"}))
    code, out, err = run_cli(["sessions", "list"], capsys)
    assert code == 0 and "Traceback" not in err
    assert [r.getMessage().count("\n") for r in caplog.records if "malformed" in r.getMessage()
            ] == [0]
    assert run_cli(["chat", "-m", "hi"], capsys)[0] == 0
    assert list(store.parent.glob("sessions.json.corrupt-*"))


def test_version_and_an_empty_message(isolated_home, capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "clawd 0.1.0"
    assert cli.main(["chat", "-m", "  "]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: clawd chat ") and "the message is empty" in err
    # --stream means JSON deltas: never ignored; the usage shown is chat's own
    assert cli.main(["chat", "--stream", "-m", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: clawd chat ") and "add --json" in err


def test_script_with_undo_retry_the_slash_escape_and_a_stray_argument(setup, server, capsys,
                                                                      tmp_path):
    server.default("POST", OPENAI_PATH, lambda r: openai_stream("pong"))
    script = tmp_path / "conv.txt"
    script.write_text("first\n/undo\n//etc/hosts is odd\n/retry\n/status foo\n")
    code, out, err = run_cli(["chat", "--script", str(script)], capsys)
    assert code == 1  # the stray argument
    assert "error: /status takes no arguments (got 'foo')" in err
    assert "undone: “first”" in out and "· sending again: “/etc/hosts is odd”" in err
    users = [[m["content"] for m in r.json()["messages"] if m["role"] == "user"]
             for r in server.requests]
    assert users == [["first"], ["/etc/hosts is odd"], ["/etc/hosts is odd"]]
