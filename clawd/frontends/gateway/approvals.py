"""The web page's approve/deny: an MCP tool that asks first (``clawd.mcp.approval``) asks the
person whose page sent the turn.

A turn sent by the page says it can answer (``approvals: true``: the turn ``asks``); the hub
binds each turn to the worker thread that runs it (``bind``). A tool that asks then puts a line in
the turn's events, ``{"type": "approval", "id": N, "text": "<tool> <arguments>"}``, and
waits for ``POST /api/turns/{turn}/approvals/{N}`` with ``{"approve": true|false}``
(``answer``); the answer is a line too (``approvalAnswered``). No answer within
``APPROVAL_SECONDS``, or the turn stopped meanwhile: declined. A turn from anything else (the
API without ``approvals``, the OpenAI-compatible endpoint) has nobody to ask, and the call is
refused, as in a ``clawd chat -m`` run. A server's question during a call (MCP elicitation,
``ask``: the runtimes' ``McpClients.elicit``) goes the same way, as a ``question`` line with
its ``fields``, answered with ``{"values": {...}}`` (read as each field's type: a wrong one
is refused and the question stays open) or ``{"approve": false}`` to decline; where nobody
can answer it is declined. A web page a server asks the person to open (URL mode, ``link``:
``McpClients.elicit_url``) is a ``question`` line with its ``url`` and ``host``: ``{"approve":
true}`` accepts (the page opens it), false declines, no answer cancels; a link that is not
http(s) is a ``notice`` line, declined. With several workers on one database the answer may
reach any of them: one that does not run the turn checks it against the question's stored
line (``check``) and hands it to the worker that does (``Hub.answer``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from clawd.core.errors import ToolError
from clawd.frontends.gateway.bodies import BadRequest

if TYPE_CHECKING:
    from clawd.mcp.elicit import Link

APPROVAL_SECONDS = 300.0
POLL_SECONDS = 0.25
NOBODY = ("this call needs a person's approval, and nobody can give it in this turn (only the "
          "web page's chat can); nothing was done. To let it run without asking, set "
          "approval: \"never\" on its server (mcp.servers.<name>), or name the tool in its "
          "autoApprove")


@dataclass
class _Question:
    answered: threading.Event = field(default_factory=threading.Event)
    approved: bool = False
    fields: list[Any] = field(default_factory=list)  # a server's form (``ask``)
    values: dict[str, Any] | None = None
    number: int = 0


class PageApprovals:
    """The questions tools put to the page, by turn and number (see the module docstring);
    the runtime's ``confirm``."""

    def __init__(self, seconds: float = APPROVAL_SECONDS) -> None:
        self.seconds = seconds
        self._local = threading.local()
        self._open: dict[tuple[str, int], _Question] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def bind(self, turn: Any, push: Callable[[dict[str, Any]], None]) -> None:
        """``turn`` runs on this thread from now on: its questions go to its events
        (``push``)."""
        self._local.turn = (turn, push)

    def _bound(self) -> tuple[Any, Callable[[dict[str, Any]], None]] | None:
        """The turn running on this thread and its events, when its sender can answer."""
        bound = getattr(self._local, "turn", None)
        if bound is None or bound[0].state != "running" or not bound[0].asks:
            return None
        return bound

    def __call__(self, what: str) -> bool:
        bound = self._bound()
        if bound is None:
            raise ToolError(NOBODY)
        question = self._put(bound, {"type": "approval", "text": what}, _Question())
        approved = question.answered.is_set() and question.approved
        bound[1]({"type": "approvalAnswered", "id": question.number, "approved": approved})
        return approved

    def ask(self, message: str, schema: Any) -> dict[str, Any] | None:
        """A server's question (``McpClients.elicit``): the values typed on the page, or None
        (declined, unanswered, or nobody to ask)."""
        from clawd.mcp.elicit import clean, fields

        bound = self._bound()
        if bound is None:
            return None
        asked = fields(schema)
        question = self._put(bound, {"type": "question", "text": clean(message), "fields": [
            {"name": f.name, "kind": f.kind, "description": f.description,
             "required": f.required, "choices": list(f.choices), "default": f.default}
            for f in asked]}, _Question(fields=asked))
        values = question.values if question.answered.is_set() and question.approved else None
        bound[1]({"type": "approvalAnswered", "id": question.number,
                  "approved": values is not None})
        return values

    def link(self, found: Link) -> str:
        """A web page a server asks the person to open (``McpClients.elicit_url``, an
        ``elicit.Link``): "accept", "decline", or "cancel" when unanswered."""
        bound = self._bound()
        if bound is not None and found.refused:
            bound[1]({"type": "notice", "text": found.refused})
        if bound is None or found.refused:
            return "decline"
        question = self._put(bound, {"type": "question", "text": f"{found.server} asks you to "
                                     f"open a web page: {found.message}", "url": found.url,
                                     "host": found.host}, _Question())
        action = ("cancel" if not question.answered.is_set() else
                  "accept" if question.approved else "decline")
        bound[1]({"type": "approvalAnswered", "id": question.number,
                  "approved": action == "accept"})
        return action

    def _put(self, bound: tuple[Any, Callable[[dict[str, Any]], None]], line: dict[str, Any],
             question: _Question) -> _Question:
        """Put ``question`` in the turn's events and wait for its answer (or the turn's
        stop, or ``seconds``)."""
        turn, push = bound
        question.number = next(self._numbers)
        with self._lock:
            self._open[(turn.id, question.number)] = question
        push({**line, "id": question.number})
        deadline = time.monotonic() + self.seconds
        try:
            while not question.answered.wait(POLL_SECONDS):
                if turn.token.cancelled or time.monotonic() >= deadline:
                    break
        finally:
            with self._lock:
                self._open.pop((turn.id, question.number), None)
        return question

    def answer(self, turn_id: str, number: int, approved: bool,
               values: dict[str, Any] | None = None) -> bool:
        """Answer question ``number`` of turn ``turn_id``; whether it was waiting. A form's
        ``values`` are read as its fields' types: one that is not is a ``ClawdError`` and
        the question stays open."""
        with self._lock:
            question = self._open.get((turn_id, number))
        if question is None:
            return False
        if approved and question.fields:
            question.values = _read(question.fields, values)
        question.approved = approved
        question.answered.set()
        return True

    def check(self, asked: dict[str, Any], approved: bool,
              values: dict[str, Any] | None) -> None:
        """A ``BadRequest`` when ``values`` cannot answer the form the line ``asked`` put
        (a question another worker waits on)."""
        from clawd.mcp.elicit import Field

        if approved and asked.get("type") == "question":
            _read([Field(str(f.get("name", "")), str(f.get("kind", "string")),
                         str(f.get("description", "")), bool(f.get("required")),
                         tuple(f.get("choices") or ()), f.get("default"))
                   for f in asked.get("fields") or [] if isinstance(f, dict)], values)


def _read(asked: list[Any], values: dict[str, Any] | None) -> dict[str, Any]:
    """A form's ``values`` read as its fields' types; a ``BadRequest`` naming the first
    that is not one."""
    from clawd.mcp.elicit import coerce

    read: dict[str, Any] = {}
    for f in asked:
        try:
            value = coerce(f, str((values or {}).get(f.name, "")))
        except ValueError as exc:
            raise BadRequest(f"{f.name}: {exc}") from None
        if value is not None:
            read[f.name] = value
    return read
