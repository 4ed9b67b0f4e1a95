"""The gateway on a shared machine and a hostile web: a foreign Host (DNS rebinding) or
Origin is refused, no CORS unless configured, failed authentication is rate-limited, and a
body too large is refused with 413 before anything is written."""

from __future__ import annotations

import pytest

from clawd.providers.scripted import ScriptedProvider

from gateway_client import AUTH, gateway

pytestmark = pytest.mark.slow  # the in-process client runs the app on a thread


def test_a_foreign_host_header_is_refused(tmp_path):
    with gateway(tmp_path, ScriptedProvider(), raw={"allowedHosts": ["clawd.lan"]}) as client:
        rebound = client.get("/api/sessions", headers={**AUTH, "Host": "evil.example:18789"})
        assert rebound.status_code == 403
        assert rebound.json()["error"]["type"] == "host_not_allowed"
        assert client.get("/health", headers={"Host": "evil.example"}).status_code == 403
        for host in ("localhost:18789", "clawd.lan", "[::1]:18789"):
            assert client.get("/api/sessions", headers={**AUTH, "Host": host}).status_code \
                == 200, host


def test_a_state_changing_request_from_another_origin_is_refused(tmp_path):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider) as client:
        cross = client.post("/api/sessions/main/messages", json={"text": "hi"},
                            headers={**AUTH, "Origin": "https://evil.example"})
        assert cross.status_code == 403 and cross.json()["error"]["type"] == \
            "origin_not_allowed"
        put = client.put("/api/files/notes.md", json={"content": "x"},
                         headers={**AUTH, "Origin": "null"})
        assert put.status_code == 403 and not (tmp_path / "ws" / "notes.md").exists()
        # reading is not changing: the browser's same-origin rule keeps the answer from the
        # page, and there are no CORS headers to lift it
        read = client.get("/api/sessions", headers={**AUTH, "Origin": "https://evil.example"})
        assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
        own = client.post("/api/sessions/main/messages", json={"text": "hi"},
                          headers={**AUTH, "Origin": "http://127.0.0.1:18789"})
        assert own.status_code == 200
    assert provider.requests and len(provider.requests) == 1  # only the own origin's


def test_no_cors_unless_configured(tmp_path):
    preflight = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    with gateway(tmp_path, ScriptedProvider()) as client:
        refused = client.options("/api/sessions/main/messages", headers=preflight)
        assert "access-control-allow-origin" not in refused.headers
    with gateway(tmp_path, ScriptedProvider(default="ok"),
                 raw={"cors": {"origins": ["http://localhost:3000"]}}) as client:
        allowed = client.options("/api/sessions/main/messages", headers=preflight)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
        other = client.options("/api/sessions/main/messages",
                               headers={**preflight, "Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        sent = client.post("/api/sessions/main/messages", json={"text": "hi"},
                           headers={**AUTH, "Origin": "http://localhost:3000"})
        assert sent.status_code == 200
        assert sent.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_failed_authentication_is_rate_limited(tmp_path):
    raw = {"auth": {"rateLimit": {"maxAttempts": 3, "lockoutSeconds": 120}}}
    with gateway(tmp_path, ScriptedProvider(), raw=raw) as client:
        wrong = {"Authorization": "Bearer not-the-token-at-all"}
        assert [client.get("/api/sessions", headers=wrong).status_code
                for _ in range(2)] == [401, 401]
        locked = client.get("/api/sessions", headers=wrong)
        assert locked.status_code == 429 and locked.headers["Retry-After"] == "120"
        # locked out: the right token waits too, so guessing gains nothing
        later = client.get("/api/sessions", headers=AUTH)
        assert later.status_code == 429 and 1 <= int(later.headers["Retry-After"]) <= 120
        assert client.get("/health").status_code == 200


def test_a_valid_token_does_not_clear_the_wrong_ones_guessed_from_its_address(tmp_path):
    """A person who has a token of their own cannot sign in between guesses at another's
    to keep the count of wrong ones at nothing."""
    raw = {"auth": {"rateLimit": {"maxAttempts": 3, "lockoutSeconds": 120}}}
    with gateway(tmp_path, ScriptedProvider(), raw=raw) as client:
        wrong = {"Authorization": "Bearer not-the-token-at-all"}
        codes = []
        for _ in range(3):
            codes.append(client.get("/api/sessions", headers=wrong).status_code)
            codes.append(client.get("/api/sessions", headers=AUTH).status_code)
        assert codes == [401, 200, 401, 200, 429, 429]


def test_a_body_too_large_is_refused_and_nothing_is_written(tmp_path):
    provider = ScriptedProvider(default="ok")
    with gateway(tmp_path, provider, raw={"maxBodyBytes": 2048}) as client:
        big = "x" * 4000
        refused = client.post("/api/sessions/main/messages", json={"text": big},
                              headers=AUTH)
        assert refused.status_code == 413
        assert "2,048" in refused.json()["error"]["message"]

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"text": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        streamed = client.post("/api/sessions/main/messages", content=chunks(),
                               headers={**AUTH, "Content-Type": "application/json"})
        assert streamed.status_code == 413
        put = client.put("/api/files/notes.md", json={"content": big}, headers=AUTH)
        assert put.status_code == 413
        assert client.get("/api/sessions", headers=AUTH).json()["sessions"] == []
    assert provider.requests == [] and not (tmp_path / "ws" / "notes.md").exists()
