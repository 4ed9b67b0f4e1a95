"""The four layers of context, rebuilt for every model request, and their token report.

0. the system prompt (``prompts/system.md.j2``): tools, memory rules, workspace, date;
   1. the project context: bootstrap files, then MEMORY.md and yesterday's and today's daily
   logs in private sessions only, each capped with a visible marker, and together within a
   share of the window (daily logs keep their newest lines); 2. the
   history: the latest compaction summary, then the kept messages (pruned in memory; a
   message that got no reply is sent with the one after it, ``fold_unanswered``);
   3. the current message (already the last message of the history when a request is built).
``report`` breaks a request down by layer, file and tool for ``/context``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from clawd.core.messages import Message, ModelRequest, TextPart, ToolSpec
from clawd.core.templates import render
from clawd.core.tokens import estimate_messages, estimate_text, estimate_tools
from clawd.memory.superseded import marked
from clawd.sessions.transcript import unanswered_ids
from clawd.workspace.files import ContextFile, daily_log_path, fit_files, read_context_files
from clawd.workspace.interface import WorkspaceFiles

SUMMARY_ID = "compaction-summary"
INSTRUCTION_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md")
# a window this small (in tokens) gets the short forms: at 8k the untouched templates,
# the system prompt and the tools took 29% of the window before the first message
SMALL_WINDOW = 16_384


@dataclass
class Layers:
    """The text of layers 0 and 1 for one request, and the files behind layer 1."""

    system: str
    project: str
    files: list[ContextFile]

    @property
    def instructions(self) -> str:
        """The system prompt and the files that tell the model how to work
        (``INSTRUCTION_FILES``), not those holding facts an answer may well quote."""
        return "\n".join([self.system, *(f.text for f in self.files
                                          if f.name in INSTRUCTION_FILES)])

    def texts(self) -> dict[str, str]:
        """The system prompt and each context file's text, by name."""
        return {"the system prompt": self.system, **{f.name: f.text for f in self.files}}


def build_layers(workspace: WorkspaceFiles, tools: list[ToolSpec], *, private: bool, now: datetime,
                 max_chars: int, read_only: bool, max_tokens: int | None = None,
                 workspace_files: bool = True, citations: bool = False,
                 recalled: bool = False, compact: bool = False,
                 services: dict[str, str] | None = None) -> Layers:
    """Render the system prompt and read the project context files (none without access
    to the workspace; MEMORY.md and the daily logs in private sessions only), together
    within ``max_tokens``, the share of the window they may take, when given.
    ``citations`` (``memorySearch.citations``) asks replies to name the notes they used;
    ``recalled``: automatic recall searches memory for each message in place of the model's
    own ``memory_search``, which it is not offered, and the prompt says so (AGENTS.md may
    still tell it to run the tool). ``compact`` (a window of ``SMALL_WINDOW`` tokens or
    less): the workspace's untouched templates in their short forms or left out
    (``read_context_files``), and the system prompt names the tools without repeating the
    descriptions their schemas carry. ``services``: what the MCP servers whose tools are
    offered say of themselves (their instructions, capped: untrusted text)."""
    files = read_context_files(workspace, include_memory=private, today=now.date(),
                               max_chars=max_chars, compact=compact,
                               mark=marked) if workspace_files else []
    if max_tokens is not None:
        files = fit_files(files, max_tokens, estimate_text)
    search = any(t.name == "memory_search" for t in tools)
    served = {t.origin for t in tools if t.origin}
    system = render("system.md.j2", tools=tools, workspace=workspace.location, compact=compact,
                    services={k: v for k, v in (services or {}).items() if k in served},
                    memory_search=search, citations=citations, recalled=recalled,
                    read_only=read_only, today=now.date().isoformat(),
                    # the date only: a clock in the system prompt would change the cached
                    # prefix every minute and no request could ever read the prompt cache
                    now=now.strftime("%Y-%m-%d %A"),
                    timezone=now.astimezone().tzname() or "local time")
    # the last words before the conversation are what a small model follows best
    note_to = (daily_log_path(now.date()) if not read_only
               and any(t.name == "write" for t in tools) else None)
    project = render("project_context.md.j2", files=files, note_to=note_to,
                     search=search, recalled=recalled) if files else ""
    return Layers(system, project, files)


def summary_message(summary: str) -> Message:
    """The compaction summary as the first message of the history."""
    return Message.user(render("summary_message.md.j2", summary=summary), id=SUMMARY_ID,
                        timestamp="")


def history_messages(summary: str | None, messages: list[Message]) -> list[Message]:
    return ([summary_message(summary)] if summary else []) + messages


def fold_unanswered(messages: list[Message]) -> list[Message]:
    """``messages`` with each run of unanswered user messages (``unanswered_ids``) sent in
    front of the message after them, quoted and marked as having had no reply: the model
    sees what was said without taking an old question as the one to answer now, and the
    roles still alternate (some chat templates refuse two user messages in a row)."""
    skipped = unanswered_ids(messages)
    if not skipped:
        return messages
    out: list[Message] = []
    earlier: list[Message] = []
    for message in messages:
        if message.id in skipped:
            earlier.append(message)
            continue
        if earlier and message.role == "user" and not message.flush:
            text = render("unanswered.md.j2", earlier=[m.text for m in earlier],
                          message=message.text)
            others = [p for m in (*earlier, message) for p in m.content
                      if not isinstance(p, TextPart)]
            message = replace(message, content=[TextPart(text), *others])
            earlier = []
        out.append(message)
    return out


def assemble(layers: Layers, summary: str | None, messages: list[Message],
             tools: list[ToolSpec], *, max_tokens: int, cache: bool,
             extra_system: str | None = None, tool_choice: str = "auto") -> ModelRequest:
    """One request: system segments (system prompt, project context [, extra]) + history.

    The extra text (the flush's instructions, the note after a blank answer) comes last, so
    the system prompt and the workspace files stay a prefix the server has cached: a local
    model need not read them again for the flush turn.
    """
    segments = ([layers.system] + ([layers.project] if layers.project else [])
                + ([extra_system] if extra_system else []))
    return ModelRequest(system=segments, messages=history_messages(summary, messages),
                        tools=tools, max_tokens=max_tokens, cache=cache,
                        tool_choice=tool_choice)


@dataclass
class FileReport:
    name: str
    raw_chars: int
    injected_chars: int
    tokens: int
    truncated: bool


@dataclass
class ContextReport:
    """Tokens per layer, per file and per tool, as ``/context`` shows them."""

    system_tokens: int
    project_tokens: int
    files: list[FileReport]
    tools: list[tuple[str, int]]
    summary_tokens: int
    history_tokens: int
    history_count: int
    pruned: list[str] = field(default_factory=list)
    largest_message: str = ""  # e.g. "a read result, 3,100"

    @property
    def total(self) -> int:
        return (self.system_tokens + self.project_tokens + sum(t for _, t in self.tools)
                + self.summary_tokens + self.history_tokens)


def describe_room(rep: ContextReport) -> str:
    """What takes the room of a request, in one line, with the advice that fits: the
    workspace files when they are the largest part, else the conversation."""
    tools = sum(t for _, t in rep.tools)
    parts = [f"system prompt {rep.system_tokens:,}", f"tools {tools:,}",
             f"workspace files {rep.project_tokens:,}"]
    if rep.files:
        big = max(rep.files, key=lambda f: f.tokens)
        parts[-1] += f" (largest {big.name}, {big.tokens:,})"
    if rep.summary_tokens:
        parts.append(f"summary {rep.summary_tokens:,}")
    parts.append(f"{rep.history_count} messages {rep.history_tokens:,}")
    if rep.largest_message:
        parts[-1] += f" (largest {rep.largest_message})"
    files_first = rep.project_tokens > max(rep.history_tokens, rep.system_tokens + tools)
    advice = ("shorten the workspace files or raise the model's contextWindow" if files_first
              else "start afresh with /new, or use a model with a larger window")
    return f"tokens: {', '.join(parts)}; {advice}"


def report(layers: Layers, summary: str | None, messages: list[Message],
           tools: list[ToolSpec], pruned: list[str] | None = None) -> ContextReport:
    files = [FileReport(f.name, f.raw_chars, len(f.text), estimate_text(f.text), f.truncated)
             for f in layers.files]
    summary_tokens = estimate_messages([summary_message(summary)]) if summary else 0
    return ContextReport(system_tokens=estimate_text(layers.system),
                         project_tokens=estimate_text(layers.project), files=files,
                         tools=[(t.name, estimate_tools([t])) for t in tools],
                         summary_tokens=summary_tokens, history_tokens=estimate_messages(messages),
                         history_count=len(messages), pruned=list(pruned or []),
                         largest_message=_largest(messages))


def _largest(messages: list[Message]) -> str:
    if not messages:
        return ""
    sizes = [(estimate_messages([m]), m) for m in messages]
    tokens, message = max(sizes, key=lambda pair: pair[0])
    what = (f"a {message.tool_name or 'tool'} result" if message.role == "toolResult"
            else f"a {message.role} message")
    return f"{what}, {tokens:,}"
