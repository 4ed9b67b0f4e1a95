"""The flush and compaction points hold in the provider's tokens, not clawd's estimates.

Here the scripted provider counts differently from the loop's estimator (more tokens, fewer
tokens, another tokenizer altogether), as every real provider does. Its count is what it
reports as usage and what its context window is checked against; the loop must flush and
compact by those numbers: never letting a request overflow the provider, never flushing
far too early.
"""

from __future__ import annotations

import itertools

import pytest
from test_compaction_loop import KEY, SETTINGS, WINDOW, lines, markers, user_text

from clawd.core.events import Compacted, ErrorEvent
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from loopmodel import LoopModel, is_flush, is_summary


def _chars_over_three(request) -> int:
    """Another tokenizer: a character-based count with no relation to BPE."""
    parts = [*request.system, *(m.text for m in request.messages)]
    return sum(len(p) for p in parts) // 3 + 4 * len(request.messages)


@pytest.mark.parametrize("ratio, count", [(1.6, None), (0.6, None), (1.0, _chars_over_three)],
                         ids=["counts-more", "counts-fewer", "other-tokenizer"])
@pytest.mark.slow  # long sessions
def test_thresholds_follow_the_providers_count(tmp_path, ratio, count):
    provider = ScriptedProvider(default=LoopModel(lossy=True), context_window=WINDOW,
                                token_ratio=ratio, count=count)
    session = Session.open(make_runtime(tmp_path, provider, window=WINDOW, settings=SETTINGS), KEY)
    budget = session.budget
    events: list = []
    for i in range(120):
        events += list(session.run_turn(user_text(i)))
        if sum(isinstance(e, Compacted) for e in events) >= 2:
            break
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    sizes = [provider.count(r) for r in provider.requests]
    assert max(sizes) <= WINDOW  # the provider never had to refuse a request
    pattern = markers(lines(session))
    assert pattern.count("C") >= 2 and pattern.startswith("FC")  # flushed, then compacted
    chats = [(n, r) for n, r in zip(sizes, provider.requests)
             if not is_flush(r) and not is_summary(r)]
    # every chat request stays under the compaction point as the provider counts it
    assert max(n for n, _ in chats) <= budget.compact_at * 1.05
    # ... and the first flush came when the provider's context was near the flush point,
    # not at the estimator's idea of it
    first_flush = next(i for i, r in enumerate(provider.requests) if is_flush(r))
    before = [n for n, r in zip(sizes[:first_flush], provider.requests[:first_flush])
              if not is_summary(r)]
    turn = max(b - a for a, b in itertools.pairwise(before))  # one turn's growth
    # another tokenizer is learnt as one ratio for the whole request, while its share of
    # fixed layers and history shifts: the point may be passed by a sliver (as compaction's)
    slack = 1.0 if count is None else 1.02
    assert budget.flush_at - 2 * turn <= before[-1] < budget.flush_at * slack
    if count is None:  # it learnt the provider's ratio
        assert session.token_ratio == pytest.approx(ratio, rel=0.05)
