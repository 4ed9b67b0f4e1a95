"""A server's question during a call, asked on the terminal (``McpClients.elicit`` in the
REPL): its message, then each field it asks for, read as its type (``clawd.mcp.elicit``).

An answer that is not of the field's type is asked again, saying what is expected; Ctrl-D
declines the whole question (the server goes on without the values); Ctrl-C stops the reply,
as it does at the ``exec`` prompt.
"""

from __future__ import annotations

from typing import Any

from clawd.mcp.elicit import clean, coerce, fields


class TerminalQuestions:
    """``McpClients.elicit`` for the REPL (see the module docstring)."""

    def __init__(self, ask: Any = None, say: Any = print) -> None:
        self._ask, self._say = ask, say

    def __call__(self, message: str, schema: Any) -> dict[str, Any] | None:
        ask = self._ask or _prompt
        self._say(clean(message))
        values: dict[str, Any] = {}
        for field in fields(schema):
            while True:
                try:
                    text = ask(field.prompt())
                except EOFError:
                    self._say("declined")
                    return None
                try:
                    value = coerce(field, text)
                    break
                except ValueError as exc:
                    self._say(f"  {exc}")
            if value is not None:
                values[field.name] = value
        return values


def _prompt(text: str) -> str:
    from prompt_toolkit import PromptSession

    return str(PromptSession().prompt(text))
