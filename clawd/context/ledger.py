"""The pruning of one session's requests, remembered (``PruningLedger``).

A pruning decision (soft-trim or hard-clear of an old tool result) is kept in
``sessions.json`` as ``prunedResults`` and applied again, identically, to every later request,
so the prefix the provider cached stays the same; each request then adds its own decisions.
The ledger also says what was pruned, one line per tool result, for ``/context detail``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from clawd.config import ContextPruning
from clawd.context.pruning import PrunedEntry, prune, reapply
from clawd.core.messages import Message


def pruned_lines(entries: Iterable[PrunedEntry], messages: list[Message]) -> list[str]:
    """One line per pruned tool result, in the order of ``messages``."""
    order = {m.id: i for i, m in enumerate(messages)}
    return [f"{p.tool_name or 'tool'} result {p.message_id}: {p.action} "
            f"({p.chars_before} → {p.chars_after} chars)"
            for p in sorted(entries, key=lambda p: order[p.message_id])]


def prune_mode(cfg: ContextPruning, uses_cache: bool) -> str:
    """``contextPruning.mode``, by default ``cache-ttl`` for a model with a prompt cache."""
    return cfg.mode or ("cache-ttl" if uses_cache else "off")


class PruningLedger:
    """Applies and records one session's pruning (``mode``: see ``prune_mode``)."""

    def __init__(self, cfg: ContextPruning):
        self.cfg = cfg
        self.last: list[str] | None = None  # None: no request from this process yet

    def apply(self, messages: list[Message], stored: dict[str, str], *, mode: str,
              now: float, last_call_at: Any, context_window: int,
              tokens_of: Callable[[list[Message]], float]
              ) -> tuple[list[Message], dict[str, str]]:
        """The messages to send, and the decisions to remember (``stored`` plus this
        request's own)."""
        decisions = dict(stored)
        sent, kept = reapply(messages, decisions if mode != "off" else {}, self.cfg)
        pruned = prune(sent, self.cfg, mode=mode, now=now, last_call_at=last_call_at,
                       context_window=context_window, tokens_of=tokens_of)
        first = {e.message_id: e.chars_before for e in kept}
        for e in pruned.entries:
            e.chars_before = first.get(e.message_id, e.chars_before)
            if not (e.action == "soft-trim" and e.message_id in decisions):
                decisions[e.message_id] = e.action  # a trim of a trim stays one trim
        merged = {e.message_id: e for e in kept} | {e.message_id: e for e in pruned.entries}
        self.last = pruned_lines(merged.values(), messages)
        return pruned.messages, decisions

    def describe(self, messages: list[Message], stored: dict[str, str], mode: str
                 ) -> list[str]:
        """What pruning took out of the last request: this process's last request, or
        before there is one, the remembered decisions as the next request re-applies them."""
        if self.last is not None:
            return self.last
        if mode == "off":
            return []
        _, kept = reapply(messages, stored, self.cfg)
        return pruned_lines(kept, messages)
