"""Tests for clawd.context.compaction: the cut policy (table-driven) and the summariser's paths."""

from __future__ import annotations

import random

import pytest

from clawd.config import Compaction
from clawd.context.compaction import chunk_sizes, render_message, summarize
from clawd.context.cut import find_cut
from clawd.core.errors import ContextOverflowError, ProviderError
from clawd.core.messages import Message, ModelRequest, TextPart, ToolCall
from clawd.core.tokens import estimate_message, estimate_text
from clawd.providers.scripted import ScriptedProvider
from clawd.sessions.transcript import unanswered_ids

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def render_history(messages: list[Message]) -> str:
    """The whole history as the summariser reads it, in one piece."""
    unanswered = unanswered_ids(messages)
    return "\n\n".join(render_message(m, m.id in unanswered) for m in messages)


def _words(n: int, seed: int = 0) -> str:
    return " ".join(WORDS[(i + seed) % len(WORDS)] for i in range(n))


def conversation(spec: str) -> list[Message]:
    """Messages from a spec like ``"u:10 c:50 r:300 a:20"``.

    ``u`` user, ``a`` assistant text, ``c`` assistant with one tool call, ``C`` with two,
    ``r`` the result of the oldest unanswered call, ``o`` a result whose call is not in the
    history; the number is a size in words.
    """
    messages: list[Message] = []
    pending: list[ToolCall] = []
    for i, item in enumerate(spec.split()):
        kind, _, size = item.partition(":")
        text = _words(int(size or 10), i)
        stamp = f"2024-05-01T10:{i:02d}:00.000Z"
        if kind == "u":
            messages.append(Message.user(text, timestamp=stamp))
        elif kind == "a":
            messages.append(Message.assistant(text, timestamp=stamp))
        elif kind in "cC":
            calls = [ToolCall(f"call{i}_{k}", "exec" if k else "read", {"path": f"f{i}.md"})
                     for k in range(1 if kind == "c" else 2)]
            pending += calls
            messages.append(Message.assistant(text, calls, timestamp=stamp))
        elif kind == "r":
            messages.append(Message.tool_result(pending.pop(0), text, timestamp=stamp))
        elif kind == "o":
            orphan = ToolCall(f"gone{i}", "read", {})
            messages.append(Message.tool_result(orphan, text, timestamp=stamp))
    return messages


def suffix_tokens(messages: list[Message], start: int) -> int:
    return sum(estimate_message(m) for m in messages[start:])


# --- find_cut ---------------------------------------------------------------------------------

# (spec, keep = tokens of messages[keep_from:] + plus, expected cut)
CUT_CASES = [
    ("", 0, 0, 0),
    ("u a u a", 0, 0, 0),  # everything fits
    ("u a u a", 0, 5, 0),
    ("u:10 a:100 u:10 a:100 u:10 a:100", 4, 0, 4),  # exactly the last exchange
    ("u:10 a:100 u:10 a:100 u:10 a:100", 2, 0, 2),
    ("u:10 a:100 u:10 a:100 u:10 a:100", 3, 0, 3),  # the next user is too far: no jump
    # a kept part never starts with a tool result
    ("u:10 c:10 r:300 c:10 r:300 a:300 u:10 a:10", 2, 0, 3),
    ("u:10 c:10 r:300 c:10 r:300 a:300 u:10 a:10", 4, 0, 5),
    # two calls in one message: no cut between it and either result
    ("u:10 C:10 r:300 r:300 a:300 u:10 a:10", 2, 0, 4),
    ("u:10 C:10 r:300 r:300 a:300 u:10 a:10", 3, 0, 4),
    # a message between a call and its result does not make a cut point there
    ("u:10 c:10 u:10 r:300 a:300 u:10 a:10", 2, 0, 4),
    # nor does a result whose call is no longer in the history
    ("u:10 a:10 o:300 a:300 u:10 a:10", 2, 0, 3),
    # a user message close after the budget cut wins; a far one does not
    ("u:10 a:200 a:10 u:10 a:200", 2, 0, 3),
    ("u:10 a:200 a:200 u:10 a:200", 2, 0, 2),
    # the last turn alone is over budget: it is kept whole, starting at its user message
    ("u:10 a:10 u:10 c:10 r:500 a:200", 5, 0, 2),
    ("u:10 a:10 u:10 c:10 r:500 a:200", 6, 0, 2),
    # one turn only, over budget: nothing can be summarised
    ("u:10 c:10 r:500 a:200", 3, 0, 0),
    # no user message and nothing fits: everything goes
    ("a:100 a:100", 2, 0, 2),
]


@pytest.mark.parametrize("spec,keep_from,plus,expected", CUT_CASES)
def test_find_cut_table(spec: str, keep_from: int, plus: int, expected: int) -> None:
    messages = conversation(spec)
    keep = suffix_tokens(messages, keep_from) + plus
    assert find_cut(messages, keep) == expected


def test_find_cut_zero_budget_keeps_the_last_turn() -> None:
    messages = conversation("u a u c r a")
    assert find_cut(messages, 0) == 2


def _check_invariants(messages: list[Message], keep: int, cut: int) -> None:
    assert 0 <= cut <= len(messages)
    if cut < len(messages):
        assert messages[cut].role != "toolResult"
    calls_before = {c.id for m in messages[:cut] for c in m.tool_calls}
    results_after = {m.tool_call_id for m in messages[cut:] if m.role == "toolResult"}
    assert not calls_before & results_after, "a tool call was separated from its result"
    if suffix_tokens(messages, cut) > keep:
        # only the current turn may exceed the budget, and then it is kept whole
        assert all(m.role != "user" for m in messages[cut + 1:])
        assert cut == 0 or messages[cut].role == "user"
    elif cut > 0:
        assert suffix_tokens(messages, cut) <= keep


def test_find_cut_invariants_on_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(300):
        spec: list[str] = []
        for _turn in range(rng.randint(1, 6)):
            spec.append(f"u:{rng.randint(1, 60)}")
            for _step in range(rng.randint(0, 3)):
                kind = rng.choice("cC")
                spec.append(f"{kind}:{rng.randint(1, 40)}")
                spec += [f"r:{rng.randint(1, 400)}"] * (1 if kind == "c" else 2)
            spec.append(f"a:{rng.randint(1, 120)}")
        messages = conversation(" ".join(spec))
        keep = rng.randint(0, suffix_tokens(messages, 0) + 50)
        _check_invariants(messages, keep, find_cut(messages, keep))


# --- summarize --------------------------------------------------------------------------------

def _system(request: ModelRequest) -> str:
    return "\n".join(request.system)


def _body(request: ModelRequest) -> str:
    assert len(request.messages) == 1 and request.messages[0].role == "user"
    return request.messages[0].text


def is_merge(request: ModelRequest) -> bool:
    return "<partial-summary" in _body(request)


def is_simple(request: ModelRequest) -> bool:
    return "Summarise the conversation below" in _system(request)


def long_history(turns: int = 12) -> list[Message]:
    spec = " ".join(f"u:20 c:30 r:150 a:{120 + t}" for t in range(turns))
    messages = conversation(spec)
    for t, message in enumerate(m for m in messages if m.role == "user"):
        message.content = [TextPart(f"request number {t}: {message.text}")]
    return messages


def test_single_chunk_request_has_no_tools_and_carries_instructions_and_previous() -> None:
    provider = ScriptedProvider(["## Goal\n- ship v2"])
    call = ToolCall("c1", "read", {"path": "notes/plan.md"})
    messages = [Message.user("Please fix the bug in src/app.py", timestamp="2024-05-01T09:00Z"),
                Message.assistant("Looking.", [call]),
                Message.tool_result(call, "Traceback: KeyError 'user_id'", is_error=True),
                Message.assistant("Fixed it.")]
    summary = summarize(provider, messages, previous_summary="Earlier: chose SQLite.",
                        instructions="focus on the database decision", settings=Compaction())
    assert summary == type(summary)(
        "## Goal\n- ship v2\n\n## The user's words\nSentences of the user's with numbers, names "
        "or identifiers the summary above leaves out, word for word:\n"
        "- Please fix the bug in src/app.py", "single", None, 1)
    (request,) = provider.requests
    assert request.tools == []
    assert "focus on the database decision" in _system(request)
    body = _body(request)
    assert "<previous-summary>\nEarlier: chose SQLite.\n</previous-summary>" in body
    assert "Please fix the bug in src/app.py" in body
    assert '[tool call: read] {"path": "notes/plan.md"}' in body
    assert "[tool result: read, error]" in body and "KeyError 'user_id'" in body
    provider.assert_done()


def test_prompt_asks_to_keep_exact_references_and_omits_instruction_block_without_any() -> None:
    provider = ScriptedProvider(["summary"])
    summarize(provider, conversation("u a"), previous_summary=None, instructions=None,
              settings=Compaction())
    system = _system(provider.requests[0])
    for needle in ("Decisions", "Open questions", "Next steps", "file paths", "error messages"):
        assert needle in system
    assert "<instructions>" not in system
    assert "<previous-summary>" not in _body(provider.requests[0])


def test_tool_results_are_clipped_with_a_note() -> None:
    call = ToolCall("c1", "exec", {"command": "cat big.log"})
    big = "HEAD-MARK " + "x" * 50_000 + " TAIL-MARK"
    text = render_history([Message.assistant("", [call]), Message.tool_result(call, big)])
    assert "HEAD-MARK" in text and "TAIL-MARK" in text
    assert "tool result clipped" in text
    assert len(text) < 3000


def test_large_history_is_chunked_then_merged_with_previous_summary() -> None:
    counter = iter(range(1, 100))

    def reply(request: ModelRequest) -> str:
        if is_merge(request):
            return "MERGED"
        return f"partial-{next(counter)}"

    provider = ScriptedProvider(default=reply)
    messages = long_history()
    summary = summarize(provider, messages, previous_summary="OLD-SUMMARY",
                        instructions="keep the paths", settings=Compaction(chunk_tokens=1000))
    assert summary.text.startswith("MERGED\n\n## The user's words\n")
    assert summary.method == "chunked"
    chunk_requests = [r for r in provider.requests if not is_merge(r)]
    merges = [r for r in provider.requests if is_merge(r)]
    assert len(chunk_requests) >= 3 and len(merges) == 1
    assert summary.requests == len(provider.requests)
    assert all(r.tools == [] for r in provider.requests)
    # the chunks cover the history in order, each within the chunk budget (roughly)
    joined = "\n\n".join(_body(r) for r in chunk_requests)
    firsts = [joined.index(f"request number {t}:") for t in range(12)]
    assert firsts == sorted(firsts)
    for request in chunk_requests:
        assert f"of {len(chunk_requests)}" in _system(request)
        assert "OLD-SUMMARY" not in _body(request)
    merge_body = _body(merges[0])
    assert merge_body.startswith("<previous-summary>\nOLD-SUMMARY")
    for i in range(1, len(chunk_requests) + 1):
        assert f"partial-{i}\n" in merge_body
    assert "keep the paths" in _system(merges[0])


def test_partial_summaries_too_large_to_merge_at_once_are_merged_in_rounds() -> None:
    def reply(request: ModelRequest) -> str:
        return "merged " + _words(300) if is_merge(request) else "partial " + _words(500)

    provider = ScriptedProvider(default=reply)
    summary = summarize(provider, long_history(), previous_summary="P", instructions=None,
                        settings=Compaction(chunk_tokens=1000))
    merges = [r for r in provider.requests if is_merge(r)]
    assert summary.method == "chunked" and len(merges) >= 2
    assert sum("<previous-summary>" in _body(r) for r in merges) == 1
    assert "<previous-summary>" in _body(merges[-1])


def test_overflow_retries_with_smaller_chunks() -> None:
    provider = ScriptedProvider([ContextOverflowError("prompt is too long")], default="FINE")
    messages = long_history(4)
    whole = estimate_text(render_history(messages)) + 50  # one chunk, then two or more
    summary = summarize(provider, messages, previous_summary=None, instructions=None,
                        settings=Compaction(chunk_tokens=max(whole, 1000)))
    assert summary.method == "smaller-chunks" and summary.text.startswith("FINE\n\n## The ")
    first, *rest = provider.requests
    assert "part 1 of" not in _system(first)  # the whole history fit in one chunk at first
    assert len([r for r in rest if not is_merge(r)]) >= 2
    assert max(len(_body(r)) for r in rest) < len(_body(first))


@pytest.mark.parametrize("empty", ["", "   \n\t "])
def test_empty_reply_counts_as_failure(empty: str) -> None:
    provider = ScriptedProvider([empty], default="REAL SUMMARY")
    summary = summarize(provider, conversation("u a u a"), previous_summary=None,
                        instructions=None, settings=Compaction())
    assert summary.text == "REAL SUMMARY" and summary.method == "smaller-chunks"
    assert summary.requests == 2


COPIED = ("What the user is trying to achieve, and the current task.\n\n## Decisions\n"
          "- What was decided, with the reason, and alternatives that were rejected.\n"
          "**Stated preferences, constraints and corrections, in the user's terms.**")


def test_a_summary_that_copies_its_instructions_counts_as_failure() -> None:
    """A 0.5B model answered with the sections' descriptions from its prompt: no summary."""
    provider = ScriptedProvider([COPIED], default="## Goal\n- ship v2")
    summary = summarize(provider, conversation("u a u a"), previous_summary=None,
                        instructions=None, settings=Compaction())
    assert summary.text == "## Goal\n- ship v2" and summary.requests == 2


def test_a_summary_with_the_sections_headings_and_a_line_of_its_own_is_kept() -> None:
    """The headings are what the prompt asks for; a line of its own beside one copied
    description is a summary."""
    text = "## Goal\n- Ship v2 by Friday.\n## Next steps\n- What remains to be done, in order."
    provider = ScriptedProvider([text])
    summary = summarize(provider, conversation("u a u a"), previous_summary=None,
                        instructions=None, settings=Compaction())
    assert summary.text.startswith(text) and summary.requests == 1


def test_falls_back_to_the_simple_prompt() -> None:
    def reply(request: ModelRequest) -> str:
        if is_simple(request):
            return "simple summary"
        raise ContextOverflowError("prompt is too long")

    provider = ScriptedProvider(default=reply)
    summary = summarize(provider, conversation("u a u a"), previous_summary="PREV",
                        instructions="focus X", settings=Compaction(max_retries=2))
    assert summary.method == "simple" and summary.text == "simple summary"
    assert summary.dropped is None
    # three full-prompt attempts (chunkTokens, then halved twice), then the simple one
    assert [is_simple(r) for r in provider.requests] == [False, False, False, True]
    assert "focus X" in _system(provider.requests[-1])
    assert "PREV" in _body(provider.requests[-1])


def test_total_failure_writes_a_truncation_note_naming_what_was_dropped() -> None:
    provider = ScriptedProvider(default=ContextOverflowError("prompt is too long: 9000"))
    messages = conversation("u:5 c:5 r:5 a:5 u:5 C:5 r:5 r:5 a:5")
    messages[0].content = [TextPart("Deploy the service to staging\n  and then run the migration "
                                    "scripts in db/migrations/ before noon tomorrow please")]
    summary = summarize(provider, messages, previous_summary="## Goal\n- earlier goal",
                        instructions=None, settings=Compaction(max_retries=1))
    assert summary.method == "truncated"
    assert summary.requests == 3 == len(provider.requests)  # 2 sizes + simple, 1 each
    note = summary.dropped
    assert note is not None
    assert summary.text == "## Goal\n- earlier goal\n\n" + note
    assert "prompt is too long: 9000" in note
    assert "9 messages (2 user, 4 assistant, 3 tool results)" in note
    assert f"{messages[0].timestamp} to {messages[-1].timestamp}" in note
    assert "read ×2" in note and "exec ×1" in note
    assert ('"Deploy the service to staging and then run the migration scripts in '
            'db/migration…"')  # 80 characters in note
    assert f'"{messages[4].text}"' in note


def test_truncation_note_caps_the_user_excerpts() -> None:
    provider = ScriptedProvider(default="")
    messages = conversation(" ".join(["u:3 a:3"] * 25))
    summary = summarize(provider, messages, previous_summary=None, instructions=None,
                        settings=Compaction(max_retries=1))
    assert summary.method == "truncated" and summary.text == summary.dropped
    assert summary.text.count('\n  - "') == 20
    assert "... and 5 more" in summary.text
    assert "empty summary" in summary.text


@pytest.mark.parametrize("error", [
    ProviderError("cannot reach http://127.0.0.1:9/v1: Connection refused", retryable=True),
    ProviderError("upstream 500", retryable=True, status=500),
    ProviderError("invalid x-api-key", status=401),
])
def test_an_error_that_is_not_about_size_stops_at_once(error: ProviderError) -> None:
    """An outage is not a reason to summarise less: no smaller chunks, no simple prompt, no
    truncation note; the error reaches the caller, who keeps the history."""
    provider = ScriptedProvider(default=error)
    with pytest.raises(ProviderError) as raised:
        summarize(provider, conversation("u a u a"), previous_summary="PREV",
                  instructions=None, settings=Compaction(max_retries=3))
    assert raised.value is error and len(provider.requests) == 1


def test_an_outage_after_a_smaller_attempt_still_stops() -> None:
    provider = ScriptedProvider([ContextOverflowError("too long")],
                                default=ProviderError("Connection refused"))
    with pytest.raises(ProviderError, match="Connection refused"):
        summarize(provider, conversation("u a u a"), previous_summary=None,
                  instructions=None, settings=Compaction(max_retries=3))
    assert len(provider.requests) == 2


def test_other_errors_propagate() -> None:
    provider = ScriptedProvider([RuntimeError("bug")])
    with pytest.raises(RuntimeError):
        summarize(provider, conversation("u a"), previous_summary=None, instructions=None,
                  settings=Compaction())


def test_nothing_to_summarise_keeps_the_previous_summary() -> None:
    provider = ScriptedProvider()
    summary = summarize(provider, [], previous_summary="kept", instructions=None,
                        settings=Compaction())
    assert summary == type(summary)("kept", "unchanged", None, 0)
    assert provider.requests == []


def test_chunk_sizes_halve_per_retry() -> None:
    assert chunk_sizes(Compaction()) == [30000, 15000, 7500, 3750]
    assert chunk_sizes(Compaction(chunk_tokens=1000, max_retries=5)) == [1000, 500, 250]
