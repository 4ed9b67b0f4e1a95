"""The reference servers people configure first, through ``npx`` (the npm registry reached;
skipped, saying why, when it cannot be): ``@modelcontextprotocol/server-filesystem`` and
``server-memory``. Their annotations decide what asks (a read runs where nobody can approve,
a write is refused), an image is sent once, as an image, and their names fit."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from clawd.config.mcp import McpServer
from clawd.core.events import ToolFinished
from clawd.loop.session import Session
from clawd.mcp.client import McpClients
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.files import file_tools

from conftest import make_runtime

pytestmark = pytest.mark.slow
PACKAGES = ("@modelcontextprotocol/server-filesystem", "@modelcontextprotocol/server-memory")
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
                         "DwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def _reachable() -> str | None:
    """Why the servers cannot be fetched here, or None."""
    if shutil.which("npx") is None or shutil.which("npm") is None:
        return "npx is not installed"
    try:
        done = subprocess.run(["npm", "view", PACKAGES[0], "version"], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "the npm registry did not answer within 30 s"
    return None if done.returncode == 0 else f"the npm registry is not reachable: " \
        f"{(done.stderr.strip().splitlines() or ['?'])[-1]}"


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    why = _reachable()
    if why:
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("shared")
    (folder / "a.txt").write_text("hello from the folder\n")
    (folder / "pixel.png").write_bytes(PIXEL)
    clients = McpClients({
        "files": McpServer(command="npx", args=["-y", PACKAGES[0], str(folder)],
                           connection_timeout_ms=240_000),
        "memory": McpServer(command="npx", args=["-y", PACKAGES[1]],
                            connection_timeout_ms=240_000)},
        logs=tmp_path_factory.mktemp("logs"))
    problems = clients.start()
    if any("did not start" in p for p in problems):
        clients.close()
        pytest.skip(f"the servers did not start here: {problems}")
    yield clients, folder
    clients.close()


def test_a_real_servers_reads_run_and_its_writes_are_refused_where_nobody_can_approve(
        real, tmp_path):
    clients, folder = real
    provider = ScriptedProvider([
        Reply("", [tool("files__read_text_file", path=str(folder / "a.txt"))]),
        Reply("", [tool("files__write_file", path=str(folder / "b.txt"), content="x")]),
        Reply("", [tool("files__read_media_file", path=str(folder / "pixel.png"))]),
        "Done."])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    events = list(Session.open(rt, "agent:main:main").run_turn("read, write, look"))
    finished = [(e.name, e.is_error) for e in events if isinstance(e, ToolFinished)]
    assert finished == [("files__read_text_file", False), ("files__write_file", True),
                        ("files__read_media_file", False)]
    assert not (folder / "b.txt").exists()
    texts = [m.text for m in provider.requests[-1].messages if m.role == "toolResult"]
    assert texts[0].startswith("[from the MCP server files, outside clawd]\nhello")
    assert "needs a person's approval" in texts[1]
    image = provider.requests[-1].messages[-1]
    assert len(image.text) < 200  # the picture went as a picture, not as base64 text too
    assert any(getattr(p, "mime_type", "") == "image/png" for p in image.content)


def test_the_reference_servers_tools_are_named_and_annotated(real):
    clients, _ = real
    names = [t.spec.name for t in clients.tools()]
    assert len(names) == len(set(names)) and all(len(n) <= 64 for n in names)
    assert {"files__write_file", "memory__create_entities", "memory__read_graph"} <= set(names)
    listed = {t.name: t.annotations for t in clients.connections["files"].tools}
    assert listed["read_text_file"]["readOnlyHint"] is True
    assert listed["write_file"]["readOnlyHint"] is False
