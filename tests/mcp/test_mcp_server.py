"""clawd's memory for MCP clients, driven by the SDK's own client: ``clawd mcp serve`` as a
child process over stdio, and ``/mcp`` of a running gateway over streamable HTTP, where a
person's token reaches their own agent's memory and nobody else's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from datetime import date
from pathlib import Path

import pytest

from clawd.frontends.cli import main

from gateway_client import free_port

pytestmark = pytest.mark.slow
TOKEN = "gateway-token-0123456789abcdef"


def _home(isolated_home: Path, **defaults) -> Path:
    workspace = isolated_home / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Memory\n\n- The user's cat is called Miso.\n")
    state = isolated_home / ".clawd"
    state.mkdir(exist_ok=True)
    (state / "clawd.json").write_text(json.dumps({"agents": {"defaults": {
        "workspace": str(workspace), **defaults}}}))
    return workspace


def _text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def _session(read_only: bool, steps):
    from mcp import Client, StdioServerParameters

    args = ["-m", "clawd", "mcp", "serve"] + (["--read-only"] if read_only else [])
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        return await steps(client)


def test_mcp_serve_offers_search_get_and_add_to_an_sdk_client(isolated_home):
    workspace = _home(isolated_home)

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(tools) == ["memory_add", "memory_get", "memory_search"]
        assert "from" in tools["memory_get"].input_schema["properties"]
        reads = {name: tool.annotations.read_only_hint for name, tool in tools.items()}
        assert reads == {"memory_add": False, "memory_get": True, "memory_search": True}
        assert not tools["memory_add"].annotations.destructive_hint
        added = await client.call_tool("memory_add", {
            "text": "Decided to host the family wiki on PostgreSQL 16."})
        junk = await client.call_tool("memory_add", {"text": "2026-11-27 12:00"})
        found = await client.call_tool("memory_search", {"query": "family wiki database"})
        cat = await client.call_tool("memory_search", {"query": "what is the cat called"})
        got = await client.call_tool("memory_get", {"path": "MEMORY.md", "from": 3,
                                                    "lines": 1})
        outside = await client.call_tool("memory_get", {"path": "../etc/passwd"})
        return added, junk, found, cat, got, outside

    added, junk, found, cat, got, outside = asyncio.run(_session(False, steps))
    today = date.today().isoformat()
    assert not added.is_error and _text(added) == f"added to memory/{today}.md"
    log = (workspace / "memory" / f"{today}.md").read_text()
    assert "- Decided to host the family wiki on PostgreSQL 16." in log
    assert junk.is_error and "not a note" in _text(junk) and "12:00" not in log
    assert "PostgreSQL 16" in _text(found)
    assert json.loads(_text(cat))["results"][0]["path"] == "MEMORY.md"
    assert _text(got).strip().endswith("The user's cat is called Miso.")
    assert outside.is_error and "memory_get reads only" in _text(outside)


def test_mcp_serve_read_only_has_no_add(isolated_home):
    workspace = _home(isolated_home)

    async def steps(client):
        names = sorted(t.name for t in (await client.list_tools()).tools)
        forced = await client.call_tool("memory_add", {"text": "A note that must not land."})
        return names, forced

    names, forced = asyncio.run(_session(True, steps))
    assert names == ["memory_get", "memory_search"]
    assert forced.is_error and not list((workspace / "memory").iterdir())


# --- /mcp of the gateway -------------------------------------------------------------------


@pytest.fixture
def served(isolated_home, capsys):
    """``clawd serve`` in this process (uvicorn in a thread) over the default agent and
    alice's, alice with a person's token of her own; the defaults name a folder of the
    operator's in ``extraPaths``."""
    import uvicorn

    from clawd.config import load_config
    from clawd.frontends.gateway.agents import ServedAgents
    from clawd.frontends.gateway.app import create_app

    operator = isolated_home / "operator"
    operator.mkdir()
    (operator / "vault.md").write_text("- The operator's vault PIN is 9911.\n")
    workspace = _home(isolated_home, memorySearch={"extraPaths": [str(operator)]})
    assert main(["users", "add", "alice"]) == 0
    alice = capsys.readouterr().out.strip().splitlines()[-1]
    theirs = Path(str(workspace) + "-alice")
    (theirs / "memory").mkdir(parents=True)
    (theirs / "MEMORY.md").write_text("- Alice's locker code is 4242.\n")
    config = load_config()
    app = create_app(config, ServedAgents.of_config(config), TOKEN)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", alice
    server.should_exit = True
    thread.join(timeout=20)


async def _http(url: str, token: str | None, steps):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, Client(
            streamable_http_client(url, http_client=http), mode="legacy") as client:
        return await steps(client)


def test_gateway_mcp_reaches_only_the_tokens_own_memory(served):
    url, alice = served

    async def search(client):
        names = sorted(t.name for t in (await client.list_tools()).tools)
        hits = await client.call_tool("memory_search", {"query": "locker code cat"})
        return names, _text(hits)

    names, as_owner = asyncio.run(_http(url, TOKEN, search))
    assert names == ["memory_add", "memory_get", "memory_search"]
    assert "Miso" in as_owner and "4242" not in as_owner
    _, as_alice = asyncio.run(_http(url, alice, search))
    assert "4242" in as_alice and "Miso" not in as_alice
    _, picked = asyncio.run(_http(url + "?agent=alice", TOKEN, search))
    assert "4242" in picked  # the owner's token reaches every agent, when it names one

    import httpx
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert httpx.post(url, json=body).status_code == 401
    assert httpx.post(url, json=body, headers={"Authorization": "Bearer wrong-token-xx"}
                      ).status_code == 401
    assert httpx.post(url + "?agent=main", json=body,
                      headers={"Authorization": f"Bearer {alice}"}).status_code == 403


def test_gateway_mcp_gives_a_person_nothing_of_the_operators(served, isolated_home):
    """Neither the folder the defaults' ``extraPaths`` name, nor main's files by a path out
    of alice's workspace, nor main's memory through a session the owner opened."""
    url, alice = served
    vault = str(isolated_home / "operator" / "vault.md")

    async def look(client):
        hits = await client.call_tool("memory_search", {"query": "vault PIN"})
        got = await client.call_tool("memory_get", {"path": vault})
        climbed = await client.call_tool("memory_get", {"path": "../ws/MEMORY.md"})
        return _text(hits), got, climbed

    hits, got, _ = asyncio.run(_http(url, TOKEN, look))
    assert "9911" in hits and "9911" in _text(got)  # the operator's agent reads its folder
    hits, got, climbed = asyncio.run(_http(url, alice, look))
    assert "9911" not in hits and got.is_error and "9911" not in _text(got)
    assert climbed.is_error and "Miso" not in _text(climbed)

    import httpx
    begin = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    opened = httpx.post(url, json=begin, headers={**accept, "Authorization": f"Bearer {TOKEN}"})
    session = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "memory_get", "arguments": {"path": "MEMORY.md"}}}
    theirs = httpx.post(url, json=call, headers={
        **accept, "Authorization": f"Bearer {alice}", "mcp-session-id": session})
    assert "Miso" not in theirs.text, theirs.text  # a call runs as the token's agent
    assert "4242" in theirs.text, theirs.text  # alice's own MEMORY.md


def test_gateway_mcp_refuses_a_persons_note_past_their_quota(served, isolated_home):
    """``memory_add`` through ``/mcp``: a person's note over ``gateway.quotas.noteBytes``
    (65,536 by default) is an error result and nothing is written; a short one is kept."""
    url, alice = served
    big = "Alice likes " + "very " * 14_000 + "long notes."

    async def add(client):
        refused = await client.call_tool("memory_add", {"text": big})
        kept = await client.call_tool("memory_add", {"text": "Alice prefers tea to coffee."})
        return refused, kept

    refused, kept = asyncio.run(_http(url, alice, add))
    assert refused.is_error and "gateway.quotas.noteBytes" in _text(refused)
    assert not kept.is_error, _text(kept)
    theirs = isolated_home / "ws-alice"
    written = "".join(p.read_text() for p in (theirs / "memory").glob("*.md"))
    assert "tea to coffee" in written and "very very" not in written


# --- files changed while serving; a home that was never made -------------------------------

QUOKKA = "- Decided to name the new server quokka, after the animal."


async def _poll(client, query: str, word: str, seconds: float) -> str:
    deadline, text = time.monotonic() + seconds, ""
    while time.monotonic() < deadline:
        text = _text(await client.call_tool("memory_search", {"query": query}))
        if word in text:
            break
        await asyncio.sleep(0.5)
    return text


def test_mcp_serve_finds_a_note_written_after_it_started(isolated_home):
    workspace = _home(isolated_home)

    async def steps(client):
        before = _text(await client.call_tool("memory_search", {"query": "quokka server"}))
        (workspace / "memory" / "2026-11-20.md").write_text(f"# 2026-11-20\n\n{QUOKKA}\n")
        return before, await _poll(client, "quokka server", "quokka", 30)

    before, after = asyncio.run(_session(False, steps))
    assert "quokka" not in before and "quokka" in after


def test_gateway_mcp_finds_a_note_written_after_it_started(served, isolated_home):
    url, _ = served
    workspace = isolated_home / "ws"

    async def steps(client):
        before = _text(await client.call_tool("memory_search", {"query": "quokka server"}))
        (workspace / "memory" / "2026-11-20.md").write_text(f"# 2026-11-20\n\n{QUOKKA}\n")
        return before, await _poll(client, "quokka server", "quokka", 30)

    before, after = asyncio.run(_http(url, TOKEN, steps))
    assert "quokka" not in before and "quokka" in after


def test_mcp_serve_in_a_home_never_made_says_so_and_creates_nothing(tmp_path):
    import subprocess

    home = tmp_path / "never-made"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    env.pop("CLAWD_HOME", None)
    env.pop("CLAWD_CONFIG", None)
    done = subprocess.run([sys.executable, "-m", "clawd", "mcp", "serve"], env=env,
                          cwd=tmp_path, input="", capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "no memory to serve" in done.stderr and "clawd init" in done.stderr
    assert not (home / ".clawd").exists()


def test_mcp_serve_offers_the_notes_as_resources(isolated_home):
    workspace = _home(isolated_home)
    (workspace / "memory" / "2026-11-20.md").write_text("# 2026-11-20\n\n- Bought a kayak.\n")
    (workspace / "SOUL.md").write_text("not a note")

    async def steps(client):
        listed = (await client.list_resources()).resources
        read = await client.read_resource("memory:///memory/2026-11-20.md")
        try:
            await client.read_resource("memory:///SOUL.md")
            refused = False
        except Exception:  # noqa: BLE001 - the SDK raises the server's error
            refused = True
        return listed, read, refused

    listed, read, refused = asyncio.run(_session(True, steps))
    assert [r.uri for r in listed] == ["memory:///MEMORY.md", "memory:///memory/2026-11-20.md"]
    assert "Bought a kayak." in read.contents[0].text
    assert refused
