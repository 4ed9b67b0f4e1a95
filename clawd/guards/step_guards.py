"""Guards on the stream and the tool calls of a step: loops, stray text, repeated writes.

- ``Looping``: a reply whose end is one stretch repeated over and over is stopped and kept
  with the stretch once (``loops.LoopGuard``), marked with its ``stop_reason`` so that a
  history read later says why it ends there (``notice``, the words shown as it stopped).
- ``TextCalls``: a reply that is nothing but a tool call written as text (``{"name":
  "write", "arguments": {...}}``, fenced or between ``<tool_call>`` tags, because the
  server did not read it as a call) is taken as the call it spells, never shown as JSON.
- ``SwallowedArgs``: a string argument that swallowed the rest of the call's arguments
  (``{"path": 'memory/x.md", "from": 1, "lines": 15}'}``, as llama.cpp handed over a 1.5B
  model's call) is parsed back into the arguments it holds (``unswallowed``).
- ``StrayText``: text a model copied beside a tool call (a lone ``{``, the call's own
  arguments as JSON) and ``<tool_response>``/``<tools>`` tags echoed from its chat template
  are not kept, so the history does not teach them (``replytext``).
- ``RepeatedWrites``: file changes that repeat the step before's (a small model appended
  the same note 17 times) are answered without being made again, and the next answer must
  come in words. Calls are compared without surrounding whitespace and with escaped line
  breaks read as line breaks (``calls_of``).
- ``RepeatedReads``: a ``read``, ``memory_get`` or ``memory_search`` the same as one that
  already ran in the turn, with no file change since, is answered without running, and the
  next answer must come in words (a small model read the same five lines 40 times, then the
  turn ended with nothing shown). Other calls may repeat: polling a command with ``exec``.
- ``FakeReminders``: in a turn that asks for a reminder, ``exec`` is not run (a 1.5B model
  "reminded" with ``echo 'Please call Marta … on Tuesday at 9:00 AM'`` and called it
  done): the next step must say in words that clawd cannot notify at a time, or, in a
  session offered the ``schedule`` tool, set the reminder with it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clawd.context.access import WRITE_TOOLS
from clawd.context.replytext import is_stray, unfenced, without_echoed_tags
from clawd.context.requests import asks_reminder
from clawd.core.messages import Message, Part, TextPart, ToolCall, new_id
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import Guard, Refusal, TurnView
from clawd.guards.loops import LoopGuard

Calls = list[tuple[str, str]]  # (name, arguments as sorted JSON) of one step's tool calls


def calls_of(reply: Message) -> Calls:
    """A step's calls as compared with the next step's."""
    return [call_key(c) for c in reply.tool_calls]


def call_key(call: ToolCall) -> tuple[str, str]:
    """One call as calls are compared: its name and its arguments as sorted JSON."""
    return call.name, json.dumps({k: _same_text(v) for k, v in call.arguments.items()},
                                 sort_keys=True)


def _same_text(value: object) -> object:
    if not isinstance(value, str):
        return value
    return "\n".join(line.rstrip() for line in value.replace("\\n", "\n").strip().split("\n"))


def repeats_writes(calls: Calls, before: Calls | None) -> bool:
    """Whether a step's calls are the same file changes as the step before's. Other calls
    may repeat (polling a command's output with the same ``exec`` is fine)."""
    return calls == before and all(name in WRITE_TOOLS for name, _ in calls)


class Looping(Guard):
    name = "looping"
    stop_reason = "looping"  # the kept reply's ``stopReason`` in the transcript
    notice = "the reply was stopped: the model kept repeating itself"

    def __init__(self, tuning: Thresholds = DEFAULT) -> None:
        super().__init__(tuning)
        self._watch = LoopGuard(tuning)

    def new_reply(self) -> None:
        self._watch = LoopGuard(self.tuning)

    def looping(self, parts: list[str]) -> str | None:
        return self._watch.cut(parts) if self._watch.looping(parts) else None


_CALL_TAG = re.compile(r"</?tool_call>")


def text_calls(text: str) -> list[ToolCall]:
    """The tool calls ``text`` spells and nothing else: one JSON object (fenced or between
    ``<tool_call>`` tags), or several, each ``{"name": str, "arguments": {...}}``; ``[]``
    for anything else (an answer that is JSON data, a call among words)."""
    body = unfenced(_CALL_TAG.sub("\n", text).strip())
    if not body.startswith("{"):
        return []
    found, decoder, at = [], json.JSONDecoder(), 0
    while at < len(body):
        try:
            value, end = decoder.raw_decode(body, at)
        except ValueError:
            return []
        name = value.get("name") if isinstance(value, dict) else None
        arguments = value.get("arguments", {}) if isinstance(value, dict) else None
        if isinstance(arguments, str):  # the arguments as a JSON string, as the wire has them
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        if not isinstance(name, str) or not isinstance(arguments, dict) \
                or set(value) - {"name", "arguments"}:
            return []
        found.append(ToolCall(f"text-{new_id()}", name, arguments))
        at = end
        while at < len(body) and body[at] in " \t\r\n,":
            at += 1
    return found


class TextCalls(Guard):
    name = "text_calls"

    def clean(self, reply: Message) -> Message:
        if reply.tool_calls or not (calls := text_calls(reply.text)):
            return reply
        reply.content = list(calls)
        return reply


def unswallowed(arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with those a string value swallowed taken back out of it: the value
    read as the start of a JSON object's first member (``'memory/x.md", "from": 1}'``
    gives path, from); the arguments given beside it stay as they are. Unchanged when no
    value reads so."""
    for key, value in arguments.items():
        if not (isinstance(value, str) and '", "' in value and value.rstrip().endswith("}")):
            continue
        try:
            whole = json.loads("{" + json.dumps(key) + ': "' + value)
        except ValueError:
            continue
        if isinstance(whole, dict) and isinstance(whole.get(key), str):
            return {**whole, **{k: v for k, v in arguments.items() if k != key}}
    return arguments


class SwallowedArgs(Guard):
    name = "swallowed_args"

    def clean(self, reply: Message) -> Message:
        parts: list[Part] = []
        for part in reply.content:
            if isinstance(part, ToolCall) and (args := unswallowed(part.arguments)) \
                    is not part.arguments:
                part = ToolCall(part.id, part.name, args)
            parts.append(part)
        if parts != reply.content:
            reply.content = parts
        return reply


class StrayText(Guard):
    name = "stray_text"

    def clean(self, reply: Message) -> Message:
        stray = bool(reply.tool_calls) and is_stray(reply.text)
        parts: list[Part] = []
        for part in reply.content:
            if isinstance(part, TextPart):
                if stray or not (text := without_echoed_tags(part.text)):
                    continue
                part = TextPart(text) if text != part.text else part
            parts.append(part)
        if parts == reply.content:
            return reply
        reply.content = parts
        return reply


class RepeatedWrites(Guard):
    name = "repeated_writes"

    def repeats(self, reply: Message, turn: TurnView) -> bool:
        return repeats_writes(calls_of(reply), turn.last_calls)


READ_TOOLS = frozenset({"read", "memory_get", "memory_search"})  # same call, same result


class RepeatedReads(Guard):
    name = "repeated_reads"

    def __init__(self, tuning: Thresholds = DEFAULT) -> None:
        super().__init__(tuning)
        self._turn: TurnView | None = None
        self._seen: set[tuple[str, str]] = set()  # read calls of the turn since a change

    def refuse(self, call: ToolCall, turn: TurnView) -> Refusal | None:
        if turn is not self._turn:  # a new turn
            self._turn, self._seen = turn, set()
        if call.name in WRITE_TOOLS:
            self._seen.clear()  # what a read returns may differ after it
            return None
        if call.name not in READ_TOOLS:
            return None
        key = call_key(call)
        if key in self._seen:
            return Refusal("not run again: this same call already ran in this turn and its "
                           "result is above; answer the user now from it", final=True)
        self._seen.add(key)
        return None


class FakeReminders(Guard):
    name = "fake_reminders"

    def refuse(self, call: ToolCall, turn: TurnView) -> Refusal | None:
        if call.name != "exec" or not asks_reminder(turn.text):
            return None
        if turn.offers_schedule:
            return Refusal("not run: a command run now reminds nobody later; set the reminder "
                           "with the schedule tool (action \"add\", 'at' in the user's words)")
        return Refusal("not run: a command run now reminds nobody later, and clawd cannot "
                       "notify the user at a time; tell the user so plainly in one sentence "
                       "now", final=True)
