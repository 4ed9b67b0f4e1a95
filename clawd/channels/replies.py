"""A turn's events shown in a chat: the front end a channel is (docs/channels.md).

``Replier.follow`` reads the turn's lines from its feed (the same ``--json`` lines the web
page gets) and, while the turn runs, keeps "typing…" showing (Telegram shows it for 5 s, so
it is sent again every ``TYPING_SECONDS``). A turn that uses tools, or whose reply takes
longer than ``EDIT_SECONDS`` to write, gets one progress message, edited as it goes (at
most every ``EDIT_SECONDS``, within Telegram's limits): the tool steps, then the reply's
text so far as the model streams it (``preview``: the Markdown so far rendered whole, so a
tag is never cut, and marked unfinished), which the reply's first part then replaces. A
preview's edit is not waited for: a 429 skips previews for its ``retry_after``, and the
final text's edit comes after it. The reply is rendered from Markdown and cut at the limit
(``split.parts``); a command's answer is shown as preformatted text, a notice in italics,
an error after a warning sign. ``sent`` counts the messages that went out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from clawd.channels import markup, split
from clawd.channels.base import Channel, Inbound, Throttled

log = logging.getLogger(__name__)
TYPING_SECONDS = 4.0
EDIT_SECONDS = 3.0


class Replier:
    """Shows one turn in the chat ``message`` came from."""

    def __init__(self, channel: Channel, message: Inbound):
        self.channel, self.message = channel, message
        self.progress: int | None = None  # the message edited with the steps
        self.steps: list[str] = []
        self.edited = time.monotonic()  # when the chat last changed (a preview waits)
        self.quiet_until = 0.0  # no preview before this (a 429's retry_after)
        self.streamed = ""  # the model's text so far in this step
        self.sent = 0

    async def follow(self, lines: AsyncIterator[tuple[int, dict[str, Any]]]) -> None:
        typing = asyncio.get_running_loop().create_task(self._typing())
        try:
            async for _, line in lines:
                kind = line.get("type")
                if kind == "delta":
                    self.streamed += str(line.get("text") or "")
                    await self._preview()
                elif kind == "tool":
                    self.streamed = ""  # what it said before a tool is not the reply
                    await self._step(str(line.get("name") or "a tool"))
                elif kind == "reply":
                    typing.cancel()
                    await self.markdown(str(line.get("text") or ""))
                elif kind == "command" and line.get("text"):
                    await self.parts(split.parts(f"```\n{line['text']}\n```"))
                elif kind == "notice" and line.get("text"):
                    await self.parts([f"<i>{markup.escape(str(line['text']))}</i>"])
                elif kind == "error":
                    await self.parts([f"⚠️ {markup.escape(str(line.get('message')))}"])
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing

    async def markdown(self, text: str) -> None:
        if text.strip():
            await self.parts(split.parts(text))

    async def parts(self, found: list[str]) -> None:
        """Send ``found`` in order; the first replaces the progress message, if any."""
        for part in found:
            if self.progress is not None:
                number, self.progress = self.progress, None
                await asyncio.sleep(self.quiet_until - time.monotonic())  # a 429's wait
                await self.channel.edit(self.message.chat_id, number, part)
                continue
            await self.channel.send(self.message.chat_id, part, thread=self.message.thread)
            self.sent += 1

    async def _step(self, name: str) -> None:
        self.steps.append(name)
        text = "⏳ " + " → ".join(markup.escape(s) for s in self.steps[-6:])
        if self.progress is None:
            self.progress = await self.channel.send(self.message.chat_id, text,
                                                    thread=self.message.thread)
            self.sent += 1
            self.edited = time.monotonic()
        elif time.monotonic() - self.edited >= EDIT_SECONDS:
            self.edited = time.monotonic()
            await self.channel.edit(self.message.chat_id, self.progress, text)

    async def _preview(self) -> None:
        """Show the text so far, when ``EDIT_SECONDS`` have passed since the chat last
        changed and no 429 asks to wait."""
        now = time.monotonic()
        if now - self.edited < EDIT_SECONDS or now < self.quiet_until:
            return
        text = preview(self.streamed)
        if not text:
            return
        self.edited = now
        if self.progress is None:
            self.progress = await self.channel.send(self.message.chat_id, text,
                                                    thread=self.message.thread)
            self.sent += 1
            return
        try:
            await self.channel.edit(self.message.chat_id, self.progress, text, wait=False)
        except Throttled as exc:
            self.quiet_until = time.monotonic() + exc.retry_after
            log.info("a preview waits %.0f s (429)", exc.retry_after)

    async def _typing(self) -> None:
        while True:
            try:
                await self.channel.typing(self.message.chat_id, thread=self.message.thread)
            except Exception as exc:  # noqa: BLE001 - "typing…" is a courtesy
                log.debug("typing not shown: %s", type(exc).__name__)
            await asyncio.sleep(TYPING_SECONDS)


UNFINISHED = " …"


def preview(markdown: str, limit: int = split.TELEGRAM_LIMIT) -> str:
    """The reply so far as one message: its Markdown rendered whole (every tag closed, an
    open code fence closed at the end), the first part when it is longer than ``limit``,
    marked unfinished; "" while there is nothing to show."""
    found = split.parts(markdown, limit - len(UNFINISHED))
    return found[0] + UNFINISHED if found else ""
