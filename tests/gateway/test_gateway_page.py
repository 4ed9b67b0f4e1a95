"""The web chat's files and the context meter's route, driven in-process: the page is
served without a token and holds no secret, under a policy that keeps it to its own origin;
only the page's files are served; the meter reads the session's context size."""

from __future__ import annotations

import re

import pytest

from clawd.frontends.gateway import policy
from clawd.providers.scripted import ScriptedProvider

from gateway_client import AUTH, TOKEN, gateway, send

pytestmark = pytest.mark.slow  # the in-process client runs the app on a thread


def test_the_page_and_its_files_need_no_token_and_hold_no_secret(tmp_path, one_or_two_workers):
    with gateway(tmp_path, ScriptedProvider()) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert page.headers["referrer-policy"] == "no-referrer"
        assert page.headers["x-content-type-options"] == "nosniff"
        served = [page.text]
        for name in re.findall(r'(?:src|href)="/ui/([^"]+)"', page.text):
            asset = client.get(f"/ui/{name}")
            assert asset.status_code == 200, name
            served.append(asset.text)
        for name in ("chat.js", "log.js", "api.js", "view.js", "markdown.js"):
            asset = client.get(f"/ui/{name}")
            assert asset.headers["content-type"].startswith("text/javascript"), name
            served.append(asset.text)
        assert all(TOKEN not in text for text in served)
        # nothing from another host: no absolute URL is loaded by the page
        assert not re.search(r'(?:src|href)="(?:https?:)?//', page.text)
        # the page reads the token from storage or a fragment, never from the query string
        api = client.get("/ui/api.js").text
        assert "location.search" not in api.replace("location.pathname + location.search", "")


def test_only_the_pages_files_are_served_and_only_read(tmp_path, one_or_two_workers):
    with gateway(tmp_path, ScriptedProvider()) as client:
        for path in ("/ui/missing.js", "/ui/.hidden.js", "/ui/page.py", "/ui/chat"):
            assert client.get(path).status_code == 404, path
        # a path of more than one part is not a page file: it needs the token, and with it
        # there is no such route
        for path in ("/ui/..%2Fnative.py", "/ui/static/chat.js"):
            assert client.get(path).status_code == 401, path
            assert client.get(path, headers=AUTH).status_code == 404, path
        assert client.post("/", content=b"x").status_code in (401, 405)
        # the Host check holds for the page too (DNS rebinding)
        assert client.get("/", headers={"Host": "evil.example"}).status_code == 403
        assert client.get("/api/agents").status_code == 401


def test_open_paths_are_the_health_check_and_the_page_only():
    assert policy.needs_no_token("/") and policy.needs_no_token("/health")
    assert policy.needs_no_token("/ui/chat.js")
    for path in ("/ui/", "/ui/a/b.js", "/api/sessions", "/openapi.json", "/v1/models", "//"):
        assert not policy.needs_no_token(path), path


def test_the_context_route_gives_the_meter(tmp_path, one_or_two_workers):
    with gateway(tmp_path, ScriptedProvider(default="ok")) as client:
        before = client.get("/api/sessions/main/context", headers=AUTH).json()
        assert before["used"] is None and before["sessionId"] is None
        assert before["window"] == 200_000 and 0 < before["flushAt"] < before["compactAt"]
        # before the first message the meter has the fixed layers, as /status counts them
        status = next(e["text"] for e in send(client, "/status") if e["type"] == "command")
        counted = re.search(r"Context: +([\d,]+) / ", status)
        assert counted and before["fixed"] == int(counted.group(1).replace(",", "")) > 0
        send(client, "hello")
        after = client.get("/api/sessions/main/context", headers=AUTH).json()
        assert after["used"] > 0 and after["sessionId"] and after["model"]
        assert after["fixed"] is None  # the reported size is what counts now
        assert after["busy"] == {"running": None, "queued": 0}
        assert client.get("/api/sessions/main/context").status_code == 401
        described = client.get("/openapi.json", headers=AUTH).json()["paths"]
        assert "/api/sessions/{key}/context" in described and "/" in described
    assert set(described["/api/sessions/{key}"]) == {"patch", "delete"}
