"""Where compaction cuts the history: ``find_cut``, a pure function that picks the first
message kept verbatim: the newest ``keepRecentTokens`` of history, never separating a tool
call from its results, preferring to start at a user message."""

from __future__ import annotations

from clawd.core.messages import Message
from clawd.core.tokens import estimate_message

USER_BOUNDARY_SLACK = 0.25  # share of the keep budget given up to start at a user message


def find_cut(messages: list[Message], keep_recent_tokens: int, *,
             within_turn: bool = False) -> int:
    """Index of the first message kept verbatim; ``messages[:cut]`` is summarised.

    Walks back from the end while the kept part stays within ``keep_recent_tokens``; moves
    the cut forward (keeping less, never more) until it does not fall between an assistant
    message with tool calls and its results, and further to the next user message when
    that gives up at most a quarter of the budget. The current turn (the last user message
    and everything after it) is kept whole, even when it alone exceeds the budget, unless
    ``within_turn``: then a turn too long for the budget is cut between its steps (at an
    assistant message, never between a tool call and its result, always keeping the latest
    step), and the caller keeps the turn's user message verbatim. So 0 means "nothing to
    summarise" (everything fits, or the history is one turn that may not be cut), and
    ``len(messages)`` is returned only when the history holds no user message and nothing
    at its end fits.
    """
    n = len(messages)
    sizes = [estimate_message(m) for m in messages]
    if sum(sizes) <= keep_recent_tokens:
        return 0
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    start = n
    while start > 0 and suffix[start - 1] <= keep_recent_tokens:
        start -= 1
    blocked = _blocked_cuts(messages)

    def valid(i: int) -> bool:
        return i == n or (i not in blocked and messages[i].role != "toolResult")

    cut = next(i for i in range(start, n + 1) if valid(i))
    slack = keep_recent_tokens * USER_BOUNDARY_SLACK
    for i in range(cut, n):
        if suffix[cut] - suffix[i] > slack:
            break
        if messages[i].role == "user" and valid(i):
            cut = i
            break
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if users and cut > users[-1]:
        if within_turn:
            steps = [i for i in range(users[-1] + 2, n)
                     if messages[i].role == "assistant" and valid(i)]
            if steps:  # the first step boundary within the budget, else the latest step
                return next((i for i in steps if i >= cut), steps[-1])
        cut = users[-1]
        while cut > 0 and not valid(cut):
            cut -= 1
    return cut


def _blocked_cuts(messages: list[Message]) -> set[int]:
    """Indices where a cut would leave a tool call before it and its result after it."""
    call_at: dict[str, int] = {}
    blocked: set[int] = set()
    for j, message in enumerate(messages):
        if message.role == "assistant":
            for call in message.tool_calls:
                call_at[call.id] = j
        elif message.role == "toolResult" and message.tool_call_id in call_at:
            blocked.update(range(call_at[message.tool_call_id] + 1, j + 1))
    return blocked
