"""``clawd mcp add | remove | enable | disable | import`` change the config file in place:
its comments, order and layout kept, the new servers valid, nothing else changed; a Claude
Desktop or Claude Code ``mcpServers`` block is taken as it is."""

from __future__ import annotations

import json
import stat

from clawd.config import load_config
from clawd.config.text import remove_member, set_member
from clawd.frontends.cli import main
from clawd.frontends.cli.mcp_config import from_client_config, server_name

STARTER = """{
  // the starter config: every comment stays
  agents: {
    defaults: { model: "anthropic/claude-sonnet-4-5" },  // the model
  },
  mcp: {
    servers: {
      // the clock
      time: { command: "uvx", args: ["mcp-server-time"] },  // no key
    },
  },
}
"""


def test_members_are_set_and_removed_in_the_text():
    added = set_member(STARTER, ["mcp", "servers", "git"], {"command": "uvx",
                                                             "args": ["mcp-server-git"]})
    assert '      git: { command: "uvx", args: ["mcp-server-git"] },\n    },' in added
    off = set_member(added, ["mcp", "servers", "time", "enabled"], False)
    assert 'time: { command: "uvx", args: ["mcp-server-time"], enabled: false },  // no key' \
        in off
    on = set_member(off, ["mcp", "servers", "time", "enabled"], True)
    assert "enabled: true }" in on
    gone = remove_member(on, ["mcp", "servers", "git"])
    assert "git" not in gone and gone.count("//") == STARTER.count("//")
    assert remove_member(STARTER, ["mcp", "servers", "nothing"]) is None
    fresh = set_member('{"agents": {}}', ["mcp", "servers", "x"], {"url": "http://h/mcp"})
    assert json.loads(fresh) == {"agents": {}, "mcp": {"servers": {"x": {
        "url": "http://h/mcp"}}}}  # a plain JSON file stays plain JSON


def test_server_names_are_made_from_other_clients_names():
    assert server_name("my.files") == "my-files"
    assert server_name("a__b") == "a_b"
    assert server_name("clawd-memory") == "clawd-memory"
    assert len(server_name("x" * 50)) == 32


def test_a_claude_desktop_or_code_block_is_taken_as_it_is(tmp_path):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "my.files": {"type": "stdio", "command": "npx", "args": ["-y", "fs", "/srv"],
                     "env": {"DEBUG": "1"}},
        "tickets": {"type": "http", "url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer tk_1"}},
        "cline": {"command": "x", "disabled": True, "autoApprove": ["read"]},
        "old": {"type": "sse", "url": "https://h/sse"},
        "taken": {"command": "y"}}, "otherSettings": {}}))
    entries, notes = from_client_config(path, {"taken"})
    assert entries == {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "my-files": {"command": "npx", "args": ["-y", "fs", "/srv"], "env": {"DEBUG": "1"}},
        "tickets": {"url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer tk_1"}},
        "cline": {"command": "x", "enabled": False, "autoApprove": ["read"]},
        "old": {"url": "https://h/sse"}}  # its transport is found out at its start
    assert any("taken: mcp.servers.taken is already configured" in n for n in notes)
    assert any("my.files: added as my-files" in n for n in notes)
    code = tmp_path / ".mcp.json"  # Claude Code's project file: the same block
    code.write_text(json.dumps({"mcpServers": {"api": {"type": "http",
                                                       "url": "https://h/mcp"}}}))
    assert from_client_config(code, set())[0] == {"api": {"url": "https://h/mcp"}}


def test_the_cli_edits_the_config_in_place(isolated_home, capsys):
    path = isolated_home / ".clawd" / "clawd.json"
    path.parent.mkdir()
    path.write_text(STARTER)
    path.chmod(0o640)
    assert main(["mcp", "add", "git", "--", "uvx", "mcp-server-git", "--repository",
                 "/srv/x"]) == 0
    assert main(["mcp", "add", "web", "--url", "https://h/mcp", "--header",
                 "Authorization=Bearer abc"]) == 0
    assert main(["mcp", "add", "gh", "--env", "GITHUB_TOKEN=${GITHUB_TOKEN}", "--",
                 "npx", "-y", "server-github"]) == 0
    desktop = isolated_home / "desktop.json"
    desktop.write_text(json.dumps({"mcpServers": {"memory": {
        "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}))
    assert main(["mcp", "import", str(desktop)]) == 0
    assert main(["mcp", "disable", "time"]) == 0
    assert main(["mcp", "remove", "git"]) == 0
    servers = load_config(path).mcp.servers
    assert list(servers) == ["time", "web", "gh", "memory"]
    assert not servers["time"].enabled and servers["web"].headers == {
        "Authorization": "Bearer abc"}
    assert servers["gh"].env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
    assert servers["gh"].args == ["-y", "server-github"]
    text = path.read_text()
    assert "// the starter config: every comment stays" in text and "// no key" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert main(["mcp", "enable", "time"]) == 0
    assert load_config(path).mcp.servers["time"].enabled
    capsys.readouterr()
    for argv, said in [(["mcp", "add", "web", "--url", "https://h/other"], "already configured"),
                       (["mcp", "remove", "nope"], "no MCP server 'nope'"),
                       (["mcp", "add", "both", "--url", "https://h/mcp", "--", "cmd"],
                        "give one of the two")]:
        before = path.read_text()
        assert main(argv) == 2  # a config error
        assert said in capsys.readouterr().err and path.read_text() == before
