"""A person's answer to a question a tool asked in a turn another worker runs (the web page's
approve/deny and forms, ``gateway.approvals``): the question found in the turn's stored lines
while it waits (``open_question``), the answer handed to the running worker over
``NOTIFY`` (``send``) and heard there (``hear``, called by ``PgShared.listen``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections

log = logging.getLogger(__name__)
ANSWERS = "clawd_answer"  # the channel answers go on: JSON {"turn", "number", ...}
ANSWER_BYTES = 7000  # NOTIFY carries at most 8000 bytes


def open_question(db: Connections, turn_id: str, number: int) -> dict[str, Any] | None:
    """The line that put question ``number`` of the running turn ``turn_id`` (an
    ``approval`` or a ``question``), while no answer to it is written; else None."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT e.line FROM turn_events e JOIN gateway_turns t USING (turn_id) WHERE "
            "e.turn_id = %s AND t.state = 'running' AND e.line->>'type' IN ('approval', "
            "'question', 'approvalAnswered') AND e.line->>'id' = %s ORDER BY e.seq",
            (turn_id, str(number))).fetchall()
    lines = [row[0] for row in rows]
    if not lines or any(line.get("type") == "approvalAnswered" for line in lines):
        return None
    return dict(lines[0])


def send(db: Connections, turn_id: str, number: int, answer: dict[str, Any]) -> bool:
    """Hand ``answer`` to question ``number`` of ``turn_id`` to the worker running the
    turn; False when it is too long to hand over."""
    payload = orjson.dumps({"turn": turn_id, "number": number, **answer}).decode()
    if len(payload.encode()) > ANSWER_BYTES:
        return False
    with db.connection() as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (ANSWERS, payload))
    return True


def hear(payload: str, on_answer: Callable[[str, int, dict[str, Any]], None]) -> None:
    """An answer heard: handed on as ``on_answer(turn_id, number, answer)``, or dropped
    with a warning when it is not one."""
    try:
        said = orjson.loads(payload)
        turn_id, number = str(said.pop("turn")), int(said.pop("number"))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        log.warning("an answer heard that is not one: %.80r", payload)
        return
    on_answer(turn_id, number, said)
