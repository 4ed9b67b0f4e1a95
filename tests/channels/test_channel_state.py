"""What a channel keeps, on both stores (``channels.json`` and PostgreSQL): an update taken
once, pairing codes (8 characters, an hour, at most 3 waiting), who was let in, whom it
told once, and its status counters."""

from __future__ import annotations

import pytest

from clawd.config import Config
from clawd.storage import open_channels
from clawd.storage.channels import CODE_ALPHABET, PAIRING_SECONDS


@pytest.fixture(params=["files", "postgresql"])
def state(request, monkeypatch):
    if request.param == "postgresql":
        monkeypatch.setenv("CLAWD_STORAGE_URL", request.getfixturevalue("pg_url"))
    return open_channels(Config())


def test_an_update_is_taken_once(state):
    assert state.first_time("telegram", 10) is True
    assert state.first_time("telegram", 10) is False
    assert state.first_time("telegram", 11) is True
    assert state.first_time("other", 10) is True


def test_pairing_codes_wait_an_hour_at_most_three_a_channel(state):
    now = 1_000_000.0
    first, made = state.request("telegram", "9", "@eve", "9", now)
    assert made and len(first.code) == 8 and set(first.code) <= set(CODE_ALPHABET)
    again, made = state.request("telegram", "9", "@eve", "9", now + 5)
    assert again.code == first.code and not made  # the same request, not a new code
    for sender in ("10", "11"):
        assert state.request("telegram", sender, None, sender, now)[1]
    assert state.request("telegram", "12", None, "12", now) == (None, False)
    assert [p.sender for p in state.pending(now + 1)] == ["9", "10", "11"]
    assert state.pending(now + PAIRING_SECONDS + 1) == []
    later, made = state.request("telegram", "12", None, "12", now + PAIRING_SECONDS + 1)
    assert made and later is not None  # the old ones expired


def test_approve_lets_a_sender_in_and_deny_keeps_them_out(state):
    now = 2_000_000.0
    ann, _ = state.request("telegram", "9", "@ann", "9", now)
    bob, _ = state.request("telegram", "10", "@bob", "10", now)
    assert state.approve(ann.code.lower(), now + 60).sender == "9"
    assert state.approved("telegram") == {"9"}
    assert state.deny(bob.code, now + 60).sender == "10"
    assert state.was_denied("telegram", "10") and not state.was_denied("telegram", "9")
    with pytest.raises(Exception, match="no pairing request"):
        state.approve(bob.code, now)
    late, _ = state.request("telegram", "11", None, "11", now)
    with pytest.raises(Exception, match="no pairing request"):
        state.approve(late.code, now + PAIRING_SECONDS + 1)


def test_a_refused_sender_is_told_once_and_the_status_counts(state):
    assert state.told("telegram", "7") is True
    assert state.told("telegram", "7") is False
    state.note("telegram", connected=True, inbound=2, outbound=3)
    state.note("telegram", error="NetworkError: down", inbound=1)
    found = state.status()["telegram"]
    assert (found["connected"], found["lastError"], found["messagesIn"],
            found["messagesOut"]) == (True, "NetworkError: down", 3, 3)
    state.note("telegram", connected=False, error="")
    found = state.status()["telegram"]
    assert (found["connected"], found["lastError"]) == (False, None)
