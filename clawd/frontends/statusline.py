"""The REPL's status line: the model, how full the context is, the last turn's tokens and
cost, and key hints, fitted to the terminal's width (``toolbar_text``); ``Status`` measures
what it shows before and after each turn, never per keypress.
"""

from __future__ import annotations

import logging

from prompt_toolkit.application.current import get_app
from prompt_toolkit.utils import get_cwidth

from clawd.config import ModelCost
from clawd.frontends.commands import Chat
from clawd.providers.registry import model_info

log = logging.getLogger(__name__)


def _tokens(n: int) -> str:
    return f"{n / 1_000_000:.1f}M" if n >= 999_500 else f"{n / 1000:.1f}k" if n >= 1000 \
        else str(n)


def _dollars(cost: float) -> str:
    return "$0" if cost == 0 else f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"


# What goes first when the status line is too wide: each step shortens or drops one part.
_ORDER = ("model", "context", "turn", "cost", "keys", "help")
_NARROWING = ("keys", "context", "turn", "help", "context", "model", "turn", "cost", "context")


def toolbar_text(model: str, used: int | None, window: int, *, width: int = 80,
                 turn: tuple[int, int] | None = None, cost: float | None = None) -> str:
    """The status line: the model, how full the context window is, the last turn's tokens
    (read, written) and cost, and key hints; fitted to ``width`` by shortening or dropping
    the less useful parts first, then the provider's name, the model's last."""
    pct = 100.0 * used / window if window and used is not None else 0.0
    forms = {
        "model": [model, model.partition("/")[2] or model],
        "context": ["context …", ""] if used is None else
                   [f"context {pct:.0f}% ({used:,} / {window:,})", f"context {pct:.0f}%",
                    f"{pct:.0f}%", ""],
        "turn": [""] if turn is None else
                [f"last turn {turn[0]:,} in, {turn[1]:,} out",
                 f"{_tokens(turn[0])} in {_tokens(turn[1])} out", ""],
        "cost": [""] if cost is None else [_dollars(cost), ""],
        "keys": ["Esc+Enter: new line", ""],
        "help": ["/help", ""],
    }
    level = dict.fromkeys(forms, 0)

    def text() -> str:
        return " " + " · ".join(f for name in _ORDER if (f := forms[name][level[name]])) + " "

    for part in _NARROWING:
        if get_cwidth(text()) <= width:
            break
        level[part] = min(level[part] + 1, len(forms[part]) - 1)
    line = text()
    while get_cwidth(line) > width and len(line) > 2:  # the model's name alone is too long
        line = line[:-3] + "… "
    return line


_USAGE = 4  # the session's cumulative input, output, cache-read and cache-write tokens


class Status:
    """What the status line shows, measured before and after each turn, never per keypress:
    the context size, and the last turn's tokens and cost (from the session's usage counters,
    so a memory flush in the turn counts too)."""

    def __init__(self, chat: Chat):
        self.chat = chat
        self.used: int | None = chat.session.entry.get("contextUsedTokens") or None
        self.turn: tuple[int, int] | None = None
        self.cost: float | None = None
        self._before = self._usage()

    def _usage(self) -> tuple[str | None, list[int]]:
        entry = self.chat.session.entry
        return entry.get("sessionId"), [
            entry.get("cumulativeInputTokens", 0), entry.get("cumulativeOutputTokens", 0),
            entry.get("cumulativeCacheReadTokens", 0), entry.get("cumulativeCacheWriteTokens", 0)]

    def start_turn(self) -> None:
        self._before = self._usage()

    def end_turn(self) -> None:
        """The tokens the line just handled used, if it called the model."""
        session, after = self._usage()
        # after /new or /reset, the counters are the new session's, from zero, and the old
        # session's last turn is no longer this session's
        before = self._before[1] if session == self._before[0] else [0] * _USAGE
        if session != self._before[0]:
            self.turn = self.cost = None
        fresh, output, read, written = (a - b for a, b in zip(after, before))
        if fresh or output or read or written:
            self.turn = (fresh + read + written, output)
            price = self._price()
            self.cost = price.dollars(fresh, output, read, written) if price else None
        self.refresh()

    def _price(self) -> ModelCost | None:
        try:
            info = model_info(self.chat.runtime.config, self.chat.session.model_ref)
        except Exception:  # noqa: BLE001 - no price is shown then
            return None
        return info.cost if info else None

    def refresh(self) -> None:
        try:
            self.used = self.chat.session.context_tokens()
        except Exception:  # noqa: BLE001 - a status line must not end the REPL
            log.debug("context size unavailable", exc_info=True)

    def brief(self) -> str:
        """The model and how full the context is, for the waiting line."""
        session = self.chat.session
        window = session.budget.context_window
        if self.used is None or not window:
            return session.model_ref
        return f"{session.model_ref} · context {100.0 * self.used / window:.0f}%"

    def text(self) -> str:
        session = self.chat.session
        try:
            window = session.budget.context_window
        except Exception:  # noqa: BLE001 - e.g. a model the registry no longer knows
            window = 0
        return toolbar_text(session.model_ref, self.used, window,
                            width=get_app().output.get_size().columns, turn=self.turn,
                            cost=self.cost)
