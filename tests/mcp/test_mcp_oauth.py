"""A remote server behind OAuth (``tests/mcp_oauth.py``: the SDK's server with an
authorization server in memory): without tokens it does not start and says to log in;
``clawd mcp login NAME`` goes through the authorization page (a stand-in browser follows its
redirect back) and keeps the tokens; then the server starts and its tools answer."""

from __future__ import annotations

import json
import stat
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from clawd.config.mcp import McpServer
from clawd.mcp.client import McpClients

from gateway_client import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def secured():
    import uvicorn

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from mcp_oauth import MemoryAuth, build

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    auth = MemoryAuth()
    server = uvicorn.Server(uvicorn.Config(build(base, auth), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"{base}/mcp", auth
    server.should_exit = True
    thread.join(timeout=10)


def test_oauth_login_then_the_servers_tools(secured, isolated_home, capsys, fresh_mcp):
    from clawd.config import load_config
    from clawd.frontends.cli import main
    from clawd.frontends.cli.mcp_login import login

    url, auth = secured
    state = isolated_home / ".clawd"
    state.mkdir()
    (state / "clawd.json").write_text(json.dumps({"mcp": {"servers": {"secured": {
        "url": url, "connectionTimeoutMs": 20_000}}}}))
    before = McpClients({"secured": McpServer(url=url, connection_timeout_ms=20_000)},
                        auth=state / "mcp-auth")
    try:
        problems = before.start()
    finally:
        before.close()
    assert problems == ["mcp: secured did not start: secured asks for an OAuth login: run "
                        "clawd mcp login secured"]
    opened: list[str] = []

    def browser(address: str) -> None:  # a person who clicks "allow"
        opened.append(address)
        httpx.get(address, follow_redirects=True, timeout=10)

    assert login(load_config(), "secured", open_url=browser) == 0
    said = capsys.readouterr().out
    assert "secured: logged in (7 tools)" in said and opened and opened[0] in said
    kept = state / "mcp-auth" / "secured.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["tokens"]["access_token"] in auth.tokens
    after = McpClients({"secured": McpServer(url=url, connection_timeout_ms=20_000)},
                       auth=state / "mcp-auth")
    try:
        assert after.start() == []
        out = after.call("secured", "capital", {"country": "Norway"})
    finally:
        after.close()
    assert not out.is_error and out.text.endswith("Oslo.")
    assert auth.authorized == 1  # the kept tokens served the second start
    assert main(["mcp", "list"]) == 0  # a chat's way: the kept tokens, no login
