"""MCP servers' tools for the model (``clawd.mcp``): names, schemas and results made
clawd's (no SDK), then real servers built with the SDK: a stdio child (a tool that answers,
one that fails, one that hangs past its time-out, one that exits mid-call, one with an
image) and the same tools over streamable HTTP behind a header."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from pathlib import Path

import pytest

from clawd.config.mcp import Mcp, McpServer
from clawd.core.messages import ToolSpec
from clawd.core.tokens import estimate_tools
from clawd.mcp.client import McpClients
from clawd.mcp.shapes import MCP_SHARE, over_cap, read_result, tool_name, wire_schema

from gateway_client import free_port

LOOKUP = str(Path(__file__).parents[1] / "mcp_lookup.py")
SECRET = "sekret-lookup-key-123"


def stdio(*extra: str, **kw) -> McpServer:
    return McpServer(command=sys.executable, args=[LOOKUP, *extra], **kw)


# --- shapes -------------------------------------------------------------------------------

def test_tool_names_fit_both_wire_formats():
    assert tool_name("lookup", "capital") == "lookup__capital"
    odd = tool_name("lookup", "get.weather/now")
    assert odd.startswith("lookup__get_weather_now_") and len(odd) <= 64
    assert tool_name("lookup", "get.weather/now") != tool_name("lookup", "get_weather_now")
    long = tool_name("s", "x" * 100)
    assert len(long) == 64 and long != tool_name("s", "x" * 99)


@pytest.mark.parametrize("name", ["lookup", "my-tools", "a_b", "X1"])
def test_server_names_that_start_tool_names(name):
    Mcp.model_validate({"servers": {name: {"command": "x"}}})


@pytest.mark.parametrize("name", ["a__b", "_x", "has space", "dot.ted", "é", "x" * 33])
def test_server_names_refused(name):
    with pytest.raises(ValueError, match="server name"):
        Mcp.model_validate({"servers": {name: {"command": "x"}}})


@pytest.mark.parametrize("entry, why", [
    ({}, "exactly one"), ({"command": "x", "url": "http://h/mcp"}, "exactly one"),
    ({"url": "http://h/mcp", "env": {"A": "b"}}, "takes headers"),
    ({"command": "x", "headers": {"A": "b"}}, "takes env"),
    ({"url": "h/mcp"}, "not an http"), ({"command": "x", "requestTimeoutMs": "5"}, "number")])
def test_server_entries_refused_in_one_line(entry, why):
    with pytest.raises(ValueError, match=why):
        McpServer.model_validate(entry)


def test_schema_refs_are_written_out_and_the_top_is_an_object():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "type": "object", "$defs": {"Place": {"type": "object", "properties": {
                  "city": {"type": "string"}, "near": {"$ref": "#/$defs/Place"}}}},
              "properties": {"where": {"$ref": "#/$defs/Place", "description": "a place"}},
              "required": ["where", "ghost"]}
    out = wire_schema(schema)
    assert out["type"] == "object" and "$defs" not in out and "$schema" not in out
    where = out["properties"]["where"]
    assert where["description"] == "a place" and where["properties"]["city"] == {
        "type": "string"}
    assert "$ref" not in str(out)  # the recursion is cut, not followed for ever
    assert out["required"] == ["where"]


def test_schema_with_combiners_at_the_top_merges_their_properties():
    out = wire_schema({"anyOf": [{"type": "object", "properties": {"id": {"type": "integer"}}},
                                 {"type": "object", "properties": {"name": {
                                     "type": "string"}}}]})
    assert out == {"type": "object", "properties": {"id": {"type": "integer"},
                                                    "name": {"type": "string"}}}
    assert wire_schema(None) == {"type": "object", "properties": {}}
    assert wire_schema({"type": "object"}) == {"type": "object", "properties": {}}


class Block:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def test_results_become_text_and_images():
    result = Block(content=[
        Block(type="text", text="Lisbon"),
        Block(type="image", data="AAAA", mime_type="image/png"),
        Block(type="resource", resource=Block(uri="file:///a.txt", mime_type="text/plain",
                                              text="inside")),
        Block(type="resource", resource=Block(uri="file:///b.bin", mime_type=None, blob="x")),
        Block(type="resource_link", name="doc", uri="https://example.org/doc"),
        Block(type="audio", data="x", mime_type="audio/wav")],
        structured_content=None, is_error=False)
    out = read_result(result)
    assert out.text.startswith("Lisbon\n")
    assert "Lisbon" in out.text and "inside" in out.text and "b.bin: binary, not shown" in (
        out.text) and "[link doc: https://example.org/doc]" in out.text
    assert "[audio content, not shown]" in out.text
    assert [(i.data, i.mime_type) for i in out.images] == [("AAAA", "image/png")]
    structured = read_result(Block(content=[], structured_content={"a": 1},
                                        is_error=False))
    assert structured.text.endswith('{"a": 1}')
    failed = read_result(Block(content=[], structured_content=None, is_error=True))
    assert failed.is_error and failed.text == "(the tool failed and said nothing)"


def test_cap_keeps_the_first_tools_within_count_and_window_share():
    built_in = ToolSpec("read", "read a file", {"type": "object", "properties": {}})
    specs = [built_in] + [ToolSpec(f"s__t{i}", "a tool " * 20, {
        "type": "object", "properties": {"q": {"type": "string"}}}, origin="s")
        for i in range(10)]
    assert over_cap(specs, None, 1_000_000) == frozenset()
    assert over_cap(specs, 3, 1_000_000) == {f"s__t{i}" for i in range(3, 10)}
    one = estimate_tools([specs[1]])
    small = over_cap(specs, None, (2 * one + 1) * MCP_SHARE)
    assert small == {f"s__t{i}" for i in range(2, 10)}
    assert "read" not in over_cap(specs, 0, 1000)


# --- a real stdio server ----------------------------------------------------------------


@pytest.fixture(scope="module")
def lookup(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    # Starting a child that imports the SDK takes seconds on a loaded machine: lookup and bad
    # get a minute each (a start is bounded by connectionTimeoutMs, not requestTimeoutMs).
    clients = McpClients({
        "lookup": stdio(env={"LOOKUP_KEY": SECRET}, request_timeout_ms=1500,
                        connection_timeout_ms=60_000),
        "bad": stdio("--fail", env={"LOOKUP_KEY": SECRET}, connection_timeout_ms=60_000),
        "hang": stdio("--hang", connection_timeout_ms=800),
        "off": stdio(enabled=False)}, logs=logs)
    started = time.monotonic()
    problems = clients.start()
    clients.elapsed = time.monotonic() - started
    clients.first_problems = problems
    yield clients
    clients.close()


@pytest.mark.slow
def test_servers_start_side_by_side_and_a_failed_one_is_one_line(lookup):
    # the hanging one is bounded by its own 0.8 s, not by the 15 s default nor its 60 s hang;
    # the rest is the others' start, which on a loaded machine takes seconds
    assert lookup.elapsed < 12
    assert lookup.first_problems == [
        "mcp: bad did not start: Connection closed (its stderr: lookup: cannot open the "
        "table)", "mcp: hang did not start: no answer within 0.8 s (connectionTimeoutMs)"]
    states = {s.name: (s.transport, s.state, s.tools) for s in lookup.states()}
    assert states == {"lookup": ("stdio", "ready", 7), "bad": ("stdio", "failed", 0),
                      "hang": ("stdio", "failed", 0), "off": ("", "disabled", 0)}
    names = [t.spec.name for t in lookup.tools()]
    assert names == ["lookup__capital", "lookup__order_status", "lookup__broken",
                     "lookup__slow", "lookup__die", "lookup__picture", "lookup__whoami"]
    capital = lookup.tools()[0]
    assert capital.spec.origin == "lookup" and not capital.shared
    assert capital.spec.parameters["required"] == ["country"]



@pytest.mark.slow
def test_a_start_slower_than_a_request_may_take_is_bounded_by_the_connection_timeout(tmp_path):
    clients = McpClients({"late": stdio("--slow-start", request_timeout_ms=500,
                                        connection_timeout_ms=60_000)}, logs=tmp_path)
    try:
        assert clients.start() == []
        assert [(s.state, s.tools) for s in clients.states()] == [("ready", 7)]
    finally:
        clients.close()

@pytest.mark.slow
def test_calls_answer_fail_time_out_and_survive_a_dead_server(lookup):
    ok = lookup.call("lookup", "capital", {"country": "Portugal"})
    assert not ok.is_error and ok.text.endswith("The capital of Portugal is Lisbon.")
    failed = lookup.call("lookup", "broken", {})
    assert failed.is_error
    started = time.monotonic()
    slow = lookup.call("lookup", "slow", {"seconds": 20})
    assert slow.is_error and "did not answer within 1.5 s (requestTimeoutMs)" in slow.text
    assert time.monotonic() - started < 5
    died = lookup.call("lookup", "die", {})
    assert died.is_error and "stopped during the call" in died.text
    again = lookup.call("lookup", "capital", {"country": "Norway"})  # started again
    assert not again.is_error and again.text.endswith("Oslo.")
    assert lookup.call("lookup", "whoami", {}).text.endswith(f"env={SECRET}")


@pytest.mark.slow
def test_an_image_comes_back_as_an_image(lookup):
    out = lookup.call("lookup", "picture", {})
    assert out.text.endswith("one pixel") and out.images[0].mime_type == "image/png"


@pytest.mark.slow
def test_secrets_never_reach_the_lines(tmp_path):
    clients = McpClients({"bad": McpServer(command=sys.executable, args=[
        "-c", f"import sys; print('token {SECRET} refused', file=sys.stderr); sys.exit(2)"],
        env={"LOOKUP_KEY": SECRET})}, logs=tmp_path)
    try:
        problems = clients.start()
    finally:
        clients.close()
    assert problems and "refused" in problems[0] and SECRET not in problems[0]
    assert "***" in problems[0]


@pytest.mark.slow
def test_a_server_killed_between_calls_is_started_again_without_a_failed_call(tmp_path):
    clients = McpClients({"lookup": stdio()}, logs=tmp_path)
    try:
        clients.start()
        connection = clients.connections["lookup"]
        assert clients.call("lookup", "capital", {"country": "kenya"}).text.endswith(
            "Nairobi.")
        connection._last = 0.0  # quiet for a while: the next call pings first
        clients.call("lookup", "die", {})  # the server is gone
        connection._last = 0.0
        out = clients.call("lookup", "capital", {"country": "kenya"})
        assert not out.is_error and out.text.endswith("Nairobi.")
    finally:
        clients.close()


# --- the same tools over streamable HTTP --------------------------------------------------


@contextlib.contextmanager
def served(app):
    """``app`` on uvicorn in a thread on 127.0.0.1; its base URL while the block runs."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def lookup_server():
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from mcp_lookup import build

    return build()


@pytest.fixture(scope="module")
def http_lookup():
    from starlette.responses import PlainTextResponse

    app = lookup_server().streamable_http_app()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and (
                dict(scope["headers"]).get(b"x-lookup-key") != SECRET.encode()):
            await PlainTextResponse("no key", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    with served(guarded) as base:
        yield f"{base}/mcp"


@pytest.mark.slow
def test_http_server_with_its_headers(http_lookup, tmp_path):
    clients = McpClients({
        "web": McpServer(url=http_lookup, headers={"X-Lookup-Key": SECRET},
                         request_timeout_ms=1500),
        "nokey": McpServer(url=http_lookup, connection_timeout_ms=5000)}, logs=tmp_path)
    try:
        problems = clients.start()
        assert [p.split(":")[1].strip() for p in problems] == ["nokey did not start"]
        assert SECRET not in problems[0]
        assert "refused the request (HTTP 401 Unauthorized): check mcp.servers.nokey.headers" \
            in problems[0]
        out = clients.call("web", "capital", {"country": "portugal"})
        assert not out.is_error and out.text.endswith("Lisbon.")
        slow = clients.call("web", "slow", {"seconds": 10})
        assert slow.is_error and "requestTimeoutMs" in slow.text
        assert clients.call("web", "capital", {"country": "norway"}).text.endswith("Oslo.")
    finally:
        clients.close()


@pytest.mark.slow
def test_a_server_that_forgot_its_session_is_not_the_persons_concern(tmp_path, capfd):
    """A server answering 404 to the DELETE that ends a session (it forgot the session,
    as after a restart): the SDK's "Session termination failed: 404" goes to logs/mcp.log,
    never to the terminal."""
    from starlette.responses import PlainTextResponse

    app = lookup_server().streamable_http_app()

    async def forgetful(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await PlainTextResponse("no such session", status_code=404)(scope, receive, send)
            return
        await app(scope, receive, send)

    with served(forgetful) as base:
        clients = McpClients({"web": McpServer(url=f"{base}/mcp")}, logs=tmp_path)
        try:
            assert clients.start() == []
            assert clients.call("web", "capital", {"country": "kenya"}).text.endswith(
                "Nairobi.")
        finally:
            clients.close()
    out, err = capfd.readouterr()
    assert "Session termination failed" not in out + err
    assert "Session termination failed: 404" in (tmp_path / "mcp.log").read_text()


@pytest.mark.slow
def test_a_url_that_speaks_only_legacy_sse_is_spoken_to_so_and_nothing_is_said_plainly(
        tmp_path):
    with served(lookup_server().sse_app()) as base:
        clients = McpClients({
            "old": McpServer(url=f"{base}/sse", connection_timeout_ms=10_000),
            "none": McpServer(url=f"{base}/nothing?api_key=abcd-1234",
                              connection_timeout_ms=5000)}, logs=tmp_path)
        try:
            problems = clients.start()
            states = {s.name: (s.transport, s.state, s.tools) for s in clients.states()}
            out = clients.call("old", "capital", {"country": "Kenya"})
        finally:
            clients.close()
    assert problems == [
        "mcp: none did not start: there is no MCP endpoint at this URL (HTTP 404 Not Found)"]
    assert states["old"] == ("sse", "ready", 7)
    assert not out.is_error and out.text.endswith("Nairobi.")
