"""Table-driven tests of the tool-result pruner and the single-result cap."""

from __future__ import annotations

import copy
import json

import pytest

from clawd.config import ContextPruning
from clawd.context.pruning import PruneResult, cap_tool_result, message_chars, prune, reapply
from clawd.core.messages import ImagePart, Message, OtherPart, TextPart, ToolCall

PLACEHOLDER = "[Old tool result content cleared]"
NOW = 1_700_000_000.0


def cfg(**kw) -> ContextPruning:
    return ContextPruning(**kw)


def body(n: int, tag: str = "") -> str:
    """Distinct head and tail so trimming is visible: HHH...MMM...TTT."""
    third = n // 3
    return tag + "H" * (third - len(tag)) + "M" * (n - 2 * third) + "T" * third


def session(*results: tuple[str, str], bootstrap: bool = False,
            final: str = "done") -> list[Message]:
    """A user turn, one assistant tool call + result per (tool, text), a final reply."""
    msgs: list[Message] = []
    if bootstrap:
        boot = ToolCall("b0", "read", {"path": "SOUL.md"})
        msgs += [Message.assistant(tool_calls=[boot]),
                 Message.tool_result(boot, "S" * 9000)]
    msgs.append(Message.user("q"))
    for n, (tool, text) in enumerate(results):
        call = ToolCall(f"c{n}", tool, {"cmd": "x"})
        msgs += [Message.assistant(tool_calls=[call]), Message.tool_result(call, text)]
    msgs.append(Message.assistant(final))
    return msgs


def run(msgs: list[Message], conf: ContextPruning, mode: str = "adaptive", *,
        window: int = 10, last_call_at: float | None = 0.0, now: float = NOW,
        chars_per_token: float | None = None) -> PruneResult:
    """``chars_per_token`` stands for a token counter giving that many characters a token."""
    tokens_of = None if chars_per_token is None else (
        lambda ms: sum(message_chars(m) for m in ms) / chars_per_token)
    return prune(msgs, conf, mode=mode, now=now, last_call_at=last_call_at,
                 context_window=window, tokens_of=tokens_of)


def actions(res: PruneResult) -> dict[str, str]:
    return {e.tool_name: e.action for e in res.entries}


def results_of(msgs: list[Message]) -> list[str]:
    return [m.text for m in msgs if m.role == "toolResult"]


CLEAR_ALL = dict(min_prunable_tool_chars=0, keep_last_assistants=1)


@pytest.mark.parametrize("last_call_at, pruned", [
    (None, False),             # never called: no cache to have expired
    (NOW - 299.999, False),    # just before the ttl
    (NOW - 300.0, True),       # exactly at the ttl
    (NOW - 301.0, True),
    (NOW - 86400.0, True),
])
def test_cache_ttl_boundary(last_call_at, pruned):
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(ttl="5m", **CLEAR_ALL), "cache-ttl", last_call_at=last_call_at)
    assert res.changed is pruned
    assert (res.messages is msgs) is not pruned
    assert res.skipped == (None if pruned else "ttl")


@pytest.mark.parametrize("mode", ["adaptive", "cache-ttl"])
def test_cache_ttl_and_adaptive_share_the_ratios(mode):
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(**CLEAR_ALL), mode, window=1_000_000, last_call_at=0.0)
    assert not res.changed and res.skipped == "below ratio"


def test_adaptive_ignores_the_clock():
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(**CLEAR_ALL), "adaptive", last_call_at=NOW)
    assert actions(res) == {"exec": "hard-clear"}


# one 20000-char result: ~20011 chars of context before, ~3090 after a soft trim
@pytest.mark.parametrize("window, extra, expected", [
    (20000, {}, None),                                          # 0.25 < softTrimRatio
    (10000, {}, "soft-trim"),                                   # 0.50 -> 0.08 after trim
    (1000, {}, "soft-trim"),                                    # over hard, under min chars
    (1000, {"min_prunable_tool_chars": 0}, "hard-clear"),
    (1000, {"min_prunable_tool_chars": 0, "hard_clear": {"enabled": False}}, "soft-trim"),
    (10000, {"soft_trim_ratio": 0.6}, None),
    (10000, {"hard_clear_ratio": 0.05, "min_prunable_tool_chars": 0}, "hard-clear"),
])
def test_ratios_choose_soft_trim_or_hard_clear(window, extra, expected):
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(keep_last_assistants=1, **extra), window=window)
    assert actions(res) == ({"exec": expected} if expected else {})


@pytest.mark.parametrize("window, cleared", [
    (3100, [0]),         # 9053 chars / 12400: one clear brings it to 0.49
    (2000, [0, 1]),      # oldest first until under hardClearRatio
    (1000, [0, 1, 2]),
])
def test_hard_clear_oldest_first_until_under_ratio(window, cleared):
    msgs = session(*[("exec", body(3000, f"r{i}")) for i in range(3)])
    assert sum(message_chars(m) for m in msgs) == 9053
    res = run(msgs, cfg(**CLEAR_ALL), window=window)
    texts = results_of(res.messages)
    assert [i for i, t in enumerate(texts) if t == PLACEHOLDER] == cleared
    assert res.context_chars_after / res.window_chars < 0.5


@pytest.mark.parametrize("keep, pruned", [
    (0, [0, 1, 2, 3]),
    (1, [0, 1, 2, 3]),   # the final reply is the only protected assistant
    (2, [0, 1, 2]),
    (3, [0, 1]),
    (4, [0]),
    (5, []),             # protection starts at the first assistant
    (6, []),             # fewer assistants than keepLastAssistants: nothing is old
])
def test_protected_assistants(keep, pruned):
    msgs = session(*[("exec", body(5000, f"r{i}")) for i in range(4)])
    res = run(msgs, cfg(keep_last_assistants=keep, min_prunable_tool_chars=0))
    texts = results_of(res.messages)
    assert [i for i, t in enumerate(texts) if t == PLACEHOLDER] == pruned


def test_nothing_before_the_first_user_message():
    msgs = session(("exec", body(9000)), bootstrap=True)
    res = run(msgs, cfg(**CLEAR_ALL))
    assert res.messages[1] is msgs[1] and res.messages[1].text == "S" * 9000
    assert results_of(res.messages)[1] == PLACEHOLDER
    no_user = [m for m in msgs if m.role != "user"]
    assert not run(no_user, cfg(**CLEAR_ALL), "aggressive").changed


TOOLS = ["exec", "read", "web_fetch", "mcp__git__log"]


@pytest.mark.parametrize("allow, deny, pruned", [
    ([], [], TOOLS),
    (["exec"], [], ["exec"]),
    (["web_*"], [], ["web_fetch"]),
    ([], ["read"], ["exec", "web_fetch", "mcp__git__log"]),
    (["*"], ["mcp__*", "web_?etch"], ["exec", "read"]),
    (["EXEC", "Read"], [], ["exec", "read"]),                  # case-insensitive
    (["exec"], ["exec"], []),                                  # deny wins
    (["nothing*"], [], []),
])
def test_allow_deny_globs(allow, deny, pruned):
    msgs = session(*[(t, body(5000)) for t in TOOLS])
    res = run(msgs, cfg(tools={"allow": allow, "deny": deny}, **CLEAR_ALL))
    assert sorted(actions(res)) == sorted(pruned)


@pytest.mark.parametrize("blocks", [
    [ImagePart("QUJD", "image/png")],
    [TextPart("x" * 20000), ImagePart("QUJD", "image/png")],
    [TextPart("x" * 20000), OtherPart({"type": "resource", "uri": "file:///a"})],
])
@pytest.mark.parametrize("mode", ["adaptive", "aggressive"])
def test_non_text_tool_results_untouched(blocks, mode):
    msgs = session(("screenshot", "y" * 20000), ("screenshot", "z" * 20000))
    msgs[2] = Message("toolResult", blocks, tool_call_id="c0", tool_name="screenshot")
    res = run(msgs, cfg(**CLEAR_ALL), mode)
    assert res.messages[2] is msgs[2]
    assert [e.message_id for e in res.entries] == [msgs[4].id]


@pytest.mark.parametrize("mode", ["adaptive", "aggressive", "cache-ttl"])
def test_user_and_assistant_text_untouched(mode):
    msgs = session(("exec", body(20000)), final="F" * 50000)
    msgs[0] = Message.user("U" * 50000)
    msgs.insert(1, Message.assistant("A" * 50000))
    res = run(msgs, cfg(keep_last_assistants=1, min_prunable_tool_chars=0), mode)
    assert res.changed
    for old, new in zip(msgs, res.messages):
        if old.role != "toolResult":
            assert new is old


@pytest.mark.parametrize("mode", ["off", "cache-ttl", "adaptive", "aggressive"])
def test_input_and_transcript_unchanged(mode):
    msgs = session(*[("exec", body(9000, f"r{i}")) for i in range(4)])
    before = copy.deepcopy(msgs)
    lines = "".join(json.dumps(m.to_entry()) + "\n" for m in msgs).encode()
    res = run(msgs, cfg(keep_last_assistants=2, min_prunable_tool_chars=0), mode)
    assert res.changed is (mode != "off")
    assert msgs == before
    assert "".join(json.dumps(m.to_entry()) + "\n" for m in msgs).encode() == lines
    for old, new in zip(msgs, res.messages):
        assert new.id == old.id and new.tool_call_id == old.tool_call_id


def test_off_returns_the_input():
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(**CLEAR_ALL), "off")
    assert res.messages is msgs and res.skipped == "off" and not res.entries


@pytest.mark.parametrize("keep, hard, expect", [
    (3, True, {"r0": "hard-clear", "r1": "hard-clear"}),
    (0, True, {f"r{i}": "hard-clear" for i in range(4)}),   # the latest turn still kept
    (3, False, {"r0": "soft-trim", "r1": "soft-trim"}),
])
def test_aggressive_ignores_ratios(keep, hard, expect):
    msgs = session(*[(f"r{i}", body(5000)) for i in range(4)], ("r4", body(5000)))
    msgs.pop()  # end on the last tool result, mid-turn
    conf = cfg(keep_last_assistants=keep, hard_clear={"enabled": hard})
    res = run(msgs, conf, "aggressive", window=10_000_000)
    assert actions(res) == expect
    assert res.messages[-1] is msgs[-1]
    cleared = [m.text for m in res.messages if m.role == "toolResult" and m.text == PLACEHOLDER]
    assert len(cleared) == (len(expect) if hard else 0)


def test_soft_trim_format_and_report():
    text = body(48213)
    msgs = session(("exec", text), ("read", "small"))
    res = run(msgs, cfg(keep_last_assistants=1), window=20000)
    trimmed = res.messages[2].text
    note = "[Tool result trimmed: kept first 1500 and last 1500 of 48213 characters.]"
    assert trimmed == text[:1500] + "\n...\n" + text[-1500:] + "\n\n" + note
    assert len(res.entries) == 1
    entry = res.entries[0]
    assert (entry.message_id, entry.tool_name, entry.action) == (msgs[2].id, "exec", "soft-trim")
    assert (entry.chars_before, entry.chars_after) == (48213, len(trimmed))
    assert sum(e.chars_before - e.chars_after for e in res.entries) == 48213 - len(trimmed) \
        == res.context_chars_before - res.context_chars_after
    assert res.count("soft-trim") == 1 and res.count("hard-clear") == 0
    assert res.window_chars == 80000


def test_report_counts_a_trimmed_then_cleared_result_once():
    msgs = session(("exec", body(20000)))
    res = run(msgs, cfg(**CLEAR_ALL), window=100)
    [entry] = res.entries
    assert (entry.action, entry.chars_before, entry.chars_after) == \
        ("hard-clear", 20000, len(PLACEHOLDER))


@pytest.mark.parametrize("size, max_chars, head, tail, trimmed", [
    (4000, 4000, 1500, 1500, False),      # not longer than maxChars
    (4001, 4000, 1500, 1500, True),
    (10000, 3000, 5000, 5000, False),     # head + tail would keep everything
    (10001, 3000, 5000, 5000, True),
])
def test_soft_trim_thresholds(size, max_chars, head, tail, trimmed):
    conf = cfg(keep_last_assistants=1,
               soft_trim={"max_chars": max_chars, "head_chars": head, "tail_chars": tail})
    res = run(session(("exec", body(size))), conf)
    assert res.changed is trimmed


def test_rejects_unknown_mode_and_empty_window():
    with pytest.raises(ValueError):
        run(session(), cfg(), "sometimes")
    assert run(session(("exec", body(20000))), cfg(), window=0).skipped == "no window"


@pytest.mark.parametrize("size, max_chars", [
    (10, 100), (100, 100), (101, 100), (48213, 4000), (1_000_000, 16000), (500, 1000),
])
def test_cap_tool_result(size, max_chars):
    text = body(size)
    out = cap_tool_result(text, max_chars)
    if size <= max_chars:
        assert out is text
        return
    assert len(out) <= max_chars
    assert out.startswith("H") and f"of {size} characters.]" in out
    if max_chars >= 1000:
        assert "\n...\n" in out and "T\n\n[Tool output truncated" in out


@pytest.mark.parametrize("max_chars", [0, -1])
def test_cap_disabled(max_chars):
    assert cap_tool_result("x" * 10_000, max_chars) == "x" * 10_000


def test_reapply_reproduces_earlier_decisions_exactly():
    msgs = session(("exec", body(20000, "a")), ("read", body(9000, "b")), ("exec", "short"),
                   final="done")
    first = run(msgs, cfg(**CLEAR_ALL, hard_clear_ratio=0.15), window=8000)
    decisions = {e.message_id: e.action for e in first.entries}
    assert sorted(decisions.values()) == ["hard-clear", "soft-trim"]
    snapshot = copy.deepcopy(msgs)
    again, entries = reapply(msgs, decisions, cfg(**CLEAR_ALL))
    assert [m.content for m in again] == [m.content for m in first.messages]
    assert [(e.message_id, e.action, e.chars_before, e.chars_after) for e in entries] == [
        (e.message_id, e.action, e.chars_before, e.chars_after) for e in first.entries]
    assert [m.content for m in msgs] == [m.content for m in snapshot]  # never mutated


@pytest.mark.parametrize("role, text, action, changed", [
    ("toolResult", "short", "soft-trim", False),       # nothing left to trim
    ("toolResult", "short", "hard-clear", True),
    ("user", body(20000), "hard-clear", False),        # only tool results are ever pruned
    ("assistant", body(20000), "soft-trim", False),
    ("toolResult", body(20000), "soft-trim", True),
    ("toolResult", body(20000), "unknown-action", False),  # a hand-edited store
])
def test_reapply_only_touches_text_tool_results(role, text, action, changed):
    call = ToolCall("c1", "exec", {})
    message = (Message.tool_result(call, text) if role == "toolResult"
               else Message(role, [TextPart(text)]))
    out, entries = reapply([message], {message.id: action}, cfg())
    assert (out[0] is not message) is changed and bool(entries) is changed


def test_reapply_keeps_images_and_ignores_unknown_ids():
    call = ToolCall("c1", "screenshot", {})
    image = Message("toolResult", [TextPart(body(9000)), ImagePart("AAAA", "image/png")],
                    tool_call_id="c1", tool_name="screenshot")
    plain = Message.tool_result(call, body(9000))
    msgs = [image, plain]
    out, entries = reapply(msgs, {image.id: "hard-clear", "gone": "hard-clear"}, cfg())
    assert out == msgs and entries == []
    assert reapply(msgs, {}, cfg()) == (msgs, [])


@pytest.mark.parametrize("chars_per_token, trim_above, expected", [
    (None, 4000, {}),                     # no counter: four characters a token
    (4, 4000, {}),                        # 12000 of 40000 chars: under softTrimRatio 0.35
    (3, 4000, {"exec": "soft-trim"}),     # 12000 of 30000 chars: over it
    (2, 20000, {"exec": "hard-clear"}),   # 12000 of 20000 chars, untrimmed: over 0.5
])
def test_ratios_are_of_the_window_in_the_callers_characters_per_token(
        chars_per_token, trim_above, expected):
    msgs = session(("exec", body(12000)), final="x")
    conf = cfg(min_prunable_tool_chars=0, keep_last_assistants=1, soft_trim_ratio=0.35,
               soft_trim={"max_chars": trim_above})
    res = run(msgs, conf, window=10_000, chars_per_token=chars_per_token)
    assert actions(res) == expected
    assert res.window_chars == 10_000 * (chars_per_token or 4)
