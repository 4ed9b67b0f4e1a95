"""Compaction's summarising: what replaces the history before the cut (``context.cut``).

``summarize`` turns the older messages into one summary with the model, through requests
that carry no tools: the history is serialised to readable text, split into token-bounded
chunks, summarised per chunk and merged (a previous compaction summary is folded in). When
a request does not fit or the model answers with nothing (or with its instructions copied),
it retries with chunks half the size, then with a simpler prompt, and at last writes a
truncation note that says exactly what was dropped, so a compaction never produces a
silent, content-free summary. Any other failure (an unreachable server) ends the attempt
with the error and no summary: an outage never costs the history.
Under a weak profile (``summary_words``), the user's sentences with numbers, names or
identifiers the summary left out are appended to it word for word (``references``); a strong
profile's summary is kept as the model wrote it.
Prompts are the ``compaction*.md.j2`` templates; nothing here touches the disk.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawd.context.references import MAX_CHARS, with_users_words
from clawd.core import listmark
from clawd.core.errors import ProviderError
from clawd.core.messages import ImagePart, Message, ModelRequest, TextPart, ToolCall
from clawd.core.templates import render
from clawd.core.textcut import keep_ends
from clawd.core.tokens import estimate_text
from clawd.providers.base import complete
from clawd.sessions.transcript import unanswered_ids

if TYPE_CHECKING:
    from clawd.config import Compaction
    from clawd.providers.base import Provider

log = logging.getLogger(__name__)

TOOL_RESULT_CHARS = 2000  # a tool result in the summariser's input: head + tail beyond this
TOOL_ARGS_CHARS = 1000
MIN_CHUNK_TOKENS = 250
EXCERPT_CHARS = 80
MAX_EXCERPTS = 20


@dataclass(frozen=True, slots=True)
class CompactionSummary:
    """The outcome of ``summarize``.

    ``method`` is the path taken: ``single`` (one request), ``chunked`` (chunks, then a
    merge), ``smaller-chunks`` (succeeded after halving the chunk size), ``simple`` (the
    fallback prompt), ``truncated`` (no summary; ``dropped`` describes what was lost) or
    ``unchanged`` (nothing to summarise). ``requests`` counts the model requests made.
    ``left_out``: the lines of the model's summary that ``summarize``'s ``founded`` check
    took out.
    """

    text: str
    method: str
    dropped: str | None
    requests: int
    left_out: tuple[str, ...] = ()


# --- serialising the history ------------------------------------------------------------------

def _clip(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return keep_ends(text, limit * 3 // 4, limit // 4,
                     lambda omitted: f"\n[... {what} clipped: {omitted} of {len(text)} "
                                     f"characters omitted ...]\n")


def render_message(message: Message, unanswered: bool = False) -> str:
    """One message as readable text for the summariser: a role label, then its content
    (``unanswered``: a user message that got no reply says so)."""
    if message.role == "toolResult":
        error = ", error" if message.is_error else ""
        label = f"[tool result: {message.tool_name or 'unknown'}{error}]"
    elif message.role == "user":
        stamp = f" {message.timestamp}" if message.timestamp else ""
        label = f"[user{stamp}{', no reply: the request failed' if unanswered else ''}]"
    else:
        label = f"[{message.role}]"
    parts = [label]
    for part in message.content:
        match part:
            case TextPart(text) if text.strip():
                text = text.strip()
                if message.role == "toolResult":
                    text = _clip(text, TOOL_RESULT_CHARS, "tool result")
                parts.append(text)
            case ToolCall(_, name, arguments):
                args = json.dumps(arguments, ensure_ascii=False)
                parts.append(f"[tool call: {name}] {_clip(args, TOOL_ARGS_CHARS, 'arguments')}")
            case ImagePart():
                parts.append("[image omitted]")
    return "\n".join(parts)


def _chunks(messages: list[Message], limit: int) -> list[str]:
    """The serialised history in consecutive pieces of at most ``limit`` tokens (about)."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    unanswered = unanswered_ids(messages)
    for message in messages:
        text = render_message(message, message.id in unanswered)
        tokens = estimate_text(text)
        if tokens > limit:
            # One message larger than a chunk: keep its head and tail so the chunk fits.
            chars = int(len(text) * limit / tokens * 0.9)
            text = _clip(text, max(chars, 200), "message")
            tokens = estimate_text(text)
        if current and used + tokens > limit:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(text)
        used += tokens
    if current:
        chunks.append("\n\n".join(current))
    return chunks


# --- talking to the model ---------------------------------------------------------------------

class _EmptySummary(ProviderError):
    """The model answered, but with nothing to use."""


@dataclass
class _Runner:
    provider: Provider
    max_tokens: int
    instructions: str | None
    requests: int = 0

    def ask(self, template: str, body: str, **values: object) -> str:
        system = render(template, instructions=self.instructions, **values)
        request = ModelRequest(system=[system], messages=[Message.user(body)], tools=[],
                               max_tokens=self.max_tokens)
        self.requests += 1
        text = complete(self.provider, request).message.text.strip()
        if not text:
            raise _EmptySummary("the model returned an empty summary")
        if copies_instructions(text, system):
            raise _EmptySummary("the model returned its instructions, not a summary")
        return text


def copies_instructions(summary: str, instructions: str) -> bool:
    """Whether a summary is its instructions copied: more than half its lines (headings
    aside, which the instructions ask for) are lines of them, list marks and emphasis
    aside. A 0.5B model answered 3 of 8 requests for a summary with the sections'
    descriptions ("What the user is trying to achieve, and the current task."); none of a
    1.5B model's 8 copied a line (``scripts/bench_turn_guards.py``)."""
    def plain(line: str) -> str:
        return listmark.strip(line).strip().strip("*_ ").lower()

    given = {plain(line) for line in instructions.splitlines()}
    lines = [plain(line) for line in summary.splitlines() if not line.lstrip().startswith("#")]
    lines = [line for line in lines if line]
    return 2 * sum(line in given for line in lines) > len(lines)


def _raise_unless_size(exc: ProviderError) -> None:
    """Re-raise an error that smaller requests cannot help with (the server is down, a key
    is refused): only an overflow or an empty answer is worth another, smaller attempt."""
    if not (exc.overflow or isinstance(exc, _EmptySummary)):
        raise exc


def _body(previous: str | None, conversation: str) -> str:
    head = f"<previous-summary>\n{previous}\n</previous-summary>\n\n" if previous else ""
    return f"{head}<conversation>\n{conversation}\n</conversation>"


def _merge(run: _Runner, parts: list[str], previous: str | None, limit: int) -> str:
    """Merge partial summaries; in rounds of groups when together they exceed ``limit``."""
    while True:
        groups: list[list[str]] = [[]]
        used = 0
        for part in parts:
            tokens = estimate_text(part)
            # At least two parts per group, so every round shrinks the list.
            if len(groups[-1]) >= 2 and used + tokens > limit:
                groups.append([])
                used = 0
            groups[-1].append(part)
            used += tokens
        if len(groups) == 1:
            return _merge_once(run, parts, previous)
        parts = [_merge_once(run, group, None) if len(group) > 1 else group[0]
                 for group in groups]


def _merge_once(run: _Runner, parts: list[str], previous: str | None) -> str:
    blocks = [f"<previous-summary>\n{previous}\n</previous-summary>"] if previous else []
    blocks += [f'<partial-summary part="{i}" of="{len(parts)}">\n{part}\n</partial-summary>'
               for i, part in enumerate(parts, 1)]
    return run.ask("compaction_merge.md.j2", "\n\n".join(blocks),
                   has_previous=previous is not None)


def _summarise(run: _Runner, messages: list[Message], previous: str | None,
               limit: int) -> tuple[str, int]:
    """The full path: summarise each chunk, merge; returns the text and the chunk count."""
    chunks = _chunks(messages, limit)
    if len(chunks) == 1:
        text = run.ask("compaction.md.j2", _body(previous, chunks[0]), part=1, parts=1,
                       has_previous=previous is not None)
        return text, 1
    partials = [run.ask("compaction.md.j2", _body(None, chunk), part=i, parts=len(chunks),
                        has_previous=False)
                for i, chunk in enumerate(chunks, 1)]
    return _merge(run, partials, previous, limit), len(chunks)


def _summarise_simply(run: _Runner, messages: list[Message], previous: str | None,
                      limit: int) -> str:
    """The fallback: a short prompt per chunk, joined without a merge request."""
    chunks = _chunks(messages, limit)
    parts = [run.ask("compaction_simple.md.j2", _body(previous if i == 1 else None, chunk))
             for i, chunk in enumerate(chunks, 1)]
    if len(parts) == 1:
        return parts[0]
    return "\n\n".join(f"### Part {i} of {len(parts)}\n\n{p}" for i, p in enumerate(parts, 1))


def chunk_sizes(settings: Compaction, max_chunk_tokens: int | None = None) -> list[int]:
    """Chunk sizes of the full-prompt attempts: ``chunkTokens`` (at most
    ``max_chunk_tokens``, so a chunk fits a small window), halved ``maxRetries`` times."""
    first = min(settings.chunk_tokens, max_chunk_tokens or settings.chunk_tokens)
    sizes: list[int] = []
    for k in range(settings.max_retries + 1):
        size = max(MIN_CHUNK_TOKENS, first >> k)
        if size not in sizes:
            sizes.append(size)
    return sizes


def summarize(provider: Provider, messages: list[Message], *, previous_summary: str | None,
              instructions: str | None, settings: Compaction,
              max_tokens: int = 4096, max_chunk_tokens: int | None = None,
              founded: Callable[[str], tuple[str, list[str]]] | None = None,
              users_words: bool = True) -> CompactionSummary:
    """Summarise ``messages`` (the part before the cut), folding in ``previous_summary``.

    ``instructions`` (from ``/compact``) steer the focus. A context overflow or an empty
    reply (or one that is its instructions copied) fails the attempt; the next one uses
    chunks half the size, up to ``settings.max_retries`` times, then the simple prompt,
    then the truncation note. Any other ``ProviderError`` (the server is unreachable, a key
    is refused) propagates at once: nothing was summarised, and the caller keeps the
    history as it was.

    ``founded`` (a weak profile's ``summary_claims``) takes the lines nothing said out of
    the model's summary before the user's own words are appended, so that those words are
    judged against what is left: a left-out line that held a user's number or name (beside
    one nobody said) does not take them with it, the user's sentence is appended.
    ``users_words`` (a weak profile's ``summary_words``): the user's sentences with numbers,
    names or identifiers the summary left out are appended, word for word.
    """
    previous = (previous_summary or "").strip() or None
    if not messages:
        return CompactionSummary(previous or "", "unchanged", None, 0)
    summary = _summarize(provider, messages, previous, instructions, settings, max_tokens,
                         max_chunk_tokens)
    if founded is not None and summary.method != "truncated":
        kept, left_out = founded(summary.text)
        if left_out and kept.strip():  # a summary of nothing but such lines stays as it is
            summary = dataclasses.replace(summary, text=kept, left_out=tuple(left_out))
    if not users_words:
        return summary
    # what the model left out of the user's exact references, word for word
    text = with_users_words(summary.text, messages, previous, min(MAX_CHARS, 2 * max_tokens))
    return dataclasses.replace(summary, text=text)


def _summarize(provider: Provider, messages: list[Message], previous: str | None,
               instructions: str | None, settings: Compaction, max_tokens: int,
               max_chunk_tokens: int | None) -> CompactionSummary:
    run = _Runner(provider, max_tokens, (instructions or "").strip() or None)
    sizes = chunk_sizes(settings, max_chunk_tokens)
    error: ProviderError | None = None
    for attempt, limit in enumerate(sizes):
        try:
            text, chunks = _summarise(run, messages, previous, limit)
        except ProviderError as exc:
            _raise_unless_size(exc)
            error = exc
            log.warning("compaction: summarising %d messages in chunks of %d tokens failed: %s",
                        len(messages), limit, exc)
            continue
        method = "smaller-chunks" if attempt else ("chunked" if chunks > 1 else "single")
        return CompactionSummary(text, method, None, run.requests)
    try:
        return CompactionSummary(_summarise_simply(run, messages, previous, sizes[-1]), "simple",
                                 None, run.requests)
    except ProviderError as exc:
        _raise_unless_size(exc)
        error = exc
        log.warning("compaction: the simple summary failed too, writing a truncation note: %s",
                    exc)
    note = truncation_note(messages, f"{type(error).__name__}: {error}")
    text = f"{previous}\n\n{note}" if previous else note
    return CompactionSummary(text, "truncated", note, run.requests)


# --- when summarising fails -------------------------------------------------------------------

def _excerpt(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rstrip() + "…"


def truncation_note(messages: list[Message], reason: str) -> str:
    """What was dropped, said exactly: counts, time range, tools used, the user's requests."""
    roles = Counter(m.role for m in messages)
    counts = ", ".join(f"{roles[r]} {label}" for r, label in
                       (("user", "user"), ("assistant", "assistant"),
                        ("toolResult", "tool results")) if roles[r])
    lines = [f"[Compaction note] Summarising failed ({_excerpt(reason)}), so the older "
             f"history was dropped without a summary.",
             f"- Dropped: {len(messages)} messages ({counts})"]
    stamps = [m.timestamp for m in messages if m.timestamp]
    if stamps:
        lines.append(f"- Time range: {stamps[0]} to {stamps[-1]}")
    tools = Counter(call.name for m in messages for call in m.tool_calls)
    if tools:
        lines.append("- Tools used: " + ", ".join(f"{name} ×{count}"
                                                 for name, count in tools.most_common()))
    asks = [_excerpt(m.text) for m in messages if m.role == "user" and m.text.strip()]
    if asks:
        lines.append(f"- User messages (first {EXCERPT_CHARS} characters each):")
        lines += [f'  - "{ask}"' for ask in asks[:MAX_EXCERPTS]]
        if len(asks) > MAX_EXCERPTS:
            lines.append(f"  - ... and {len(asks) - MAX_EXCERPTS} more")
    return "\n".join(lines)
