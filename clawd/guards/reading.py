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
(AGENTS.md, MEMORY.md, today's log) needs no read.
"""

from __future__ import annotations

import re

from clawd.context.facts import asks
from clawd.context.references import references
from clawd.context.requests import content_words, names_file
from clawd.core.messages import Message
from clawd.core.phrases import talk
from clawd.core.templates import render
from clawd.core.thresholds import DEFAULT, Thresholds
from clawd.guards.base import AskAgain, Guard, TurnView

READ_TOOLS = ("read", "memory_get")
# a path in a message: folders and a name with an extension ("notes/wifi.txt", "lease.md")
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w/-])")


def asked_files(text: str) -> list[str]:
    """The workspace paths a message asks about ("Read docs/lease.txt and tell me …"): the
    paths it names, when it asks for something."""
    found = [p for p in _PATH.findall(text) if not re.fullmatch(r"[\d.]+", p)]
    return found if found and asks(text) and talk.ABOUT_A_FILE.search(text) else []


def _this_turn(turn: TurnView) -> list[Message]:
    """The messages of the turn under way: those after the user's message."""
    messages = turn.messages
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and not messages[i].flush:
            return messages[i + 1:]
    return messages


def _reads(turn: TurnView, path: str) -> list[tuple[bool, str]]:
    """(failed, text) of each read of ``path`` in the turn."""
    results = {m.tool_call_id: m for m in _this_turn(turn) if m.role == "toolResult"}
    out = []
    for m in _this_turn(turn):
        for call in m.tool_calls if m.role == "assistant" else []:
            target = str(call.arguments.get("path") or "").split("#", 1)[0]
            if call.name in READ_TOOLS and names_file(path, target) and call.id in results:
                out.append((results[call.id].is_error, results[call.id].text))
    return out


def uses(answer: str, result: str, message: str, tuning: Thresholds = DEFAULT) -> bool:
    """Whether ``answer`` uses what a read returned: a number, identifier or name of it, or
    ``used_words`` of its words that ``message`` did not say."""
    exact, names = references(result)
    said = answer.lower()
    if any(ref.lower() in said for ref in exact | names if ref.lower() not in message.lower()):
        return True
    own = content_words(result) - content_words(message)
    return len(own & content_words(answer)) >= min(tuning.used_words, len(own))


class FileAnswer(Guard):
    name = "file_answer"

    def answer(self, reply: Message, turn: TurnView) -> AskAgain | None:
        if not reply.text.strip():
            return None  # a blank answer is the blank guard's
        for path in asked_files(turn.text):
            if any(names_file(path, shown) for shown in turn.files):
                continue  # in the context already (AGENTS.md, MEMORY.md, today's log)
            reads = _reads(turn, path)
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
