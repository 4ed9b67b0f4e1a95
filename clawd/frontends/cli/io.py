"""Input and output at the edges of the command line: input that is not UTF-8, and a
stdout whose reader went away (``| head``).

Input from ``-m``, stdin or a ``--script`` file is decoded before anything is written: bytes
that are not UTF-8 become U+FFFD, with one warning per input. When stdout's reader goes
away, clawd stops quietly with ``STDOUT_CLOSED`` (141, 128 + SIGPIPE, as ``yes | head``
reports it) — a chat first finishes the turn under way, so nothing is left half-done.
A script's comment lines (``#``) are left out; ``\\#`` starts a line with a literal ``#``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from clawd.core.errors import ClawdError

log = logging.getLogger("clawd")

STDOUT_CLOSED = 141  # 128 + SIGPIPE, as `yes | head` reports it


def stdout_gone() -> int:
    """The reader of stdout went away (``| head``): stop quietly, with no traceback and no
    complaint when Python flushes stdout at exit."""
    with contextlib.suppress(OSError, ValueError):  # no real file descriptor (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return STDOUT_CLOSED


class ChatOutput:
    """stdout for a chat: once the reader is gone, writes are dropped (and ``gone`` is
    set) so the turn under way finishes and persists everything; no more lines run."""

    def __init__(self, stream: Any):
        self.stream, self.gone = stream, False

    def write(self, text: str) -> None:
        self._do(self.stream.write, text)

    def flush(self) -> None:
        self._do(self.stream.flush)

    def isatty(self) -> bool:
        return self.stream.isatty()

    def _do(self, action: Any, *args: Any) -> None:
        if self.gone:
            return
        try:
            action(*args)
        except BrokenPipeError:
            self.gone = True
            stdout_gone()


def decode_input(raw: bytes | str, what: str, warned: set[str]) -> str:
    """Input as text: bytes that are not UTF-8 (and the stand-ins Python puts in argv for
    them) become U+FFFD, with one warning per input, before anything is written."""
    if isinstance(raw, str):
        try:
            raw.encode("utf-8")
            return raw
        except UnicodeEncodeError:
            raw = raw.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if what not in warned:
            warned.add(what)
            log.warning("%s is not valid UTF-8; the invalid bytes were replaced with \ufffd",
                        what)
        return raw.decode("utf-8", "replace")


def uncomment(line: str) -> str | None:
    """A script line as it is run: None for a comment (first non-blank character ``#``);
    a backslash before a leading ``#`` is dropped, so ``\\# heading`` sends ``# heading``
    (and ``\\\\#`` sends ``\\#``)."""
    body = line.lstrip()
    if body.startswith("#"):
        return None
    if body.startswith("\\") and body.lstrip("\\").startswith("#"):
        return line[:len(line) - len(body)] + body[1:]
    return line


def script_lines(source: str) -> Iterator[str]:
    """Lines of a script file or stdin, read directly (no terminal handling on a pipe) and
    decoded leniently (``decode_input``), comments left out (``uncomment``)."""
    warned: set[str] = set()
    if source == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        what = "the input"
    else:
        try:
            stream = open(source, "rb")  # noqa: SIM115 - closed below, after the last line
        except OSError as exc:
            raise ClawdError(f"cannot read script {source}: {exc.strerror}") from None
        what = f"script {source}"
    try:
        for raw in stream:
            line = uncomment(decode_input(raw, what, warned).rstrip("\r\n"))
            if line is not None:
                yield line
    finally:
        if stream is not getattr(sys.stdin, "buffer", sys.stdin):
            stream.close()
