"""What of a model's reply text is kept and shown (pure functions).

Small local models leave text in their replies that, sent back in the history, teaches
them a habit for the rest of the conversation:

- Beside a tool call, llama.cpp keeps what Qwen wrote before its call: a lone ``{``, or the
  call's own arguments as JSON. After a lone ``{`` in its history the 1.5B model answered
  every later message as a JSON object. Such text (``is_stray``) is neither shown nor kept.
- Qwen's chat template hands a tool's result to the model between ``<tool_response>``
  tags. Echoing a result in its answer, the model wrote those tags too, and from then on
  started every answer with ``<tool_response>``. The tags are dropped from the kept text
  (``without_echoed_tags``); the words between them stay.
"""

from __future__ import annotations

import re

_ECHOED_TAG = re.compile(r"[ \t]*</?tool_response>[ \t]*\n?")


def unfenced(text: str) -> str:
    """``text`` without a code fence around it and the fence's ``json`` tag."""
    body = text.strip().strip("`").strip()
    return body[4:].lstrip() if body.startswith("json") else body


def is_stray(text: str) -> bool:
    """Whether text beside a tool call says nothing of its own: no letter or digit, or a
    JSON object (the call's arguments again)."""
    body = text.strip()
    if body.startswith("```"):
        body = unfenced(body)
    return bool(body) and (not any(c.isalnum() for c in body)
                           or (body.startswith("{") and body.endswith("}")))


def without_echoed_tags(text: str) -> str:
    """``text`` without the ``<tool_response>`` tags a model copied from its tool results."""
    return _ECHOED_TAG.sub("", text).strip() if "tool_response>" in text else text
