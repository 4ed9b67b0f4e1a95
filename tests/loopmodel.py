"""A deterministic model for long scripted sessions: it chats, takes notes when flushed, summarises.

``LoopModel`` is a callable reply for ``ScriptedProvider(default=...)``. It tells the three
kinds of request apart the way the loop builds them: a summary request carries no tools; a
flush request carries the flush system prompt; anything else is a chat turn. On a flush it
notes every fact code (``FACT-<n>``) it can see in the request's messages that today's daily
log (as the project context shows it) does not hold yet, appending with ``edit`` (or ``write``
for a new file), then answers ``NO_REPLY``. Its summaries keep the fact codes they see, or,
with ``lossy=True``, keep nothing, so a test can tell what survived through the flush alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from clawd.config import DEFAULT_FLUSH_SYSTEM
from clawd.core.messages import ModelRequest
from clawd.providers.scripted import Reply, tool

FACT_RE = re.compile(r"\bFACT-\d+\b")
DAILY_RE = re.compile(r"memory/\d{4}-\d{2}-\d{2}\.md")
FILLER = ("the plan looks reasonable so far and I will keep the details in mind while we "
          "continue working through the remaining items on the list together").split()


def facts_in(text: str) -> list[str]:
    """Fact codes in order of first appearance."""
    return list(dict.fromkeys(FACT_RE.findall(text)))


def filler(words: int, seed: int = 0) -> str:
    return " ".join(FILLER[(i + seed) % len(FILLER)] for i in range(words))


def talk_until_flush(session, provider, margin: int = 300,
                     say: Callable[[int], str] = lambda i: f"Turn {i}. {filler(200, i)}",
                     answer: str = "Noted.") -> None:
    """Scripted turns (``say(i)``, each answered ``answer``) until ``session`` is within
    ``margin`` tokens of its flush point (at most 100 turns)."""
    for i in range(100):
        if session.context_tokens() >= session.budget.flush_at - margin:
            return
        provider.add(answer)
        list(session.run_turn(say(i)))


def is_flush(request: ModelRequest) -> bool:
    return bool(request.tools) and DEFAULT_FLUSH_SYSTEM in request.system[-1]


def is_summary(request: ModelRequest) -> bool:
    return not request.tools


def daily_section(request: ModelRequest, path: str) -> str | None:
    """Today's daily log as the project context shows it (None when it is not there)."""
    project = request.system[1] if len(request.system) > 1 else ""
    marker = f"## {path}\n\n"
    if marker not in project:
        return None
    return project.split(marker, 1)[1].split("\n# End of the workspace files", 1)[0].rstrip()


class LoopModel:
    """Chat replies of ``reply_words`` words; notes on flush; fact-keeping summaries."""

    def __init__(self, *, reply_words: int = 40, lossy: bool = False,
                 tool_every: int = 0):
        self.reply_words = reply_words
        self.lossy = lossy
        self.tool_every = tool_every  # every n-th user turn asks for a tool call first
        self.turns = 0
        self.notes = 0

    def __call__(self, request: ModelRequest):
        if is_summary(request):
            return self.summarise(request)
        if is_flush(request):
            last = request.messages[-1]
            if last.role == "user":
                return self.take_notes(request)
            return "NO_REPLY"
        return self.chat(request)

    def chat(self, request: ModelRequest):
        last = request.messages[-1]
        if last.role == "user":
            self.turns += 1
            if self.tool_every and self.turns % self.tool_every == 0:
                return Reply("Let me look.", [tool("read", path="AGENTS.md"),
                                              tool("read", path="notes.md")])
        return f"Reply {self.turns}: {filler(self.reply_words, self.turns)}"

    def take_notes(self, request: ModelRequest):
        path = DAILY_RE.search(request.messages[-1].text).group(0)
        seen = facts_in("\n".join(m.text for m in request.messages))
        shown = daily_section(request, path)
        new = [f for f in seen if f not in set(facts_in(shown or ""))]
        if not new:
            return "NO_REPLY"
        self.notes += 1
        lines = "\n".join(f"- note {self.notes}: {fact}" for fact in new)
        if shown is None:
            return Reply("", [tool("write", path=path, content=lines + "\n")])
        tail = shown.splitlines()[-1]
        return Reply("", [tool("edit", path=path, oldText=tail, newText=f"{tail}\n{lines}")])

    def summarise(self, request: ModelRequest) -> str:
        if self.lossy:
            return "## Goal\nThe user and the assistant chatted."
        facts = facts_in(request.messages[0].text)
        return "## Exact references\n" + "\n".join(f"- {f}" for f in facts) if facts else (
            "## Goal\nSmall talk.")
