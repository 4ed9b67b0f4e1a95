"""The turn quota's rule: starts counted in a sliding minute, turns under way at once, and
when to try again."""

from __future__ import annotations

import pytest

from clawd.core.quotas import AT_ONCE_RETRY_SECONDS, in_window, retry_after, turn_refusal


def test_only_the_starts_of_the_last_minute_count():
    assert in_window([0.0, 30.0, 59.9, 60.0, 100.0], now=100.0) == [59.9, 60.0, 100.0]
    assert in_window([], now=5.0) == []
    assert in_window([200.0], now=100.0) == []  # a start "after" now is no start of ours


@pytest.mark.parametrize(("starts", "now", "limit", "wait"), [
    ([], 0.0, 1, 0),  # room now
    ([10.0], 20.0, 1, 50),  # the one start leaves the window at 70
    ([10.0, 20.0, 30.0], 40.0, 3, 30),  # the oldest leaves at 70
    ([10.0, 20.0, 30.0, 35.0], 40.0, 3, 40),  # over the limit: the second oldest must go
    ([10.0, 20.0], 40.0, 3, 0),
    ([0.0], 59.99, 1, 1),  # never 0 while refused
    ([0.0, 0.0], 69.5, 2, 0),  # both long gone
])
def test_retry_after_is_when_one_more_start_fits(starts, now, limit, wait):
    assert retry_after(starts, now, limit) == wait


def test_a_turn_is_refused_past_the_minute_or_the_at_once_bound():
    starts = [0.0, 10.0]
    assert turn_refusal(starts, 0, 20.0, per_minute=3, at_once=2) is None
    over = turn_refusal(starts, 0, 20.0, per_minute=2, at_once=None)
    assert over is not None and over.retry_after == 40 and "turnsPerMinute" in over.message
    busy = turn_refusal([], 2, 20.0, per_minute=None, at_once=2)
    assert busy is not None and busy.retry_after == AT_ONCE_RETRY_SECONDS
    assert "turnsAtOnce" in busy.message
    assert turn_refusal(starts * 50, 99, 20.0, per_minute=None, at_once=None) is None
    # the rate is said first: its Retry-After is the exact one
    both = turn_refusal(starts, 5, 20.0, per_minute=2, at_once=1)
    assert both is not None and "turnsPerMinute" in both.message
