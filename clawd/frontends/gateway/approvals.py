"""The web page's approve/deny: an MCP tool that asks first (``clawd.mcp.approval``) asks the
person whose page sent the turn.

A turn sent by the page says it can answer (``approvals: true``: ``allow``); the hub binds
each turn to the worker thread that runs it (``bind``). A tool that asks then puts a line in
the turn's events, ``{"type": "approval", "id": N, "text": "<tool> <arguments>"}``, and
waits for ``POST /api/turns/{turn}/approvals/{N}`` with ``{"approve": true|false}``
(``answer``); the answer is a line too (``approvalAnswered``). No answer within
``APPROVAL_SECONDS``, or the turn stopped meanwhile: declined. A turn from anything else (the
API without ``approvals``, the OpenAI-compatible endpoint) has nobody to ask, and the call is
refused, as in a ``clawd chat -m`` run. The answer must reach the worker running the turn:
with several workers on one database, a turn's approvals are answered on the worker it runs
on.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clawd.core.errors import ToolError

APPROVAL_SECONDS = 300.0
POLL_SECONDS = 0.25
KEPT = 1000  # turns remembered as able to answer
NOBODY = ("this call needs a person's approval, and nobody can give it in this turn (only the "
          "web page's chat can); nothing was done. To let it run without asking, set "
          "approval: \"never\" on its server (mcp.servers.<name>), or name the tool in its "
          "autoApprove")


@dataclass
class _Question:
    answered: threading.Event = field(default_factory=threading.Event)
    approved: bool = False


class PageApprovals:
    """The questions tools put to the page, by turn and number (see the module docstring);
    the runtime's ``confirm``."""

    def __init__(self, seconds: float = APPROVAL_SECONDS) -> None:
        self.seconds = seconds
        self._local = threading.local()
        self._open: dict[tuple[str, int], _Question] = {}
        self._numbers = itertools.count(1)
        self._allowed: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def allow(self, turn_id: str) -> None:
        """Turn ``turn_id``'s sender answers questions (the last ``KEPT`` such turns)."""
        with self._lock:
            self._allowed[turn_id] = None
            while len(self._allowed) > KEPT:
                self._allowed.popitem(last=False)

    def bind(self, turn: Any, push: Callable[[dict[str, Any]], None]) -> None:
        """``turn`` runs on this thread from now on: its questions go to its events
        (``push``)."""
        self._local.turn = (turn, push)

    def __call__(self, what: str) -> bool:
        bound = getattr(self._local, "turn", None)
        if bound is None or bound[0].state != "running" or bound[0].id not in self._allowed:
            raise ToolError(NOBODY)
        turn, push = bound
        number, question = next(self._numbers), _Question()
        with self._lock:
            self._open[(turn.id, number)] = question
        push({"type": "approval", "id": number, "text": what})
        deadline = time.monotonic() + self.seconds
        try:
            while not question.answered.wait(POLL_SECONDS):
                if turn.abort or time.monotonic() >= deadline:
                    break
        finally:
            with self._lock:
                self._open.pop((turn.id, number), None)
        approved = question.answered.is_set() and question.approved
        push({"type": "approvalAnswered", "id": number, "approved": approved})
        return approved

    def answer(self, turn_id: str, number: int, approved: bool) -> bool:
        """Answer question ``number`` of turn ``turn_id``; whether it was waiting."""
        with self._lock:
            question = self._open.get((turn_id, number))
        if question is None:
            return False
        question.approved = approved
        question.answered.set()
        return True
