"""A server's question during a call, asked on the terminal (``McpClients.elicit`` and
``elicit_url`` in the REPL).

A form (``__call__``): its message, then each field it asks for, read as its type
(``clawd.mcp.elicit``). An answer that is not of the field's type is asked again, saying
what is expected; Ctrl-D declines the whole question (the server goes on without the
values); Ctrl-C stops the reply, as it does at the ``exec`` prompt.

A web page to open (``link``): the server's message (cleaned), the URL and its host on a line
of its own, then "open it? [y/N]": y accepts, and the page is opened in a browser only where
one obviously can be (``can_open``: a desktop, not an SSH session, where ``webbrowser``
would start a text browser in this terminal), else the person opens it; anything else, or
Ctrl-D, declines; Ctrl-C cancels. A link that is not http(s) is a line, and declined.
"""

from __future__ import annotations

import os
import sys
import webbrowser
from collections.abc import Callable, Mapping
from typing import Any

from clawd.mcp.elicit import YES, Link, clean, coerce, fields


def can_open(environ: Mapping[str, str], platform: str) -> bool:
    """Whether a browser can be opened here without taking over the terminal: macOS or
    Windows, or a graphical session (``DISPLAY``/``WAYLAND_DISPLAY``), not over SSH."""
    if environ.get("SSH_CONNECTION") or environ.get("SSH_TTY"):
        return False
    return platform in ("darwin", "win32") or bool(
        environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def _browser() -> Callable[[str], Any] | None:
    return webbrowser.open if can_open(os.environ, sys.platform) else None


class TerminalQuestions:
    """``McpClients.elicit`` and ``elicit_url`` for the REPL (see the module docstring);
    ``open_url``: how an accepted page is opened (default: a browser where ``can_open``)."""

    def __init__(self, ask: Any = None, say: Any = print,
                 open_url: Callable[[str], Any] | None = None) -> None:
        self._ask, self._say = ask, say
        self._open = open_url or _browser()

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

    def link(self, found: Link) -> str:
        """A web page a server asks the person to open: "accept", "decline" or "cancel"."""
        if found.refused:
            self._say(found.refused)
            return "decline"
        for line in found.lines():
            self._say(line)
        try:
            text = (self._ask or _prompt)("open it? [y/N]: ")
        except EOFError:
            text = ""
        except KeyboardInterrupt:
            self._say("cancelled")
            return "cancel"
        if text.strip().lower() not in YES:
            self._say("declined")
            return "decline"
        opened = False
        if self._open is not None:
            try:
                opened = bool(self._open(found.url))
            except Exception:  # noqa: BLE001 - then the person opens it
                opened = False
        self._say(f"opened in your browser: {found.host}" if opened else
                  "open it in your browser; the call goes on")
        return "accept"


def _prompt(text: str) -> str:
    from prompt_toolkit import PromptSession

    return str(PromptSession().prompt(text))
