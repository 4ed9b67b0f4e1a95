"""A server's questions to the person during a call (MCP elicitation), on their way from the
MCP loop to the thread that waits for the call (``Asking``).

The SDK's callback runs on the MCP loop, the person is asked on the thread that waits for
the call (the REPL's, a gateway worker's): a question is queued here and that thread puts it
to the person (``answer``, called while it waits). Two kinds, each with its own front end's
callable (None: nobody can answer here, as in ``-m``, and the question is declined):

- form mode (``form``, ``McpClients.elicit``): a few values (``elicit.fields``), accepted
  with them, or declined;
- URL mode (``link``, ``McpClients.elicit_url``): a web page for the person to open
  (``elicit.link``): "accept" (they open it), "decline" or "cancel". A link that is not
  http(s) is refused: the front end says so in a line and it is declined unasked.

A call the server refuses until the person has been to a page (``URLElicitationRequired``,
-32042) asks the same way, page by page, and its result tells the model in one line that the
person was asked and the call may be retried (``required``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
from collections.abc import Callable
from typing import Any

from clawd.mcp.elicit import ACTIONS, Link, link, required_links, required_note
from clawd.mcp.shapes import Output

log = logging.getLogger(__name__)

Question = tuple[Callable[[], Any], Any, "concurrent.futures.Future[Any]"]


class Asking:
    """The questions of every connection of a process (see the module docstring)."""

    def __init__(self) -> None:
        # (message, requested schema) to the values; None declines
        self.form: Callable[[str, Any], dict[str, Any] | None] | None = None
        # a page to open to "accept", "decline" or "cancel"
        self.link: Callable[[Link], str] | None = None
        self._questions: queue.SimpleQueue[Question] = queue.SimpleQueue()

    async def _handed(self, ask: Callable[[], Any], otherwise: Any) -> Any:
        """On the MCP loop: hand ``ask`` to the waiting thread (``answer``) and wait."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._questions.put((ask, otherwise, answer))
        return await asyncio.wrap_future(answer)

    def answer(self) -> None:
        """On the thread that waits for a call: put the questions asked meanwhile to the
        person; one that fails gets its ``otherwise`` (declined)."""
        while not self._questions.empty():
            ask, otherwise, answer = self._questions.get()
            try:
                got = ask()
            except Exception:  # noqa: BLE001 - a question that cannot be asked is declined
                got = otherwise
            answer.set_result(got)

    async def elicited(self, server: str, context: Any, params: Any) -> Any:
        """The SDK's elicitation callback for ``server``: the person's ``ElicitResult``."""
        from mcp_types import ElicitResult

        if getattr(params, "mode", "form") == "url":
            found = link(server, str(params.message), str(getattr(params, "url", "")))
            return ElicitResult(action=await self.opened(found))
        form, schema = self.form, getattr(params, "requested_schema", None)
        if form is None or schema is None:
            return ElicitResult(action="decline")
        values = await self._handed(lambda: form(f"{server} asks: {params.message}", schema),
                                    None)
        return ElicitResult(action="accept", content=values) if values is not None else (
            ElicitResult(action="decline"))

    async def opened(self, found: Link) -> str:
        """The person's answer to ``found``: "accept", "decline" or "cancel" (declined where
        nobody can answer)."""
        ask = self.link
        if ask is None:
            if found.refused:
                log.info("%s", found.refused)
            return "decline"
        action = await self._handed(lambda: ask(found), "decline")
        return action if action in ACTIONS and not found.refused else "decline"

    async def required(self, server: str, tool: str, data: Any) -> Output:
        """A call refused until the person has been to the pages in ``data`` (-32042): each
        is put to them, and the result says so in one line."""
        links = required_links(server, data)
        actions = [await self.opened(found) for found in links]
        return Output(required_note(server, tool, links, actions), is_error=True)
