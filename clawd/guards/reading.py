"""A request to read a file, answered without reading it or without what it returned.

"Read notes/wifi.txt and tell me the router's admin address." A 1.5B model answered
"Here are the lines from notes/wifi.txt: Router's admin address: 192.168.1.1" without
calling ``read`` (the file says 192.168.178.1); told "Read docs/lease.txt and tell me who my
landlord is", it ran ``read`` and answered "It looks like you have the correct
information." ``FileAnswer`` (guard ``file_answer``, weak profile) asks once more when the
user's message asks what a file of the workspace says, by its path (``asked_files``: "store
alpha in notes.md" asks for a write, not what the file says), and the
answer either comes before any ``read`` of it in the turn (the answer is dropped: it is made
up) or uses nothing of what the read returned: no number, identifier or name of it, and
fewer than ``used_words`` (the profile's ``Thresholds``: two) of its words that the
message did not say. A read that failed
(no such file) is answered as it is, and a file the model was shown in its context
(AGENTS.md, MEMORY.md, today's log) needs no read. Asked once, the second answer stands;
when it still uses nothing of the file (a 1.5B model answered in JSON with an address the
file does not hold), the turn ends with a notice quoting the file's lines the message asks
about (``asked_lines``), so what the person reads last is what the file says.
"""

from __future__ import annotations

import re

from clawd.context.facts import asks
from clawd.context.references import references
from clawd.context.requests import content_words, names_file, stem
from clawd.core.messages import Message, ToolCall, answered_calls
from clawd.core.phrases import talk
from clawd.core.templates import render
from clawd.core.textcut import shorten
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import AskAgain, Guard, TurnView

READ_TOOLS = ("read", "memory_get")
QUOTED_LINES = 3  # of a file, in the notice of an answer that did not use it
QUOTED_CHARS = 300
# a path in a message: folders and a name with an extension ("notes/wifi.txt", "lease.md")
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w/-])")


def asked_files(text: str) -> list[str]:
    """The workspace paths a message asks about ("Read docs/lease.txt and tell me …"): the
    paths it names, when it asks for something."""
    found = [p for p in _PATH.findall(text) if not re.fullmatch(r"[\d.]+", p)]
    return found if found and asks(text) and talk.ABOUT_A_FILE.search(text) else []


def call_path(call: ToolCall) -> str:
    """The file a tool call names: its ``path`` argument without an ``#anchor``."""
    return str(call.arguments.get("path") or "").split("#", 1)[0]


def reads_of(turn: TurnView, path: str) -> list[tuple[bool, str]]:
    """(failed, text) of each read of ``path`` in the turn."""
    return [(result.is_error, result.text) for call, result in answered_calls(turn.this_turn())
            if call.name in READ_TOOLS and names_file(path, call_path(call))]


def uses(answer: str, result: str, message: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``answer`` uses what a read returned: a number, identifier or name of it, or
    ``used_words`` of its words that ``message`` did not say."""
    exact, names = references(result)
    said = answer.lower()
    if any(ref.lower() in said for ref in exact | names if ref.lower() not in message.lower()):
        return True
    own = content_words(result) - content_words(message)
    return len(own & content_words(answer)) >= min(tuning.used_words, len(own))


def asked_lines(text: str, message: str) -> str:
    """The lines of ``text`` (a file's) that share a word with ``message``, in any form, else
    its first lines: at most ``QUOTED_LINES``, joined by " / " within ``QUOTED_CHARS``."""
    asked = {stem(w) for w in content_words(message)}
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    chosen = [line for line in lines if {stem(w) for w in content_words(line)} & asked]
    return shorten(" / ".join((chosen or lines)[:QUOTED_LINES]), QUOTED_CHARS)


def _answer(turn: TurnView) -> str:
    """The turn's last answer in words."""
    return next((m.text for m in reversed(turn.this_turn())
                 if m.role == "assistant" and not m.tool_calls), "")


class FileAnswer(Guard):
    name = "file_answer"

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        if not reply.text.strip():
            return None  # a blank answer is the blank guard's
        for path in asked_files(turn.text):
            if any(names_file(path, shown) for shown in turn.files):
                continue  # in the context already (AGENTS.md, MEMORY.md, today's log)
            reads = reads_of(turn, path)
            if not reads:
                ask = render("file_unread.md.j2", path=path)
                return AskAgain(self.name, Message.user(ask), drop=True,
                                why=f"the answer came before {path} was read")
            if any(failed for failed, _ in reads):
                continue  # no such file: the answer says so
            if not any(uses(reply.text, text, turn.text, self.tuning) for _, text in reads):
                ask = render("file_unused.md.j2", path=path)
                return AskAgain(self.name, Message.user(ask), drop=True,
                                why=f"the answer did not use what {path} holds")
        return None

    def unmet(self, turn: TurnView) -> str | None:
        answer = _answer(turn)
        for path in asked_files(turn.text):
            reads = [text for failed, text in reads_of(turn, path) if not failed]
            if reads and answer and not any(uses(answer, text, turn.text, self.tuning)
                                            for text in reads):
                found = asked_lines(reads[-1], turn.text.replace(path, " "))
                return f"the answer does not use what {path} holds; it reads: {found}"
        return None
