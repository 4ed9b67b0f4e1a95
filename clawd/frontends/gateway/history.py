"""A session's history as a client shows it: transcript entries to items, a page at a time.

What the user saw, in order: their messages, the notes recalled for a message, the
assistant's replies (text and tool calls), tool results, and a marker where a compaction
summarised older messages. Left out: the
memory flush's silent turns, a reply that was only ``NO_REPLY``, and blank answers that
were asked again (all on disk, never shown). Marked: a reply cut short (``interrupted``),
a reply stopped for repeating itself (``notice``: the words shown when it stopped),
a turn taken back by ``/undo`` or ``/retry`` (``undone``), a message too large to send
(``refused``). Items are numbered from the start of the transcript, so a page is "the
``limit`` items before ``before``" and stays put while new turns are added.
"""

from __future__ import annotations

from typing import Any

from clawd.context.flush import is_silent
from clawd.core.messages import Message
from clawd.guards.step_guards import Looping
from clawd.sessions.interface import TranscriptLog
from clawd.sessions.transcript import taken_back

MAX_PAGE = 200
RESULT_CHARS = 2000  # of a tool result's text, as in the ``toolResult`` event


def items(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every item of a transcript's entries, in order (see the module docstring)."""
    undone = taken_back(entries)
    out: list[dict[str, Any]] = []
    for entry in entries:
        kind = entry.get("type")
        if kind == "recall" and isinstance(entry.get("places"), list):
            out.append({"type": "recall", "id": entry.get("id"),
                        "timestamp": entry.get("timestamp"),
                        "messageId": entry.get("messageId"),
                        "results": [{"path": p[0], "startLine": p[1], "endLine": p[2],
                                     "score": p[3]} for p in entry["places"]
                                    if isinstance(p, list) and len(p) == 4]})
            continue
        if kind == "compaction":
            out.append({"type": "compaction", "id": entry.get("id"),
                        "timestamp": entry.get("timestamp"),
                        "tokensBefore": entry.get("tokensBefore"),
                        "tokensAfter": entry.get("tokensAfter"),
                        "method": entry.get("method"), "summary": entry.get("summary")})
            continue
        if kind != "message":
            continue
        try:
            message = Message.from_entry(entry)
        except (ValueError, KeyError, TypeError):
            continue
        item = _item(message)
        if item is None:
            continue
        if message.id in undone:
            item["undone"] = undone[message.id]
        out.append(item)
    for number, item in enumerate(out):
        item["index"] = number
    return out


def _item(message: Message) -> dict[str, Any] | None:
    if message.flush or message.retried:
        return None
    base: dict[str, Any] = {"id": message.id, "timestamp": message.timestamp}
    if message.role == "user":
        item: dict[str, Any] = {"type": "user", **base, "text": message.text}
        if message.refused:
            item["refused"] = True
        return item
    if message.role == "toolResult":
        text = message.text
        return {"type": "toolResult", **base, "toolCallId": message.tool_call_id,
                "name": message.tool_name, "isError": message.is_error,
                "text": text[:RESULT_CHARS], "truncated": len(text) > RESULT_CHARS}
    text = "" if is_silent(message.text) else message.text
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    if not text and not calls:
        return None
    item = {"type": "assistant", **base, "text": text, "toolCalls": calls,
            "model": message.model}
    if message.aborted:
        item["interrupted"] = True
    if message.stop_reason == Looping.stop_reason:  # said live as it stopped: said again
        item["notice"] = Looping.notice
    return item


def page(found: list[dict[str, Any]], before: int | None, limit: int) -> dict[str, Any]:
    """The ``limit`` items before index ``before`` (None: the newest), and where the page
    before this one ends (``before`` for the next request; None at the start)."""
    limit = max(1, min(limit, MAX_PAGE))
    end = len(found) if before is None else max(0, min(before, len(found)))
    start = max(0, end - limit)
    return {"items": found[start:end], "before": start if start > 0 else None,
            "total": len(found)}


def read_items(log: TranscriptLog) -> list[dict[str, Any]]:
    """The items of the transcript ``log`` (none when it holds nothing yet)."""
    return items(log.load(quiet=True).entries)
