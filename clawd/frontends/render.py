"""Rendering the loop's events as text or JSON lines, for every front end.

``Renderer`` writes replies as they stream to one stream and everything said about the turn
(tool calls, flushes, compactions, notices, errors) as whole lines to a side stream, which is
the same stream in the REPL and stderr for ``-m``/``--script``; in the REPL, replies are
rendered as Markdown (``clawd.frontends.markdown``) when the terminal has colour
(``NO_COLOR`` unset).
The text of a model step that follows another step's text in the same turn (an answer asked
for again after the first was shown) starts a new paragraph. ``event_json`` is the
``--json`` form of an event (every line in docs/json-events.md); ``drive`` feeds a stream
of events to a renderer, passing a Ctrl-C during rendering back into the turn.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TextIO

from clawd.core import events as ev
from clawd.core.cancel import Cancelled
from clawd.core.textcut import shorten

if TYPE_CHECKING:
    from clawd.frontends.markdown import MarkdownStream

DIM, RED, YELLOW, RESET = "\x1b[2m", "\x1b[31m", "\x1b[33m", "\x1b[0m"


def brief_arguments(name: str, arguments: dict[str, Any], width: int = 100) -> str:
    """A tool call's arguments on one short line (file contents left out)."""
    if name == "exec" and isinstance(arguments.get("command"), str):
        text = arguments["command"]
    else:
        text = " ".join(f"{k}={v!r}" for k, v in arguments.items()
                        if k not in ("content", "newText", "oldText"))
    text = " ".join(text.split())
    return shorten(text, width, "...")


RESULT_CHARS = 2000  # of a tool result in a ``toolResult`` event

# How a compaction's summary was made (``Compacted.method``), in words.
COMPACTION_METHODS = {
    "single": "summarised in one request",
    "chunked": "summarised in parts, then merged",
    "smaller-chunks": "summarised in smaller parts: the first attempt did not fit",
    "simple": "summarised with the short prompt: the full one failed",
    "truncated": "no summary could be made: the older messages were replaced by a note of "
                 "what they held",
}


def event_json(event: Any, *, deltas: bool = False) -> list[dict[str, Any]]:
    """The ``--json`` lines of an event (docs/json-events.md); text deltas only with
    ``deltas``. A turn ends with its ``reply`` (left out when an error ended the turn before
    any text) and a ``done`` line."""
    if isinstance(event, ev.TextDelta):
        return [{"type": "delta", "text": event.text}] if deltas and event.text else []
    if isinstance(event, ev.Waiting):  # streamed only: what a live view shows meanwhile
        return [{"type": "waiting", "stage": event.stage}] if deltas else []
    if isinstance(event, ev.TurnDone):
        done = {"type": "done", "sessionKey": event.session_key, "sessionId": event.session_id,
                "model": event.model, "usage": event.usage.to_json(), "steps": event.steps,
                "aborted": event.aborted, "interrupted": event.interrupted,
                "failed": event.failed}
        if not event.text and (event.failed or event.interrupted):
            return [done]
        return [{"type": "reply", "text": event.text, "aborted": event.aborted}, done]
    if isinstance(event, ev.CommandOutput):
        return [{"type": "command", "name": event.name, "text": event.text}]
    if isinstance(event, ev.Flushed):
        return [{"type": "flush", "files": event.files, "skipped": event.skipped}]
    if isinstance(event, ev.Recalled):
        return [{"type": "recall", "results": [
            {"path": path, "startLine": start, "endLine": end, "score": score}
            for path, start, end, score in event.places]}]
    if isinstance(event, ev.Compacted):
        return [{"type": "compaction", "tokensBefore": event.tokens_before,
                 "tokensAfter": event.tokens_after, "method": event.method}]
    if isinstance(event, ev.ErrorEvent):
        return [{"type": "error", "message": event.message}]
    if isinstance(event, ev.ToolStarted):
        return [{"type": "tool", "id": event.call_id, "name": event.name,
                 "arguments": event.arguments}]
    if isinstance(event, ev.ToolFinished):
        return [{"type": "toolResult", "id": event.call_id, "name": event.name,
                 "isError": event.is_error, "text": event.text[:RESULT_CHARS],
                 "truncated": len(event.text) > RESULT_CHARS}]
    if isinstance(event, ev.Notice):
        return [{"type": "notice", "text": event.text}]
    return []


def _tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Renderer:
    """Writes events to a text stream: replies as they stream, the rest on lines of their own.

    ``color`` adds ANSI styling (dim for tool calls and notices, red for errors); with
    ``markdown`` too, replies are rendered as Markdown wrapped to ``width`` (the terminal's,
    measured at the start of each reply, when not given); ``as_json`` writes the JSON lines
    of ``clawd chat --json`` instead, with text deltas when ``deltas``.
    """

    def __init__(self, stream: TextIO | None = None, *, side: TextIO | None = None,
                 color: bool | None = None, as_json: bool = False, deltas: bool = False,
                 markdown: bool = False, width: int | None = None):
        self.stream = stream if stream is not None else sys.stdout
        self.side = side if side is not None else self.stream
        if color is None:  # a terminal's default, unless NO_COLOR is set (no-color.org)
            color = self.side.isatty() and not os.environ.get("NO_COLOR")
        self.color = color and not as_json
        self.as_json, self.deltas = as_json, deltas
        self.markdown = markdown and self.color
        self.width = width
        self.midline = False
        self._reply: MarkdownStream | None = None  # the Markdown of the reply under way
        self._open = False  # reply text was the last thing written
        self._new_step = False  # a model step began since: its text is a new paragraph

    def _style(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.color else text

    def line(self, text: str, code: str = "", *, side: bool = True) -> None:
        """A whole line (on the side stream unless ``side`` is false), after ending a reply
        line that is still open on the same stream."""
        target = self.side if side else self.stream
        if target is self.stream or (self.midline and _tty(target) and _tty(self.stream)):
            self._end_reply()  # two streams on one screen (-m): not on the reply's line
        self._open = False
        self._write(self._style(code, text) + "\n", target)

    def _end_reply(self) -> None:
        """End the reply's last line (and let out what its Markdown still holds)."""
        if self._reply is not None:
            self._write(self._reply.finish())
            self._reply = None
        if self.midline:
            self._write("\n")
            self.midline = False

    def _text(self, text: str) -> None:
        if not self.markdown:
            self._write(text)
            self.midline = not text.endswith("\n")
            return
        if self._reply is None:
            from clawd.frontends.markdown import MarkdownStream  # not needed before the first reply

            self._reply = MarkdownStream(self.width or shutil.get_terminal_size().columns)
        self._write(self._reply.feed(text))

    def _write(self, text: str, target: TextIO | None = None) -> None:
        target = target or self.stream
        target.write(text)
        target.flush()

    def event(self, event: Any) -> bool:
        """Render one event; True when the REPL should stop."""
        if self.as_json:
            for out in event_json(event, deltas=self.deltas):
                self._write(json.dumps(out, ensure_ascii=False) + "\n")
            return bool(getattr(event, "quit", False))
        if isinstance(event, ev.TextDelta):
            if event.text:
                if self._new_step and self._open:  # a step's words after another's
                    self._text("\n" if not self.midline and not self.markdown else "\n\n")
                self._new_step = False
                self._text(event.text)
                self._open = True
        elif isinstance(event, ev.Waiting):
            self._new_step = self._new_step or event.stage == "model"
        elif isinstance(event, ev.TurnDone):
            self._end_reply()
            self._open = self._new_step = False
        elif isinstance(event, ev.CommandOutput):
            if event.text:  # empty: the command's events said it all (``/compact``)
                self.line(event.text, side=False)
            return event.quit
        elif isinstance(event, ev.ToolStarted):
            self.line(f"· {event.name} {brief_arguments(event.name, event.arguments)}", DIM)
        elif isinstance(event, ev.ToolFinished):
            if event.is_error:
                first = event.preview.splitlines()[0] if event.preview else ""
                self.line(f"· {event.name} failed: {first}", RED)
        elif isinstance(event, ev.Flushed):
            what = event.skipped or ", ".join(event.files) or "nothing to store"
            self.line(f"· memory flush: {what}", DIM)
        elif isinstance(event, ev.Recalled):
            self.line("· recalled: " + ", ".join(
                f"{path}:{start}" + (f"-{end}" if end != start else "")
                for path, start, end, _ in event.places), DIM)
        elif isinstance(event, ev.Compacted):
            how = COMPACTION_METHODS.get(event.method, event.method)
            self.line(f"· compacted: {event.tokens_before:,} → {event.tokens_after:,} tokens "
                      f"({how})", YELLOW if event.method == "truncated" else DIM)
        elif isinstance(event, ev.Notice):
            self.line(f"· {event.text}", YELLOW)
        elif isinstance(event, ev.ErrorEvent):
            self.line(f"error: {event.message}", RED)
        return False


def drive(events: Generator[Any, None, Any], render: Callable[[Any], bool], *, reraise: bool = False
          ) -> bool:
    """Render a stream of events; True when one of them asks to quit.

    A Ctrl-C that lands while an event is being rendered (rather than inside the loop) is
    thrown into the generator at the point it is paused, as the stop it is (``Cancelled``),
    so the turn handles it as its own:
    it keeps the partial reply and still finishes with ``TurnDone(aborted=True)``. A Ctrl-C
    the stream does not handle ends it: noted (the REPL goes on), or with ``reraise`` raised
    again (one-shot and scripted runs stop).
    """
    quit_, interrupted = False, False
    while True:
        try:
            event = events.throw(Cancelled()) if interrupted else next(events)
        except StopIteration:
            return quit_
        except (Cancelled, KeyboardInterrupt):  # a command that does not handle it: ended
            if reraise:
                raise KeyboardInterrupt from None
            render(ev.Notice("interrupted"))
            return quit_
        interrupted = False
        try:
            quit_ = render(event) or quit_
        except KeyboardInterrupt:
            interrupted = True
