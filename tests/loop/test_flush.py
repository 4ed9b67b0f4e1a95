"""The memory-flush policy (pure, table-driven) and the flush turn as the loop runs it."""

from __future__ import annotations

import random
from datetime import date

import pytest

from clawd.config import MemoryFlush
from clawd.context.facts import is_chatter
from clawd.context.flush import (
    SilentFilter,
    flush_due,
    flush_prompt,
    is_silent,
    listed_notes,
    not_yet_noted,
    note_lines,
    noted,
    notes_written,
    plain_notes,
    unsaved_words,
)
from clawd.core.cancel import CancelToken
from clawd.core.errors import ProviderError
from clawd.core.events import CommandOutput, Compacted, ErrorEvent, Flushed
from clawd.core.messages import Message, ToolCall
from clawd.core.tokens import make_budget
from clawd.frontends.commands import Chat
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider
from clawd.storage.files.workspace import DiskFiles

from conftest import make_runtime, transcript_lines
from loopmodel import LoopModel, filler, is_flush, talk_until_flush

KEY = "agent:main:main"
pytestmark = pytest.mark.usefixtures("both_storages")


# --- flush_due ------------------------------------------------------------------------------

# (enabled, used, flush_at, memoryFlushCompactionCount, compactionCount, due)
DUE_CASES = [
    (True, 5999, 6000, None, 0, False),   # below the point
    (True, 6000, 6000, None, 0, True),    # at the point, never flushed
    (True, 9000, 6000, 0, 0, False),      # flushed in this cycle already
    (True, 9000, 6000, 0, 1, True),       # a compaction since: a new cycle
    (True, 9000, 6000, 1, 1, False),
    (True, 9000, 6000, 2, 3, True),       # every cycle, not every other one
    (True, 9000, 6000, 3, 3, False),
    (False, 9000, 6000, None, 0, False),  # memoryFlush.enabled false
    (True, 9000, 6000, None, None, True),  # an entry without counters yet
    (True, 9000, 0, None, 0, False),      # a flush point of 0 never fires
]


@pytest.mark.parametrize("enabled, used, flush_at, flushed_in, count, due", DUE_CASES)
def test_flush_due(enabled, used, flush_at, flushed_in, count, due):
    entry = {"memoryFlushCompactionCount": flushed_in}
    if count is not None:
        entry["compactionCount"] = count
    assert flush_due(entry, used, flush_at, MemoryFlush(enabled=enabled)) is due


def test_flush_prompt_puts_in_todays_date():
    assert flush_prompt(MemoryFlush(), date(2026, 3, 9)) == (
        "Write any lasting notes to memory/2026-03-09.md; reply with NO_REPLY if nothing "
        "to store.")
    custom = MemoryFlush(prompt="Append to memory/YYYY-MM-DD.md (YYYY-MM-DD).")
    assert flush_prompt(custom, date(2026, 3, 9)) == (
        "Append to memory/2026-03-09.md (2026-03-09).")


# --- the silent reply -------------------------------------------------------------------------

@pytest.mark.parametrize("text, silent", [
    ("NO_REPLY", True), ("  NO_REPLY", True), ("\nNO_REPLY\n", True),
    ("NO_REPLY - nothing to store", True), ("NO_REPLYING", True),
    ("NO", False), ("NO_REPL", False), ("NO, really", False), ("", False),
    ("Done. NO_REPLY", False), ("no_reply", False), ("N O_REPLY", False),
    ("```\nNO_REPLY\n", True), ('"NO_REPLY"', True), ("**NO_REPLY**", True),  # small models
    ("```python\nprint(1)\n```", False),
    ('{"response": "NO_REPLY"}', True), ('```json\n{\n  "response": "NO_REPLY"\n}\n', True),
    ('{"response": "Done."}', False), ('{"a": "NO_REPLY", "b": "x"}', False), ("{", False),
])
def test_is_silent(text, silent):
    assert is_silent(text) is silent


def run_filter(pieces: list[str]) -> tuple[str, list[str]]:
    f = SilentFilter()
    out = [f.feed(p) for p in pieces]
    out.append(f.finish())
    return "".join(out), out


def cuts(text: str, rng: random.Random) -> list[list[str]]:
    """Every split into equal pieces of 1..len, plus random odd-sized splits."""
    ways = [[text[i:i + n] for i in range(0, len(text), n)] for n in range(1, len(text) + 1)]
    for _ in range(20):
        points = sorted(rng.sample(range(1, len(text)), min(3, len(text) - 1))) \
            if len(text) > 1 else []
        bounds = [0, *points, len(text)]
        ways.append([text[a:b] for a, b in zip(bounds, bounds[1:])])
    return ways


@pytest.mark.parametrize("text", [
    "NO_REPLY", "  NO_REPLY", "\n\nNO_REPLY trailing words", "NO_REPLY\n",
    "NO, really", "NO_REPL", "NOTE: keep this", "Hello there", "N", "No reply needed.",
    " leading space then NO_REPLY", "NO_REPLYING to that", "- a list", "{", "...", "42",
])
def test_silent_filter_in_odd_sized_pieces(text):
    rng = random.Random(text)
    expected = "" if is_silent(text) else text
    for pieces in cuts(text, rng):
        shown, parts = run_filter(pieces)
        assert shown == expected, pieces
        if is_silent(text):
            assert not any(parts), pieces  # not even a prefix leaks out


def test_silent_filter_releases_text_as_soon_as_it_cannot_be_silent():
    f = SilentFilter()
    assert f.feed("N") == ""
    assert f.feed("O") == ""
    assert f.feed(", wait") == "NO, wait"
    assert f.feed(" more") == " more"
    assert f.finish() == ""
    g = SilentFilter()
    assert g.feed("Hi") == "Hi"


@pytest.mark.parametrize("text, at_end", [
    ("From memory/2026-11-27.md#L1-L4 (lines 1-4):\n- Tomas lives in Ghent.", True),
    ("[Found in your memory files for this message]\n- Ghent", True),
    ("[Notes from your memory files that may relate]\n- Ghent", True),
    ("**assistant** (2026-11-27 15:08):\nI remember that your MOT is due.", True),
    ("From what you told me, you live in Ghent.", False),
    ("Fine, Ghent it is.", False),
])
def test_silent_filter_holds_a_copy_of_the_recalled_notes_to_the_end(text, at_end):
    """Shown only once the guards have seen it whole (``replytext.dumps_notes``)."""
    for pieces in cuts(text, random.Random(text)):
        shown, parts = run_filter(pieces)
        assert shown == text, pieces
        assert (not any(parts[:-1])) is at_end or len(pieces) == 1, pieces


def test_silent_filter_holds_a_reply_while_it_repeats_the_answer_before():
    before = "To keep this information, I will write it down. Here's the command:"
    f = SilentFilter(previous=before)
    assert [f.feed(p) for p in (before[:10], before[10:])] == ["", ""]
    assert f.finish() == before  # shown at the end, unless a guard drops it
    bold = "**Day 1:** Belém and the Jerónimos monastery; **Day 2:** Alfama."
    h = SilentFilter(previous=bold)  # emphasis first: compared as the probe is, unwrapped
    assert [h.feed(bold[:20]), h.feed(bold[20:])] == ["", ""] and h.finish() == bold
    g = SilentFilter(previous=before)
    assert g.feed("To keep") == ""
    assert g.feed(" it short: Alfama.") == "To keep it short: Alfama."


# --- make_budget --------------------------------------------------------------------------------

# (window, reserveTokensFloor, softThresholdTokens, softThreshold, thresholdRatio,
#  flush_at, compact_at)
BUDGET_CASES = [
    (200_000, 20_000, 4_000, None, None, 176_000, 180_000),  # the defaults
    (200_000, 20_000, 4_000, 0.5, None, 100_000, 180_000),   # the earlier flush ratio wins
    (200_000, 20_000, 4_000, 0.95, None, 176_000, 180_000),  # a later ratio does not
    (200_000, 20_000, 4_000, None, 0.8, 160_000, 160_000),   # flush never after compaction
    (200_000, 20_000, 4_000, 0.7, 0.8, 140_000, 160_000),
    (200_000, 20_000, 4_000, None, 0.95, 176_000, 180_000),  # a later compaction ratio loses
    (8_000, 1_000, 1_000, None, None, 6_000, 7_000),
    (8_000, 1_000, 0, None, None, 7_000, 7_000),
    (10_000, 20_000, 4_000, None, None, 6_250, 7_500),       # reserve: a quarter at most
    (16_384, 20_000, 4_000, None, None, 10_240, 12_288),     # soft: an eighth at most
    (4_000, 20_000, 4_000, 0.0001, None, 0, 3_000),          # a flush point <= 0: never
]


@pytest.mark.parametrize("window, floor, soft, soft_ratio, ratio, flush_at, compact_at",
                         BUDGET_CASES)
def test_make_budget(window, floor, soft, soft_ratio, ratio, flush_at, compact_at):
    budget = make_budget(window, floor, soft, soft_ratio, ratio)
    assert (budget.flush_at, budget.compact_at) == (flush_at, compact_at)
    assert budget.flush_at <= budget.compact_at


RATIOS = {"compaction": {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
                         "thresholdRatio": 0.6,
                         "memoryFlush": {"softThresholdTokens": 1000, "softThreshold": 0.5}}}


def test_status_shows_both_points(tmp_path):
    runtime = make_runtime(tmp_path, ScriptedProvider(), window=10_000, settings=RATIOS)
    chat = Chat.open(runtime, KEY)
    out = next(e for e in chat.handle("/status") if isinstance(e, CommandOutput))
    assert "memory flush at 5,000 (50%)" in out.text
    assert "compaction at 6,000 (60%)" in out.text
    assert "Compactions: 0 · memory flushes: 0" in out.text


def test_the_loop_flushes_and_compacts_at_the_ratio_points(tmp_path):
    provider = ScriptedProvider(default=LoopModel(lossy=True))
    runtime = make_runtime(tmp_path, provider, window=10_000, settings=RATIOS)
    session = Session.open(runtime, KEY)
    first_flush = first_compaction = None
    for i in range(40):
        text = f"Turn {i}. FACT-{i:03d} {filler(120, i)}"
        used = session.context_tokens([Message.user(text)])
        events = list(session.run_turn(text))
        if first_flush is None and any(isinstance(e, Flushed) for e in events):
            first_flush = used
        if first_compaction is None and any(isinstance(e, Compacted) for e in events):
            first_compaction = used
            break
        if first_flush is None:
            assert used < 5000
    assert first_flush is not None and 5000 <= first_flush < 6000
    assert first_compaction is not None and 6000 < first_compaction < 8000
    chat = Chat.open(runtime, KEY)
    out = next(e for e in chat.handle("/status") if isinstance(e, CommandOutput))
    assert "Compactions: 1 · memory flushes: 1 (last 2026-11-22T10:00:00+00:00)" in out.text


# --- the flush turn -----------------------------------------------------------------------------

def near_flush(tmp_path, provider, **settings):
    """A session one small turn away from the flush point (6000 of 8000)."""
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000, **settings}}
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    talk_until_flush(session, provider, say=lambda i: f"Turn {i}. FACT-{i:03d} {filler(200, i)}")
    return runtime, session


def test_flush_request_carries_the_flush_prompts_and_tools(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(
        tmp_path, provider, systemPrompt="Compaction soon: write things down.",
        prompt="Save notes to memory/YYYY-MM-DD.md or say NO_REPLY.")
    provider.add("NO_REPLY", "No facts to keep.", "Sure.")  # nothing noted: asked again
    before, token = len(provider.requests), CancelToken()
    events = list(session.run_turn(f"one more {filler(400)}", token=token))
    flush = provider.requests[before]
    # after the system prompt and the workspace files, which stay a cached prefix
    assert flush.system[-1].startswith("Compaction soon: write things down.\n")
    assert flush.system[:-1] == provider.requests[before - 1].system
    # the silent-reply rule and how to append are told in the flush turn only
    assert "NO_REPLY" in flush.system[-1] and "append: true" in flush.system[-1]
    assert flush.messages[-1].text == "Save notes to memory/2026-11-22.md or say NO_REPLY."
    assert {t.name for t in flush.tools} >= {"read", "write", "edit"}
    chat = provider.requests[before + 2]
    assert "Compaction soon" not in chat.system[0] and "NO_REPLY" not in chat.system[0]
    assert all("NO_REPLY" not in s for s in chat.system)
    assert events[-1].text == "Sure."
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[])]
    entries = transcript_lines(session)
    flushed = [e for e in entries if e.get("flush")]
    # the flush's prompt and both answers; asking again is sent once, never kept (as in a turn)
    assert [e["role"] for e in flushed] == ["user", "assistant", "assistant"]
    assert provider.requests[before + 1].messages[-1].text.startswith("Nothing has been saved")
    entry = session.store.get(KEY)
    assert entry["memoryFlushAt"] == "2026-11-22T10:00:00+00:00"
    assert entry["memoryFlushCompactionCount"] == 0 and entry["memoryFlushCount"] == 1
    provider.assert_done()


def test_no_flush_before_anything_was_said(tmp_path):
    """A first message that alone crosses the flush point: the flush would ask the model to
    save notes from an empty conversation."""
    comp = {"reserveTokensFloor": 1000, "memoryFlush": {"softThresholdTokens": 1000}}
    provider = ScriptedProvider(["Read it."])
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    paste = f"My budget is 2400 euros. Here is the log: {filler(5800)}"
    assert session.budget.flush_at <= session.context_tokens([Message.user(paste)]) \
        < session.budget.compact_at
    events = list(session.run_turn(paste))
    assert not [e for e in events if isinstance(e, Flushed)]
    assert [r.messages[-1].flush for r in provider.requests] == [False]
    provider.assert_done()


def test_a_conversation_of_questions_is_not_asked_again_for_notes(tmp_path):
    """Run 21: a new session asked one question, its search results crossed the flush
    point, and the flush's second request ("List every fact the user told you") got
    bullets made up from the search results, saved to the daily log."""
    comp = {"reserveTokensFloor": 1000, "keepRecentTokens": 2000,
            "memoryFlush": {"softThresholdTokens": 1000}}
    provider = ScriptedProvider()
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": comp})
    session = Session.open(runtime, KEY)
    talk_until_flush(session, provider, say=lambda i: f"What about day {i}? And {filler(200, i)}?",
                     answer="An answer.")
    provider.add("NO_REPLY", "Sure.")
    events = list(session.run_turn(f"And then what {filler(400)}?"))
    assert len([r for r in provider.requests if r.messages[-1].flush]) == 1  # not asked again
    assert [e for e in events if isinstance(e, Flushed)] == [Flushed(files=[])]
    assert events[-1].text == "Sure."
    assert runtime.files.stat("memory/2026-11-22.md") is None
    provider.assert_done()


def test_a_failed_flush_is_not_counted_and_is_tried_again(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider)
    provider.add(ProviderError("overloaded"))
    text = f"one more {filler(400)}"
    before = list(session.history.messages)
    events = list(session.run_turn(text))
    # the turn stops there: an outage is no reason to go on to the request (or compaction)
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == [
        "the memory flush stopped: overloaded"]
    assert events[-1].failed and events[-1].text == ""
    assert session.history.messages[:-1] == before and session.history.messages[-1].text == text
    assert session.store.get(KEY)["memoryFlushCompactionCount"] is None
    provider.add("NO_REPLY", "Nothing new.", "Second.")
    events = list(session.run_turn("and again"))
    assert any(isinstance(e, Flushed) for e in events) and events[-1].text == "Second."
    assert session.store.get(KEY)["memoryFlushCompactionCount"] == 0
    provider.assert_done()


def test_disabled_flush_never_runs(tmp_path):
    provider = ScriptedProvider()
    runtime, session = near_flush(tmp_path, provider, enabled=False)
    provider.add("Fine.")
    list(session.run_turn(f"one more {filler(400)}"))
    assert not any(is_flush(r) for r in provider.requests)
    provider.assert_done()


def test_written_files_mark_the_memory_index_dirty(tmp_path):
    class Index:
        dirty = 0

        def mark_dirty(self):
            self.dirty += 1

    provider = ScriptedProvider(default=LoopModel())
    runtime = make_runtime(tmp_path, provider, window=8000, settings={"compaction": {
        "reserveTokensFloor": 1000, "memoryFlush": {"softThresholdTokens": 1000}}})
    runtime.memory = Index()
    session = Session.open(runtime, KEY)
    flushed = []
    for i in range(40):
        flushed += [e for e in session.run_turn(f"FACT-{i:03d} {filler(150, i)}")
                    if isinstance(e, Flushed)]
        if flushed:
            break
    assert flushed == [Flushed(files=["memory/2026-11-22.md"])]
    assert runtime.memory.dirty == 1
    assert "FACT-000" in runtime.files.read("memory/2026-11-22.md")


@pytest.mark.parametrize("path, note", [
    ("memory/2026-11-22.md", True), ("./memory/2026-11-22.md", True), ("MEMORY.md", True),
    ("memory/../MEMORY.md", True), ("notes.md", False), (".memory/x.md", False),
    ("memory/../notes.md", False),
])
def test_a_note_is_a_write_to_memory_whatever_the_path_spelling(path, note):
    call = ToolCall(id="c1", name="write", arguments={"path": path, "content": "- x"})
    messages = [Message.user("hi"), Message.assistant("", [call]),
                Message.tool_result(call, "wrote 3 characters", False)]
    assert noted(messages) is note


def test_the_users_own_words_leave_out_questions(tmp_path):
    conversation = [Message.user("When does Ines arrive in Lisbon? She lands at 14:05."),
                    Message.assistant("Noted."),
                    Message.user("Is the Museu Nacional open on Mondays?")]
    said = unsaved_words(DiskFiles(tmp_path), conversation, date(2026, 11, 22))
    assert said == "- She lands at 14:05."


@pytest.mark.parametrize("note, kept", [
    ("- Porto", True),  # the name alone: what about Porto is lost (seen with a 1.5B model)
    ("- Moved to Porto in October", False),
    ("- Porto: moved there last month", False),
    ("- The user moves to Porto.", False),  # a word of the rest, in another form
])
def test_a_note_holds_a_fact_only_with_something_said_of_its_names(tmp_path, note, kept):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-11-22.md").write_text(f"# 2026-11-22\n\n{note}\n")
    conversation = [Message.user("Hi! I moved to Porto last month."), Message.assistant("Nice!")]
    said = unsaved_words(DiskFiles(tmp_path), conversation, date(2026, 11, 22))
    assert (said == "- I moved to Porto last month.") is kept, said


def test_the_users_own_words_leave_out_greetings_and_test_messages(tmp_path):
    conversation = [Message.user("Hello, **this** is a test of the `REPL`"),
                    Message.assistant("Hello!"),
                    Message.user("Thanks! The NAS is called tern and runs Debian 12."),
                    Message.user("This is a test server called WREN, on port 8443.")]
    assert unsaved_words(DiskFiles(tmp_path), conversation, date(2026, 11, 22)) == (
        "- The NAS is called tern and runs Debian 12.\n"
        "- This is a test server called WREN, on port 8443.")


@pytest.mark.parametrize("sentence, chatter", [
    ("Hello, **this** is a test of the `REPL`", True),
    ("Hi!", True), ("Thank you.", True), ("ok", True), ("testing one two three", True),
    ("hey, it's just a test message", True),
    ("Hi, my server is box7.", False), ("This is a test server called tern.", False),
    ("OK, the budget is 2400.", False), ("Testing the router on port 8443.", False),
    ("It is a testament to Python.", False), ("Thanks, Ines is my sister.", False),
])
def test_chatter_is_a_greeting_thanks_or_a_test_message(sentence, chatter):
    assert is_chatter(sentence) is chatter


def test_notes_written_are_the_memory_writes_only():
    note = ToolCall(id="c1", name="write", arguments={"path": "memory/2026-11-22.md",
                                                      "content": "- budget 2400"})
    other = ToolCall(id="c2", name="write", arguments={"path": "notes.txt", "content": "x"})
    failed = ToolCall(id="c3", name="edit", arguments={"path": "MEMORY.md", "newText": "y"})
    messages = [Message.user("hi"), Message.assistant("", [note, other, failed]),
                Message.tool_result(note, "ok"), Message.tool_result(other, "ok"),
                Message.tool_result(failed, "error: no match", True)]
    assert notes_written(messages) == ["- budget 2400"]


def test_the_silent_token_as_a_list_item_is_not_a_note():
    answer = ("- The dentist appointment moved to Tuesday 2 December at 9:30.\n- No_reply\n"
              "* NO_REPLY\n- no reply\n- No reply from the landlord yet about the boiler.")
    assert listed_notes(answer) == (
        "- The dentist appointment moved to Tuesday 2 December at 9:30.\n"
        "- No reply from the landlord yet about the boiler.")


def test_lines_a_note_holds_word_for_word_are_not_noted_again(tmp_path):
    files = DiskFiles(tmp_path)
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-11-10.md").write_text("# 2026-11-10\n\n1. Likes *green* tea.\n")
    (tmp_path / "memory" / "notes.txt").write_text("- Not a note file.\n")
    (tmp_path / "MEMORY.md").write_text("- Lives in Porto\n")
    kept = note_lines(files)
    answer = ("- likes green tea!\n- Lives in Porto.\n- Lives in Porto since May.\n"
              "- Not a note file.\n- ~~Lives in Lyon.~~ [replaced on 2026-11-20 by: Lives "
              "in Porto]\n# 2026-11-10")
    assert not_yet_noted(answer, kept) == "- Lives in Porto since May.\n- Not a note file."
    assert not_yet_noted(answer, set()) == "\n".join(
        line for line in answer.splitlines() if "~~" not in line)


def test_the_users_own_words_held_by_notes_in_other_words_are_not_saved_again(tmp_path):
    """The 1.5B model's second flush answer listed "- The user is Priya." and "- The user
    lives in Leeds."; the user's own sentences were saved beside them all the same."""
    conversation = [Message.user("Hi! I'm Priya. I live in Leeds and I work night shifts as "
                                 "a nurse."), Message.assistant("Hello!"),
                    Message.user("Our cat Miso is twelve.")]
    pending = ("- The user is Priya.\n- The user lives in Leeds.\n"
               "- The user works as a nurse on night shifts.")
    said = unsaved_words(DiskFiles(tmp_path), conversation, date(2026, 11, 22), pending)
    assert said == "- Our cat Miso is twelve."


def test_a_note_line_of_the_model_speaking_is_made_the_fact():
    answer = ("- I remember Sam is vegetarian.\n* i remember that we fly on 3 March\n"
              "1. Noted: hotel near Ribeira\n- Remember: the cellar tour is on Friday\n"
              "- I remembered the code wrong before; it is 5826.\nI remember you said so.")
    assert plain_notes(answer) == (
        "- Sam is vegetarian.\n* We fly on 3 March\n1. Hotel near Ribeira\n"
        "- Remember: the cellar tour is on Friday\n"
        "- I remembered the code wrong before; it is 5826.\nI remember you said so.")


def test_a_strong_models_json_and_repeated_answers_stream_from_the_first_word(tmp_path):
    """The holds for a JSON start, the recalled notes and the answer before are the weak
    profile's guards (``text_calls``, ``echo``): a strong model's reply streams whatever it
    starts with; a weak model's is held to the end."""
    from clawd.core.events import TextDelta
    from clawd.loop.runtime import fixed_models
    from clawd.loop.session import Session
    from clawd.providers.scripted import ScriptedProvider

    from conftest import make_runtime

    answer = '```json\n{"city": "Lisbon", "population": 545000}\n```'
    for profile, streamed in (("strong", True), ("weak", False)):
        provider = ScriptedProvider(["Sure, here it is.", "Sure, here it is.", answer],
                                    chunk_size=4)
        runtime = make_runtime(tmp_path / profile, provider)
        runtime.models = fixed_models(provider, 200_000, profile=profile)
        session = Session.open(runtime, "agent:main:main")
        list(session.run_turn("hello"))
        for text in ("again please", "the city as JSON"):
            deltas = [e.text for e in session.run_turn(text) if isinstance(e, TextDelta)]
            assert (len(deltas) > 3) is streamed, (profile, text, deltas)
            if streamed:
                assert len(deltas[0]) <= 4  # the first chunk, as it came


def test_a_stop_during_the_flush_of_a_turn_stops_the_turn(tmp_path):
    """The flush that runs inside a user's turn holds that turn's token: a stop while it
    streams ends the flush and the turn, with no request after it, and what the user typed
    is kept."""
    class StopInFlush(ScriptedProvider):
        stopped = False

        def stream(self, request):
            if is_flush(request) and not self.stopped:
                self.stopped = True
                token.cancel()  # as a stop over HTTP would, while the flush streams
            return super().stream(request)

    provider = StopInFlush()
    runtime, session = near_flush(tmp_path, provider)
    provider.add("- FACT-001 noted", "never asked")
    before, token = len(provider.requests), CancelToken()
    events = list(session.run_turn(f"one more {filler(400)}", token=token))
    assert events[-1].interrupted and len(provider.requests) == before + 1
    assert session.history.messages[-1].text.startswith("one more")
    provider.add("NO_REPLY", "Fine.")  # the flush is due still, then the answer
    assert list(session.run_turn("hello"))[-1].text == "Fine."  # the next turn runs


@pytest.mark.parametrize("said, asked", [
    # a fact told, or asked to be kept, that no note holds: a bare NO_REPLY is asked again
    ("Please remember that too: the landlord is called Mr. Duarte.", True),
    ("I moved to Lisbon last month.", True),
    ("I decided we'll fly on May 2. Suggest what to pack for a week.", True),
    # questions and requests for work hold nothing of the user's to keep (a 1.5B model's
    # NO_REPLY to these was asked again 10 times of 16: scripts/bench_guards.py)
    ("Write a short poem about the hills of Lisbon.", False),
    ("Count from 1 to 40, one number per line.", False),
    ("Give me a JSON object with fields city and budget for my Lisbon move.", False),
    ("What is the capital of Portugal?", False),
])
def test_a_silent_flush_is_asked_again_only_for_a_fact_it_did_not_keep(said, asked):
    from clawd.context.flush import should_ask_again

    conversation = [Message.user(said), Message.assistant("Sure.")]
    assert should_ask_again("NO_REPLY", False, conversation) is asked
    assert not should_ask_again("NO_REPLY", True, conversation)  # it wrote: nothing to ask
