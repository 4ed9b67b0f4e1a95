"""How full the context is, in the provider's own tokens (``TokenMeter``).

The meter starts from the prompt size the provider reported for the last call in the history
(plus that call's output) and adds estimates of everything since: messages appended after it
and any change in the fixed layers (system prompt, workspace files, tool schemas). Without a
reported call since the last compaction it estimates the whole request. Estimates are scaled
by ``ratio``, the provider's tokens per estimated token, learnt from each call's usage, so
the flush and compaction points are crossed where the provider would count them.
"""

from __future__ import annotations

from dataclasses import dataclass

from clawd.context.layers import history_messages
from clawd.core.messages import Message, ModelRequest, Usage
from clawd.core.tokens import calibration, estimate_messages, estimate_request
from clawd.sessions.transcript import History


@dataclass
class Base:
    """The last reported call: its prompt plus output, the history length after it, and its
    fixed-layer tokens (None: taken to be today's)."""

    reported: int
    count: int
    fixed: int | None = None


class TokenMeter:
    """The context size of one session's history (see the module docstring)."""

    def __init__(self, history: History, ratio: float = 1.0):
        self.history = history
        self.ratio = ratio
        self.base = self.reported_base()

    def reported_base(self) -> Base | None:
        """The base from the newest usage on disk (after the latest compaction)."""
        messages = self.history.messages
        for index in range(len(messages) - 1, self.history.after_compaction - 1, -1):
            usage = messages[index].usage
            if usage is not None and usage.prompt_tokens:
                return Base(usage.prompt_tokens + usage.output_tokens, index + 1)
        return None

    def reset(self) -> None:
        """After an undo: start again from the newest usage the history still holds."""
        self.base = self.reported_base()

    def forget(self) -> None:
        """After a compaction: no reported call describes the new history; estimate it."""
        self.base = None

    def scaled(self, estimated: int) -> int:
        """An estimate in the provider's tokens."""
        return round(estimated * self.ratio)

    def context(self, fixed: int, extra: list[Message] | None = None) -> int:
        """The context size now, with ``fixed`` estimated tokens of fixed layers and
        ``extra`` messages not yet in the history."""
        estimated = estimate_messages(extra or [])
        if self.base is not None:
            base = self.base
            estimated += (fixed - (fixed if base.fixed is None else base.fixed)
                          + estimate_messages(self.history.messages[base.count:]))
            return base.reported + self.scaled(estimated)
        estimated += fixed + estimate_messages(history_messages(
            self.history.summary, self.history.messages))
        return self.scaled(estimated)

    def record(self, usage: Usage, request: ModelRequest, fixed: int, *,
               in_history: bool) -> None:
        """Learn from a call's reported usage; a call on the history (not a flush's side
        turn) becomes the new base."""
        if not usage.prompt_tokens:
            return
        self.ratio = calibration(usage.prompt_tokens, estimate_request(request), self.ratio)
        if in_history:
            self.base = Base(usage.prompt_tokens + usage.output_tokens,
                             len(self.history.messages), fixed)
