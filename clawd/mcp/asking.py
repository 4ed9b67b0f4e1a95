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

A call is bounded by its server's ``requestTimeoutMs`` (``within``), but the time a question
is open to the person does not count: an answer on the web page may take minutes, and the
call must still be there to take it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from clawd.mcp.elicit import ACTIONS, Link, link, required_links, required_note
from clawd.mcp.shapes import Output

log = logging.getLogger(__name__)
T = TypeVar("T")
URL_ELICITATION_REQUIRED = -32042  # a call needs the person on a web page first
SLICE_SECONDS = 0.25  # how often ``within`` looks whether a question is open

Question = tuple[Callable[[], Any], Any, "concurrent.futures.Future[Any]"]


class Asking:
    """The questions of every connection of a process (see the module docstring)."""

    def __init__(self) -> None:
        # (message, requested schema) to the values; None declines
        self.form: Callable[[str, Any], dict[str, Any] | None] | None = None
        # a page to open to "accept", "decline" or "cancel"
        self.link: Callable[[Link], str] | None = None
        self._questions: queue.SimpleQueue[Question] = queue.SimpleQueue()
        self.open = 0  # questions put to the person now (changed on the MCP loop only)

    async def _handed(self, ask: Callable[[], Any], otherwise: Any) -> Any:
        """On the MCP loop: hand ``ask`` to the waiting thread (``answer``) and wait."""
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._questions.put((ask, otherwise, answer))
        self.open += 1
        try:
            return await asyncio.wrap_future(answer)
        finally:
            self.open -= 1

    def answer(self) -> None:
        """On the thread that waits for a call: put the questions asked meanwhile to the
        person; one that fails gets its ``otherwise`` (declined). One given up meanwhile
        (the call timed out, the server cancelled it) is not asked, or its answer dropped."""
        while not self._questions.empty():
            ask, otherwise, answer = self._questions.get()
            if answer.cancelled():
                continue
            try:
                got = ask()
            except Exception:  # noqa: BLE001 - a question that cannot be asked is declined
                got = otherwise
            with contextlib.suppress(concurrent.futures.InvalidStateError):
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


async def within(asking: Asking | None, awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result, a ``TimeoutError`` once it has run ``seconds`` without a
    question open to the person (``asking``; without it, plainly ``seconds``)."""
    if asking is None:
        return await asyncio.wait_for(awaitable, seconds)
    loop, left = asyncio.get_running_loop(), seconds
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            started, was_open = loop.time(), asking.open
            done, _ = await asyncio.wait({task}, timeout=min(left, SLICE_SECONDS))
            if done:
                return task.result()
            if not (was_open or asking.open):
                left -= loop.time() - started
            if left <= 0:
                raise TimeoutError
    finally:
        task.cancel()  # a no-op once it is done
