"""Whose the MCP servers are: the operator's agent (the default one) gets a server's tools,
another agent or a person's only when the server's ``agents`` names it; an agent of a person
(made by ``clawd users add``, on files and on PostgreSQL) neither sees nor calls the
operator's tools, nor gets ``exec`` or ``extraPaths`` from ``agents.defaults``."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from clawd.config import Config, load_config, resolve_agent
from clawd.config.mcp import Mcp
from clawd.core.errors import ConfigError
from clawd.core.events import ToolFinished
from clawd.frontends.cli import main
from clawd.frontends.compose import build_runtime, with_people
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool

from conftest import transcript_entries

LOOKUP = str(Path(__file__).parents[1] / "mcp_lookup.py")
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("agents, agent, given", [
    (None, "main", True),  # no list: the operator's agent only
    (None, "alice", False),
    (None, "work", False),  # another agent of the config too
    (["main", "Alice"], "alice", True),  # ids in any case
    (["alice"], "main", False),  # a list is the whole list
    (["*"], "bob", True),
    ([], "main", False),
])
def test_a_server_is_the_default_agents_unless_its_agents_say(agents, agent, given):
    server = {"command": "true", **({"agents": agents} if agents is not None else {})}
    mcp = Mcp.model_validate({"servers": {"files": server, "off": {
        "command": "true", "enabled": False, "agents": ["*"]}}})
    assert mcp.for_agent(agent, "main") == (["files"] if given else [])


def test_a_servers_agents_are_ids():
    with pytest.raises(ValueError, match="not an agent's id"):
        Mcp.model_validate({"servers": {"files": {"command": "true", "agents": ["../x"]}}})


@pytest.fixture(params=["files", "postgresql"])
def home(request, isolated_home, monkeypatch, fresh_mcp):
    """A home whose config has the test MCP server and whose defaults would give every agent
    ``exec`` and an extra folder of the operator's; on files or on a fresh database."""
    if request.param == "postgresql":
        monkeypatch.setenv("CLAWD_STORAGE_URL", request.getfixturevalue("pg_url"))

    def write(**server):
        state = isolated_home / ".clawd"
        state.mkdir(exist_ok=True)
        (state / "clawd.json").write_text(json.dumps({
            "agents": {"defaults": {
                "workspace": str(isolated_home / "ws"),
                "tools": {"exec": {"enabled": True, "allowInScripts": True}},
                "memorySearch": {"extraPaths": [str(isolated_home / "operator")]}}},
            "mcp": {"servers": {"lookup": {"command": sys.executable, "args": [LOOKUP],
                                           **server}}}}))
    write()
    return write


def _turn(agent: str) -> tuple[set[str], ToolFinished]:
    """One turn of ``agent`` whose model calls the operator's tool: the tools it was offered,
    and the call's result."""
    provider = ScriptedProvider([Reply("", [tool("lookup__capital", country="Portugal")]),
                                 "done"])
    runtime = dataclasses.replace(build_runtime(load_config(), agent),
                                  models=fixed_models(provider, 200_000))
    session = Session.open(runtime, f"agent:{agent}:main")
    finished = [e for e in session.run_turn("capital of Portugal?")
                if isinstance(e, ToolFinished)]
    assert transcript_entries(session)  # the turn ran, in the agent's own store
    return {s.name for s in provider.requests[0].tools}, finished[0]


def test_a_persons_agent_neither_sees_nor_calls_the_operators_servers(home, capsys):
    assert main(["users", "add", "alice"]) == 0
    capsys.readouterr()
    offered, result = _turn("alice")
    assert not any(name.startswith("lookup__") for name in offered)
    assert "exec" not in offered and "read" in offered
    assert result.is_error and "unknown tool: lookup__capital" in result.text
    from clawd.frontends import compose
    assert not compose._MCP  # no server was started for her
    offered, result = _turn("main")  # the operator's agent still has them
    assert "lookup__capital" in offered and "exec" in offered
    assert not result.is_error and "Lisbon" in result.text


def test_a_server_that_names_a_persons_agent_is_theirs_too(home, capsys):
    assert main(["users", "add", "alice"]) == 0
    assert main(["users", "add", "bob"]) == 0
    capsys.readouterr()
    home(agents=["main", "alice"])
    offered, result = _turn("alice")
    assert "lookup__capital" in offered and not result.is_error
    offered, _ = _turn("bob")
    assert "lookup__capital" not in offered


def test_a_persons_agent_gets_nothing_of_the_host_from_the_defaults(home, capsys):
    assert main(["users", "add", "alice"]) == 0
    capsys.readouterr()
    config = with_people(load_config())
    _, theirs = resolve_agent(config, "alice")
    assert not theirs.tools.exec.enabled and not theirs.tools.exec.allow_in_scripts
    assert theirs.memory_search.extra_paths == []
    _, operators = resolve_agent(config, "main")
    assert operators.tools.exec.enabled and operators.memory_search.extra_paths


def test_an_agent_the_config_lists_keeps_what_the_config_gives_it(isolated_home):
    config = Config.model_validate({"agents": {
        "defaults": {"tools": {"exec": {"enabled": True}}},
        "list": [{"id": "main", "default": True}, {"id": "alice"}]}})
    assert resolve_agent(config, "alice")[1].tools.exec.enabled
    with pytest.raises(ConfigError):
        resolve_agent(config, "nobody")


def test_an_agents_entry_names_the_whole_list_of_its_servers():
    config = Config.model_validate({
        "agents": {"list": [{"id": "main", "default": True, "mcp": ["files"]},
                            {"id": "work", "mcp": ["files", "search"]},
                            {"id": "quiet", "mcp": []}, {"id": "other"}]},
        "mcp": {"servers": {"files": {"command": "true"}, "search": {"command": "true"},
                            "web": {"command": "true", "agents": ["other"]}}}})
    given = {agent: config.mcp.for_agent(agent, "main", next(
        e.mcp for e in config.agents.entries if e.id == agent)) for agent in config.agent_ids()}
    assert given == {"main": ["files"], "work": ["files", "search"], "quiet": [],
                     "other": ["web"]}
    assert resolve_agent(config, "work")[0] == "work"  # mcp is not an agent setting
    from clawd.frontends.cli.mcp import whose

    servers = config.mcp.servers
    assert whose(servers["search"], "main", "search", config) == "for work"
    assert whose(servers["files"], "main", "files", config) == "for main, work"
    with pytest.raises(ValueError, match="agents.list work: mcp names nope"):
        Config.model_validate({"agents": {"list": [{"id": "work", "mcp": ["nope"]}]}})
