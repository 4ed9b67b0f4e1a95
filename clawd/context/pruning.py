"""Context pruning of old tool results (pure: messages in, new messages and a report out).

Tool output (build logs, file dumps) dominates long sessions; once the provider's prompt cache
has expired, re-sending it in full buys nothing. ``prune`` shrinks the in-memory copy only:
it soft-trims long ``toolResult`` text to head + ``...`` + tail with a size note, then
hard-clears whole results (oldest first) with a placeholder while the context is still above
``hardClearRatio`` of the window. It never touches user or assistant messages, results
before the first user message (bootstrap reads), results from the ``keepLastAssistants``-th
last assistant message on, results of tools the ``tools.allow``/``tools.deny`` globs exclude,
or results holding any non-text block (an image is kept whole). Input messages are never
mutated; changed ones are copies. ``reapply`` repeats earlier decisions so a pruned result
stays pruned, identically, and the cached prefix keeps matching. ``cap_tool_result`` bounds a
single output before it is ever written to the transcript. Sizes are characters; the window
is turned into characters at the messages' own characters per token when the caller can
count tokens (``tokens_of``), since build logs run near three characters a token and prose
near four, and a fixed four would let a log-heavy context sit far above the ratios.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from clawd.config import ContextPruning, ToolGlobs, parse_duration
from clawd.core.messages import ImagePart, Message, OtherPart, TextPart, ToolCall
from clawd.core.textcut import keep_ends
from clawd.core.tokens import IMAGE_TOKENS

CHARS_PER_TOKEN = 4
IMAGE_CHARS = IMAGE_TOKENS * CHARS_PER_TOKEN
MODES = ("off", "cache-ttl", "adaptive", "aggressive")


@dataclass(slots=True)
class PrunedEntry:
    """What happened to one tool result: ``soft-trim`` or ``hard-clear`` and its sizes."""

    message_id: str
    tool_name: str | None
    action: str
    chars_before: int
    chars_after: int


@dataclass(slots=True)
class PruneResult:
    """The messages to send plus what was pruned (for ``/context detail``).

    ``skipped`` names why nothing was considered (``"off"``, ``"ttl"``, ``"no window"``,
    ``"too few assistants"``, ``"below ratio"``) and is ``None`` when the pruner ran.
    """

    messages: list[Message]
    mode: str
    entries: list[PrunedEntry] = field(default_factory=list)
    context_chars_before: int = 0
    context_chars_after: int = 0
    window_chars: int = 0
    skipped: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.entries)

    def count(self, action: str) -> int:
        return sum(1 for e in self.entries if e.action == action)


def message_chars(message: Message) -> int:
    """Approximate characters a message adds to the context."""
    chars = 0
    for part in message.content:
        match part:
            case TextPart(text):
                chars += len(text)
            case ImagePart():
                chars += IMAGE_CHARS
            case ToolCall(_, name, arguments):
                chars += len(name) + len(json.dumps(arguments))
            case OtherPart(block):
                chars += len(json.dumps(block, default=str))
    return chars


def is_tool_prunable(name: str | None, globs: ToolGlobs) -> bool:
    """Deny wins; an empty allow list admits every tool. Matching ignores case."""
    name = (name or "").strip().lower()
    if any(fnmatchcase(name, p.strip().lower()) for p in globs.deny):
        return False
    return not globs.allow or any(fnmatchcase(name, p.strip().lower()) for p in globs.allow)


def _text_only(message: Message) -> bool:
    return all(isinstance(part, TextPart) for part in message.content)


def _joined_text(message: Message) -> str:
    return "\n".join(part.text for part in message.content if isinstance(part, TextPart))


def _protected_from(messages: list[Message], keep: int) -> int | None:
    """Index where the protected tail starts: the ``keep``-th last assistant message."""
    if keep <= 0:
        return len(messages)
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            seen += 1
            if seen == keep:
                return i
    return None  # too few assistant turns for anything to count as old


def _soft_trimmed(text: str, cfg: ContextPruning) -> str | None:
    """Head + ``...`` + tail + size note, or None when the text is short enough already."""
    head, tail = cfg.soft_trim.head_chars, cfg.soft_trim.tail_chars
    if len(text) <= cfg.soft_trim.max_chars or head + tail >= len(text):
        return None
    return keep_ends(text, head, tail, lambda omitted: "\n...\n") + (
        f"\n\n[Tool result trimmed: kept first {head} and last {tail} of {len(text)} "
        f"characters.]")


def _with_text(message: Message, text: str) -> Message:
    return dataclasses.replace(message, content=[TextPart(text)])


def chars_per_token(messages: list[Message], chars: int,
                    tokens_of: Callable[[list[Message]], float] | None) -> float:
    """The messages' characters per token (kept within 1..8), or four when not countable."""
    tokens = tokens_of(messages) if tokens_of is not None and chars else 0
    return min(8.0, max(1.0, chars / tokens)) if tokens > 0 else float(CHARS_PER_TOKEN)


def prune(messages: list[Message], cfg: ContextPruning, *, mode: str, now: float,
          last_call_at: float | None, context_window: int,
          tokens_of: Callable[[list[Message]], float] | None = None) -> PruneResult:
    """Prune old tool results for one request; ``mode`` is already resolved (never None).

    ``cache-ttl`` acts only once ``ttl`` has passed since ``last_call_at`` (elapsed >= ttl);
    with no recorded call there is no cache to have expired and nothing is pruned.
    ``adaptive`` applies the ratios on every request. ``aggressive`` clears every prunable
    result outside the protected tail whatever the ratios (soft-trims them instead when
    ``hardClear.enabled`` is false) and always protects at least the latest assistant
    turn's results, so the model still sees what it just asked for. ``tokens_of`` counts
    the tokens of the messages (called at most once); without it a token is four characters.
    """
    if mode not in MODES:
        raise ValueError(f"unknown contextPruning mode: {mode!r}")
    result = PruneResult(messages=messages, mode=mode)
    if mode == "off":
        result.skipped = "off"
        return result
    if mode == "cache-ttl" and (last_call_at is None
                                or now - last_call_at < parse_duration(cfg.ttl)):
        result.skipped = "ttl"
        return result
    total = sum(message_chars(m) for m in messages)
    result.context_chars_before = result.context_chars_after = total
    window = round(max(0, context_window) * chars_per_token(messages, total, tokens_of))
    result.window_chars = window
    if window <= 0:
        result.skipped = "no window"
        return result

    keep = max(1, cfg.keep_last_assistants) if mode == "aggressive" else cfg.keep_last_assistants
    cutoff = _protected_from(messages, keep)
    if cutoff is None:
        result.skipped = "too few assistants"
        return result
    if mode != "aggressive" and total / window < cfg.soft_trim_ratio:
        result.skipped = "below ratio"
        return result

    start = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    candidates = [i for i in range(start, cutoff)
                  if messages[i].role == "toolResult" and _text_only(messages[i])
                  and is_tool_prunable(messages[i].tool_name, cfg.tools)]
    out = list(messages)
    original: dict[int, int] = {}  # index -> chars before any pruning
    actions: dict[int, str] = {}

    def replace(i: int, text: str, action: str) -> None:
        nonlocal total
        before, new = message_chars(out[i]), _with_text(out[i], text)
        original.setdefault(i, before)
        out[i] = new
        total += message_chars(new) - before
        actions[i] = action

    hard = cfg.hard_clear.enabled
    if mode == "aggressive" and hard:
        for i in candidates:
            if message_chars(out[i]) > len(cfg.hard_clear.placeholder):
                replace(i, cfg.hard_clear.placeholder, "hard-clear")
    else:
        for i in candidates:
            trimmed = _soft_trimmed(_joined_text(out[i]), cfg)
            if trimmed is not None:
                replace(i, trimmed, "soft-trim")
        prunable = sum(message_chars(out[i]) for i in candidates)
        if (hard and total / window >= cfg.hard_clear_ratio
                and prunable >= cfg.min_prunable_tool_chars):
            for i in candidates:
                if total / window < cfg.hard_clear_ratio:
                    break
                if message_chars(out[i]) > len(cfg.hard_clear.placeholder):
                    replace(i, cfg.hard_clear.placeholder, "hard-clear")

    result.messages = out if actions else messages
    result.context_chars_after = total
    result.entries = [PrunedEntry(out[i].id, out[i].tool_name, actions[i], original[i],
                                  message_chars(out[i])) for i in sorted(actions)]
    return result


def reapply(messages: list[Message], decisions: dict[str, str], cfg: ContextPruning
            ) -> tuple[list[Message], list[PrunedEntry]]:
    """Apply earlier ``{message id: action}`` decisions again, producing the same text.

    A provider caches the prompt prefix it was sent. A result pruned once must go out pruned,
    byte for byte the same, on every later request (in any process), or the next request's
    prefix differs from the cached one and the whole tail is written to the cache again.
    """
    if not decisions:
        return messages, []
    out, entries = list(messages), []
    for i, message in enumerate(messages):
        action = decisions.get(message.id)
        if (action not in ("soft-trim", "hard-clear") or message.role != "toolResult"
                or not _text_only(message)):
            continue
        text = (cfg.hard_clear.placeholder if action == "hard-clear"
                else _soft_trimmed(_joined_text(message), cfg))
        if text is None:
            continue
        out[i] = _with_text(message, text)
        entries.append(PrunedEntry(message.id, message.tool_name, action,
                                   message_chars(message), message_chars(out[i])))
    return out, entries


def cap_tool_result(text: str, max_chars: int) -> str:
    """Bound one tool output to about ``max_chars``: head and tail kept, original size noted.

    A ``max_chars`` of zero or less means no cap. The note and separator come out of the
    budget, so the result is never longer than ``max_chars`` when that exceeds the note.
    """
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    sep = "\n...\n"
    # head and tail never exceed the size, so a note printed with the size thrice is an
    # upper bound on the real note's length
    budget = max_chars - len(sep) - 2 - len(_cap_note(len(text), len(text), len(text)))
    if budget <= 0:
        return text[:max_chars]
    head, tail = budget - budget // 2, budget // 2
    return (keep_ends(text, head, tail, lambda omitted: sep)
            + f"\n\n{_cap_note(head, tail, len(text))}")


def _cap_note(head: int, tail: int, size: int) -> str:
    return (f"[Tool output truncated: kept first {head} and last {tail} "
            f"of {size} characters.]")
