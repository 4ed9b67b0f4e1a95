"""Running the tool calls of one assistant message (``ToolRunner``).

Each call runs in order and its result is persisted at once, so the transcript never holds a
call without its result: a stop (``Cancelled``, or a Ctrl-C) gives every remaining call an
"interrupted" result before it propagates as ``Cancelled``; the turn's token is checked
before each call and handed to the tools that wait (``ToolContext.cancel``). A tool that
fails (``ClawdError``, or a bug in the tool) gives an error result the model can act on;
nothing here ends the turn. A result is capped at ``tools.maxOutputChars`` and at half the
window (head and tail kept), so it always fits a request next to the fixed layers and a
summary. Calls the ``repeated_writes`` guard caught (the step before's file changes again)
are answered without running: their result says so; so are calls another guard refused
(``refused``: the error result of each, by call id).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping

from clawd.context.access import Access
from clawd.context.pruning import cap_tool_result
from clawd.core.cancel import Cancelled, CancelToken
from clawd.core.errors import ClawdError
from clawd.core.events import Event, ToolFinished, ToolStarted
from clawd.core.messages import ImagePart, Message, ToolCall
from clawd.core.tokens import estimate_text
from clawd.loop.runtime import Runtime
from clawd.tools.base import Tool, ToolContext, ToolOutput

log = logging.getLogger(__name__)

# not an error: nothing failed, and a small model answers an error result with an apology
# ("I am sorry, I couldn't assist with that.") though its note was written
REPEATED = ("already done: the step before made this same call with the same arguments, and "
            "its result is above; do not call it again, answer the user now")


class ToolRunner:
    """The tools one session is offered, and how they run there."""

    def __init__(self, runtime: Runtime, tools: list[Tool], access: Access, key: str = ""):
        self.rt, self.tools, self.access, self.key = runtime, tools, access, key

    def run(self, reply: Message, keep: Callable[[Message], None], token: CancelToken, *,
            window: int, flush: bool, repeated: bool = False,
            refused: Mapping[str, str] | None = None) -> Generator[Event, None, None]:
        """Run ``reply``'s tool calls; ``keep`` persists each result; ``token`` stops the
        turn (checked before each call, and by a tool that waits). ``flush``: the calls
        come from a memory-flush turn (its writes follow the flush's rules). ``repeated``:
        the calls repeat the step before's exactly, and are answered without running.
        ``refused``: calls a guard refused, by id, answered with that error without
        running."""
        refused = refused or {}
        images: list[ImagePart]
        pending = list(reply.tool_calls)
        try:
            while pending:
                call = pending[0]
                token.check()
                yield ToolStarted(call.id, call.name, call.arguments)
                if repeated:
                    text, is_error, images = REPEATED, False, []
                elif call.id in refused:
                    text, is_error, images = refused[call.id], True, []
                else:
                    text, is_error, images = self.call(call, token, window=window,
                                                       flush=flush)
                result = Message.tool_result(call, text, is_error, flush=flush)
                result.content += images
                keep(result)
                pending.pop(0)
                yield ToolFinished(call.id, call.name, is_error, text)
        except (Cancelled, KeyboardInterrupt):
            for call in pending:  # every call keeps a result, so the history stays valid
                keep(Message.tool_result(call, "interrupted by the user", True, flush=flush))
            raise Cancelled() from None

    def call(self, call: ToolCall, token: CancelToken, *, window: int, flush: bool = False
             ) -> tuple[str, bool, list[ImagePart]]:
        """One call's result text, whether it is an error, and the images it returned (an
        MCP server's tool may return some)."""
        images: list[ImagePart] = []
        tool = next((t for t in self.tools if t.spec.name == call.name), None)
        if tool is None:  # a small model made up "memory_set": say what there is
            names = ", ".join(t.spec.name for t in self.tools)
            return f"unknown tool: {call.name}; the tools are {names or 'none'}", True, []
        rt = self.rt
        ctx = ToolContext(rt.workspace, rt.settings, allow_exec=rt.allow_exec,
                          approve=rt.approve, confirm=rt.confirm, memory=rt.memory,
                          today=lambda: rt.clock().date(), access=self.access, flush=flush,
                          files=rt.files, backups=rt.backups, cancel=token,
                          agent_id=rt.agent_id, session_key=self.key, now=rt.clock,
                          offered=tuple(t.spec.name for t in self.tools))
        try:
            output = tool.run(call.arguments, ctx)
            if isinstance(output, ToolOutput):
                text, is_error, images = output.text, output.is_error, output.images
            else:
                text, is_error = output, False
        except ClawdError as exc:
            text, is_error = f"error: {exc}", True
        except Exception as exc:  # noqa: BLE001 - a tool bug must not end the turn
            # one line for the user (the model gets the error as the result); the
            # traceback only with debug logging
            log.warning("tool %s failed: %s: %s", call.name, type(exc).__name__, exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            text, is_error = f"error: {type(exc).__name__}: {exc}", True
        return cap_tool_result(text, self._result_chars(text, window)), is_error, images

    def _result_chars(self, text: str, window: int) -> int:
        """The cap of one result: ``maxOutputChars``, and at most half the window."""
        limit, room = self.rt.settings.tools.max_output_chars, window // 2
        if len(text) <= room:  # a token is at least a character: it fits, no need to count
            return limit
        tokens = estimate_text(text)
        return min(limit, len(text) * room // tokens) if tokens > room else limit
