"""Context pruning through the turn loop: what the model is sent, what stays on disk.

A scripted model reads big log files from the workspace and calls a ``dump`` tool that
returns long output; the requests the provider recorded show what was pruned, the
transcript and a reloaded session show that nothing on disk changed.
"""

from __future__ import annotations

import json

import pytest

from clawd.core.events import CommandOutput
from clawd.core.messages import Message, ToolSpec
from clawd.frontends.commands import Chat
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.base import Tool, schema
from clawd.tools.files import file_tools

from conftest import make_runtime, stored_text, transcript_lines

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")
PLACEHOLDER = "[Old tool result content cleared]"
TRIM_NOTE = "[Tool result trimmed: kept first 1500 and last 1500 of"
# Only pruning under test: no flush or compaction turns consuming scripted replies.
QUIET = {"compaction": {"enabled": False, "memoryFlush": {"enabled": False}}}
# The logs run at about 3 characters a token, so 26000 tokens hold about 79000 characters.
# Three 30 KB logs and a 32 KB report are far over softTrimRatio; soft-trimming the logs
# leaves about 41 KB (0.52, over hardClearRatio), and clearing the oldest log brings it to
# about 38 KB (0.48): exactly one log is cleared.
WINDOW = 26_000


def log_text(tag: str, chars: int) -> str:
    """Numbered lines with a recognisable head, middle and tail."""
    lines, i = [], 0
    while sum(map(len, lines)) < chars + 200:  # room for the shorter marker line
        lines.append(f"{tag} line {i:05d}: build step ok, 42 files checked, 0 warnings\n")
        i += 1
    lines[len(lines) // 2] = f"{tag} MIDDLE-MARKER\n"
    return "".join(lines)[:chars]


def dump_tool() -> Tool:
    spec = ToolSpec("dump", "Print a long report.", schema(
        {"tag": {"type": "string"}, "chars": {"type": "integer"}}, ["tag", "chars"]))
    return Tool(spec, lambda args, ctx: log_text(args["tag"], int(args["chars"])))


def settings(**pruning) -> dict:
    return {**QUIET, "contextPruning": {"minPrunableToolChars": 5000, **pruning}}


def runtime(tmp_path, provider, clock, *, cache=True, window=WINDOW, **pruning):
    rt = make_runtime(tmp_path, provider, window=window, settings=settings(**pruning),
                      clock=clock, cache=cache, tools=file_tools() + [dump_tool()])
    for tag in "ABC":
        rt.files.write(f"logs/{tag.lower()}.log", log_text(tag, 30_000))
    return rt


def script_tool_turns(provider: ScriptedProvider) -> None:
    """Turn 1 reads three logs (4 requests); turn 2 dumps one report (2 requests)."""
    provider.add(Reply("", [tool("read", path="logs/a.log")]),
                 Reply("", [tool("read", path="logs/b.log")]),
                 Reply("", [tool("read", path="logs/c.log")]),
                 "All three builds passed.",
                 Reply("", [tool("dump", tag="D", chars=32_000)]),
                 "The report is clean.")


def run(session: Session, text: str) -> list:
    return list(session.run_turn(text))


def results(messages: list[Message]) -> dict[str, str]:
    """Tool-result text by message id."""
    return {m.id: m.text for m in messages if m.role == "toolResult"}


def by_tag(session: Session) -> dict[str, Message]:
    """The history's tool results keyed by the log/report tag they hold."""
    return {m.text[0]: m for m in session.history.messages if m.role == "toolResult"}


def assert_unpruned(request, session: Session) -> None:
    full = results(session.history.messages)
    sent = results(request.messages)
    assert all(sent[i] == full[i] for i in sent)


def assert_text_untouched(request, session: Session) -> None:
    history = {m.id: m for m in session.history.messages}
    for m in request.messages:
        if m.role != "toolResult":
            assert m.content == history[m.id].content


def pruned_session(tmp_path, clock, **pruning) -> tuple[Session, ScriptedProvider]:
    """Two tool-heavy turns a minute apart, then a third turn six minutes later."""
    provider = ScriptedProvider()
    script_tool_turns(provider)
    provider.add("Nothing new since.")
    session = Session.open(runtime(tmp_path, provider, clock, **pruning), KEY)
    run(session, "check the three build logs")
    clock.advance(minutes=1)
    run(session, "and the report")
    clock.advance(minutes=6)
    run(session, "anything new?")
    provider.assert_done()
    return session, provider


# --- (a) cache-ttl: nothing within the ttl, old results trimmed/cleared after it ------------

def test_within_ttl_nothing_is_pruned_after_it_old_results_are(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock)
    assert len(provider.requests) == 7
    for request in provider.requests[:6]:  # two turns, a minute apart: the cache is warm
        assert_unpruned(request, session)
        assert request.cache
    assert len(results(provider.requests[5].messages)) == 4

    last = provider.requests[6]
    sent = results(last.messages)
    logs = by_tag(session)
    a, b, c, d = (logs[t] for t in "ABCD")
    assert sent[a.id] == PLACEHOLDER  # oldest first, while still over hardClearRatio
    for kept in (b, c):
        text = sent[kept.id]
        assert TRIM_NOTE in text and f"{len(kept.text)} characters.]" in text
        assert text.startswith(kept.text[:1500])
        assert kept.text[-1500:] in text
        assert "MIDDLE-MARKER" not in text and "MIDDLE-MARKER" in kept.text
    # D belongs to the last three assistant messages (keepLastAssistants): intact
    assert sent[d.id] == d.text
    assert_text_untouched(last, session)
    assert [m.id for m in last.messages] == [m.id for m in session.history.messages[:-1]]


def test_keep_last_assistants_widens_the_protected_tail(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock, keepLastAssistants=5)
    sent, logs = results(provider.requests[-1].messages), by_tag(session)
    # assistants: read a, read b, read c, text, dump, text -> the last five start at "read b"
    assert sent[logs["A"].id] != logs["A"].text
    assert all(sent[logs[t].id] == logs[t].text for t in "BCD")


# --- (b) the transcript never changes; a reload has the full results -----------------------

def test_transcript_is_byte_identical_after_a_pruned_request(tmp_path, clock):
    provider = ScriptedProvider()
    script_tool_turns(provider)
    provider.add("Nothing new since.")
    rt = runtime(tmp_path, provider, clock)
    session = Session.open(rt, KEY)
    run(session, "check the three build logs")
    run(session, "and the report")
    before = stored_text(session).encode()
    full = results(session.history.messages)

    clock.advance(minutes=6)
    run(session, "anything new?")
    assert session.ledger.last  # the request really was pruned
    after = stored_text(session).encode()
    assert after.startswith(before)
    added = [json.loads(line) for line in after[len(before):].decode().splitlines()]
    assert [e["role"] for e in added] == ["user", "assistant"]
    assert PLACEHOLDER.encode() not in after and b"Tool result trimmed" not in after

    reloaded = Session.open(rt, KEY)
    assert results(reloaded.history.messages) == full
    assert results(session.history.messages) == full  # the in-memory history too


# --- (c) the ttl holds across processes ---------------------------------------------------

def test_a_new_session_object_respects_the_persisted_last_call(tmp_path, clock):
    provider = ScriptedProvider()
    script_tool_turns(provider)
    rt = runtime(tmp_path, provider, clock)
    run(Session.open(rt, KEY), "check the three build logs")
    run(Session.open(rt, KEY), "and the report")
    last_call = rt.store.get(KEY)["lastModelCallAt"]
    assert last_call == clock().timestamp()

    clock.advance(minutes=4)  # a new process within the ttl: the cache is still warm
    provider.add("Still fine.")
    fresh = Session.open(rt, KEY)
    run(fresh, "still ok?")
    assert_unpruned(provider.requests[-1], fresh)
    assert fresh.ledger.last == []

    clock.advance(minutes=5, seconds=1)  # another new process, past the ttl
    provider.add("Nothing new since.")
    later = Session.open(rt, KEY)
    run(later, "anything new?")
    sent, logs = results(provider.requests[-1].messages), by_tag(later)
    assert sent[logs["A"].id] == PLACEHOLDER
    assert TRIM_NOTE in sent[logs["B"].id]
    provider.assert_done()


def test_exactly_at_the_ttl_prunes_just_before_it_does_not(tmp_path, clock):
    provider = ScriptedProvider()
    script_tool_turns(provider)
    provider.add("one", "two")
    rt = runtime(tmp_path, provider, clock)
    session = Session.open(rt, KEY)
    run(session, "check the three build logs")
    run(session, "and the report")
    clock.advance(minutes=4, seconds=59)
    run(session, "first")
    assert_unpruned(provider.requests[-1], session)
    clock.advance(minutes=5)
    run(Session.open(rt, KEY), "second")
    assert PLACEHOLDER in {m.text for m in provider.requests[-1].messages}


# --- a pruned result stays pruned, identically, so the cached prefix keeps matching -------

def contents(request) -> list:
    return [m.content for m in request.messages]


def test_pruned_results_go_out_identically_on_later_requests(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock)
    pruned = provider.requests[6]
    provider.add(Reply("", [tool("dump", tag="E", chars=8_000)]), "E is clean too.")
    clock.advance(minutes=1)  # within the ttl of the pruned request
    run(session, "one more report")
    for request in provider.requests[7:]:
        # the pruned request is a prefix of every later one: the cache written then is read
        assert contents(request)[:len(pruned.messages)] == contents(pruned)
    logs = by_tag(session)
    # D is older than the last three assistant messages by now, but the cache is warm
    assert results(provider.requests[-1].messages)[logs["D"].id] == logs["D"].text
    assert len(session.ledger.last) == 3  # what the request carried, for /context detail
    assert results(Session.open(session.rt, KEY).history.messages)[logs["A"].id] == logs["A"].text


def test_a_new_process_sends_the_same_pruned_prefix(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock)
    pruned = provider.requests[6]
    logs = by_tag(session)
    stored = session.rt.store.get(KEY)["prunedResults"]
    assert stored == {logs["A"].id: "hard-clear", logs["B"].id: "soft-trim",
                      logs["C"].id: "soft-trim"}
    clock.advance(minutes=2)
    provider.add("Still nothing.")
    fresh = Session.open(session.rt, KEY)
    run(fresh, "and now?")
    assert contents(provider.requests[-1])[:len(pruned.messages)] == contents(pruned)


def test_mode_off_ignores_earlier_pruning(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock)
    rt = session.rt
    rt.settings = rt.settings.model_copy(update={
        "context_pruning": rt.settings.context_pruning.model_copy(update={"mode": "off"})})
    provider.add("Full logs again.")
    later = Session.open(rt, KEY)
    run(later, "show me everything")
    assert_unpruned(provider.requests[-1], later)


# --- (d) /context detail names what was pruned ---------------------------------------------

def output(chat: Chat, line: str) -> str:
    return "\n".join(e.text for e in chat.handle(line) if isinstance(e, CommandOutput))


def test_context_detail_lists_the_pruned_results(tmp_path, clock):
    provider = ScriptedProvider()
    script_tool_turns(provider)
    provider.add("Nothing new since.")
    chat = Chat.open(runtime(tmp_path, provider, clock), KEY)
    list(chat.handle("check the three build logs"))
    list(chat.handle("and the report"))
    before = output(chat, "/context detail")
    assert "Pruned in the last request:\n  (nothing)" in before

    clock.advance(minutes=6)
    list(chat.handle("anything new?"))
    text = output(chat, "/context detail")
    section = text.split("Pruned in the last request:\n", 1)[1].splitlines()
    logs = by_tag(chat.session)
    assert len(section) == 3
    assert section[0].startswith(f"  read result {logs['A'].id}: hard-clear "
                                 f"({len(logs['A'].text)} → {len(PLACEHOLDER)} chars)")
    for line, tag in zip(section[1:], "BC"):
        assert f"read result {logs[tag].id}: soft-trim ({len(logs[tag].text)} → " in line
    assert logs["D"].id not in text
    assert "pruned" not in output(chat, "/context")  # the summary view stays short


def test_context_detail_in_a_new_process_shows_the_remembered_pruning(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock)
    rt, logs = session.rt, by_tag(session)
    session.close()
    fresh = Chat.open(rt, KEY)  # nothing sent from this process yet
    text = output(fresh, "/context detail")
    section = text.split("Pruned in the last request:\n", 1)[1].splitlines()
    assert section == [f"  {line}" for line in session.ledger.last]
    assert [line.split()[2].rstrip(":") for line in section] == [logs[t].id for t in "ABC"]


# --- (e) a single oversized result is capped before it reaches the transcript --------------

def test_oversized_tool_result_is_capped_in_the_transcript(tmp_path, clock):
    provider = ScriptedProvider([Reply("", [tool("dump", tag="Z", chars=40_000)]), "done"])
    rt = make_runtime(tmp_path, provider, settings={**QUIET, "tools": {"maxOutputChars": 5000}},
                      clock=clock, tools=[dump_tool()])
    session = Session.open(rt, KEY)
    run(session, "dump it")
    original = log_text("Z", 40_000)
    stored = transcript_lines(session)
    result = next(e for e in stored if e.get("role") == "toolResult")
    text = result["content"][0]["text"]
    assert len(text) <= 5000
    assert text.startswith(original[:2000])
    note = text.rsplit("\n\n", 1)[1]
    assert note.startswith("[Tool output truncated: kept first ") and "of 40000 characters" in note
    head = int(note.split("kept first ")[1].split()[0])
    tail = int(note.split("and last ")[1].split()[0])
    assert text == f"{original[:head]}\n...\n{original[-tail:]}\n\n{note}"
    assert head + tail > 4000  # most of the budget is real output
    # the model saw exactly what was stored
    assert provider.requests[1].messages[-1].text == text


# --- (f) modes ------------------------------------------------------------------------------

def run_modes_session(tmp_path, clock, *, cache: bool, advance: int, **pruning):
    provider = ScriptedProvider()
    script_tool_turns(provider)
    provider.add("Nothing new since.")
    session = Session.open(runtime(tmp_path, provider, clock, cache=cache, **pruning), KEY)
    run(session, "check the three build logs")
    run(session, "and the report")
    clock.advance(minutes=advance)
    run(session, "anything new?")
    return session, provider


@pytest.mark.parametrize("mode, cache", [("off", True), (None, False)])
def test_off_never_prunes(tmp_path, clock, mode, cache):
    """``off``, and the default for a model without a prompt cache."""
    pruning = {"mode": mode} if mode else {}
    session, provider = run_modes_session(tmp_path, clock, cache=cache, advance=60, **pruning)
    for request in provider.requests:
        assert_unpruned(request, session)
    assert session.ledger.last == []


def test_default_mode_with_a_prompt_cache_is_cache_ttl(tmp_path, clock):
    session, provider = run_modes_session(tmp_path, clock, cache=True, advance=6)
    assert PLACEHOLDER in {m.text for m in provider.requests[-1].messages}


def test_adaptive_prunes_within_the_ttl(tmp_path, clock):
    session, provider = run_modes_session(tmp_path, clock, cache=True, advance=0,
                                          mode="adaptive")
    logs = by_tag(session)
    # fourth request of turn 1: a, b, c read; three assistants (keepLastAssistants) -> none
    # old yet. Turn 2's first request: "read a" is older than the last three assistants.
    assert_unpruned(provider.requests[3], session)
    second_turn = results(provider.requests[4].messages)
    assert TRIM_NOTE in second_turn[logs["A"].id]
    # after "dump": A and B are old and the context is still over hardClearRatio
    after_dump = results(provider.requests[5].messages)
    assert [after_dump[logs[t].id] for t in "AB"] == [PLACEHOLDER] * 2
    last = results(provider.requests[-1].messages)
    assert [last[logs[t].id] for t in "AB"] == [PLACEHOLDER] * 2  # cleared stays cleared
    assert TRIM_NOTE in last[logs["C"].id]
    assert last[logs["D"].id] == logs["D"].text
    assert_text_untouched(provider.requests[-1], session)


def test_adaptive_below_the_ratio_leaves_everything(tmp_path, clock):
    session, provider = run_modes_session(tmp_path, clock, cache=True, advance=0,
                                          window=1_000_000, mode="adaptive")
    for request in provider.requests:
        assert_unpruned(request, session)


def test_aggressive_clears_all_old_results_whatever_the_window(tmp_path, clock):
    session, provider = run_modes_session(tmp_path, clock, cache=True, advance=0,
                                          window=1_000_000, mode="aggressive")
    logs = by_tag(session)
    last = results(provider.requests[-1].messages)
    assert [last[logs[t].id] for t in "ABC"] == [PLACEHOLDER] * 3
    assert last[logs["D"].id] == logs["D"].text
    assert_text_untouched(provider.requests[-1], session)
    # the result the model just asked for is always sent whole
    for request in provider.requests:
        if request.messages[-1].role == "toolResult":
            newest = request.messages[-1]
            assert newest.text == results(session.history.messages)[newest.id]


def test_deny_glob_keeps_a_tool_whole(tmp_path, clock):
    session, provider = pruned_session(tmp_path, clock, tools={"deny": ["rea*"]})
    sent = results(provider.requests[-1].messages)
    assert sent == results(session.history.messages[:-1])
    assert session.ledger.last == []


def test_pruning_brings_the_context_under_hard_clear_ratio_in_tokens(tmp_path, clock):
    # Measured as chars/4 the soft-trimmed context (about 41 KB) would look like 0.39 of the
    # window and nothing would be cleared, though at ~3 chars a token it is over 0.5.
    from clawd.core.tokens import estimate_messages

    session, provider = pruned_session(tmp_path, clock)
    last = provider.requests[6]
    assert PLACEHOLDER in results(last.messages).values()
    sent_tokens = estimate_messages(last.messages) * session.token_ratio
    assert sent_tokens < 0.5 * WINDOW
    unpruned = estimate_messages(session.history.messages[:-1]) * session.token_ratio
    assert unpruned > 0.5 * WINDOW
