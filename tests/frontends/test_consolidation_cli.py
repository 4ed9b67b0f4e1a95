"""``clawd memory consolidate`` end to end through the real OpenAI SDK, against a local
server: a weak-profile model is refused in one line, a strong one writes MEMORY.md, and a
dry run prints the diff and writes nothing."""

from __future__ import annotations

import json

import pytest

from clawd.frontends import cli

from fakeserver import FakeServer, openai_stream

pytestmark = pytest.mark.slow  # the command line end to end, against a local server

OPENAI_PATH = "/v1/chat/completions"
ANSWER = "ADD Facts and references | Budget for the Lisbon trip: 2400 euros | S1\n"


@pytest.fixture
def setup(isolated_home):
    with FakeServer() as server:
        workspace = isolated_home / "ws"
        (workspace / "memory").mkdir(parents=True)
        (workspace / "memory/2026-11-20.md").write_text(
            "# 2026-11-20\n\n- Budget for the Lisbon trip: 2400 euros\n")
        (workspace / "MEMORY.md").write_text("# MEMORY.md\n\n## Facts and references\n")
        state = isolated_home / ".clawd"
        state.mkdir()
        local = {"api": "openai-completions", "baseUrl": server.url + "/v1", "maxRetries": 1,
                 "models": [{"id": "small", "contextWindow": 32000},
                            {"id": "big", "contextWindow": 32000, "profile": "strong"}]}
        (state / "clawd.json").write_text(json.dumps({
            "agents": {"defaults": {"workspace": str(workspace), "model": "local/small",
                                    "memorySearch": {"enabled": False}}},
            "models": {"providers": {"local": local}}}))
        yield workspace, server


def test_a_weak_model_is_refused_in_one_line(setup, capsys):
    workspace, server = setup
    assert cli.main(["memory", "consolidate"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("clawd: not consolidated: local/small runs under the weak model "
                          "profile") and "\n" not in err
    assert server.requests == []


def test_a_dry_run_prints_the_diff_and_a_run_writes(setup, capsys):
    workspace, server = setup
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(ANSWER))
    assert cli.main(["memory", "consolidate", "--dry-run", "--model", "local/big"]) == 0
    out = capsys.readouterr().out
    assert "+- Budget for the Lisbon trip: 2400 euros (memory/2026-11-20.md#L3)" in out
    assert out.rstrip().endswith("dry run, nothing written: 1 added, 0 replaced, "
                                 "0 already there, 0 refused (from 1 note lines)")
    assert "2400" not in (workspace / "MEMORY.md").read_text()
    server.queue("POST", OPENAI_PATH, lambda r: openai_stream(ANSWER))
    assert cli.main(["memory", "consolidate", "--model", "local/big"]) == 0
    assert "2400 euros (memory/2026-11-20.md#L3)" in (workspace / "MEMORY.md").read_text()
    assert "MEMORY.md updated; the previous version is kept" in capsys.readouterr().out
