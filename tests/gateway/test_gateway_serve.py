"""``clawd serve`` on the command line: refusing what it must refuse, in one line."""

from __future__ import annotations

from clawd.frontends.cli import main


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(capsys, monkeypatch):
    monkeypatch.delenv("CLAWD_GATEWAY_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("clawd: clawd serve needs a token to listen on 0.0.0.0")
    assert len(err.splitlines()) == 1


def test_serve_refuses_a_bad_port(capsys):
    assert main(["serve", "--port", "99999"]) == 2
    assert "expected a port number" in capsys.readouterr().err


def test_serve_names_an_unknown_agent(capsys):
    assert main(["serve", "--agent", "nobody"]) == 2
    assert "nobody" in capsys.readouterr().err
