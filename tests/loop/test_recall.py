"""Automatic recall: notes memory search finds for the user's message go in front of it."""

from __future__ import annotations

import io
import json
import logging

import pytest

from clawd.config import MemorySearch
from clawd.core.events import Recalled, ToolFinished
from clawd.frontends.render import Renderer, event_json
from clawd.guards.profile import PROFILES
from clawd.loop.recall import choose, recall, unseen
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.memory import open_index
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.memory import memory_tools

from conftest import make_runtime, transcript_lines
from memory_fakes import FakeEmbedder

KEY = "agent:main:main"
NOTE = "- Budget for the Lisbon trip: 2400 euros, flights included\n"
pytestmark = pytest.mark.usefixtures("both_storages")


def index_of(runtime, tmp_path, search: dict, **kw):
    """The memory index over the runtime's storage, as the composition root opens it: the
    folders, or the notes and transcripts a database keeps."""
    storage = runtime.storage
    return open_index("main", runtime.workspace, MemorySearch.model_validate(search),
                      tmp_path / "state", sources=storage.memory_sources, files=storage.files,
                      open_store=storage.memory_index, **kw)


def recall_runtime(tmp_path, provider, clock, *, embedder=None, search=None, profile="weak",
                   old_log=True):
    runtime = make_runtime(tmp_path, provider, clock=clock,
                           settings={"memorySearch": search or {}})
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    runtime.tools = runtime.tools + memory_tools()
    runtime.memory = index_of(runtime, tmp_path, search or {},
                              embedder=embedder or FakeEmbedder())
    if old_log:  # an old daily log: out of the project context (today's and yesterday's)
        runtime.files.write("memory/2026-11-02.md",
                            "# 2026-11-02\n\n- Ines is my sister; she lives in Porto\n" + NOTE)
    return runtime


def user_texts(request):
    return [m.text for m in request.messages if m.role == "user"]


def test_notes_found_for_the_message_are_sent_with_it_and_never_stored(tmp_path, clock):
    provider = ScriptedProvider(["About 2400 euros.", "Sure."])
    runtime = recall_runtime(tmp_path, provider, clock)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("What is the budget for the Lisbon trip?"))
    recalled = [e for e in events if isinstance(e, Recalled)]
    assert recalled and recalled[0].places[0][:3] == ("memory/2026-11-02.md", 1, 4)
    sent = user_texts(provider.requests[0])[-1]
    assert "2400 euros" in sent and "From memory/2026-11-02.md#L1-L4 (lines 1-4):" in sent
    assert sent.endswith("What is the budget for the Lisbon trip?")  # the message comes last
    # the transcript keeps what the user wrote, nothing more
    stored = [e for e in transcript_lines(session) if e.get("role") == "user"]
    assert [e["content"][0]["text"] for e in stored] == ["What is the budget for the Lisbon trip?"]
    # the next turn sends the earlier message as it was: the prompt cache keeps the prefix
    list(session.run_turn("Thanks, see you tomorrow"))
    assert user_texts(provider.requests[1])[0] == "What is the budget for the Lisbon trip?"
    assert "2400" not in user_texts(provider.requests[1])[-1]
    [line] = event_json(recalled[0])
    assert line["type"] == "recall" and line["results"][0]["path"] == "memory/2026-11-02.md"
    shown = io.StringIO()
    Renderer(shown, color=False).event(recalled[0])
    assert shown.getvalue() == "· recalled: memory/2026-11-02.md:1-4\n"
    runtime.memory.close()


def test_a_line_consolidation_replaced_is_sent_with_its_replacement(tmp_path, clock):
    provider = ScriptedProvider(["3100 euros."])
    runtime = recall_runtime(tmp_path, provider, clock)
    runtime.files.write(
        "MEMORY.md",
        "# MEMORY.md\n\n## Facts and references\n\n- Lisbon trip budget raised to 3100 euros "
        "(memory/2026-11-09.md#L3)\n\n## Replaced\n\n- Lisbon trip budget: 2400 euros "
        "(memory/2026-11-02.md#L4) — replaced on 2026-11-09 by: Lisbon trip budget raised to "
        "3100 euros\n")
    list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    sent = user_texts(provider.requests[0])[-1]
    assert ("- ~~Budget for the Lisbon trip: 2400 euros, flights included~~ [replaced on "
            "2026-11-09 by: Lisbon trip budget raised to 3100 euros]") in sent
    runtime.memory.close()


def test_every_step_of_the_turn_keeps_the_notes(tmp_path, clock):
    provider = ScriptedProvider([Reply("", [tool("read", path="USER.md")]), "2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock)
    runtime.files.write("USER.md", "# User\n")
    list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    assert len(provider.requests) == 2
    assert all("2400 euros" in user_texts(r)[-1] for r in provider.requests)
    runtime.memory.close()


def test_notes_already_in_view_are_not_repeated(tmp_path, clock):
    provider = ScriptedProvider(["2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock, old_log=False)
    runtime.files.write("memory/2026-11-22.md", "# 2026-11-22\n\n" + NOTE)
    events = list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    assert not [e for e in events if isinstance(e, Recalled)]
    request = provider.requests[0]
    assert user_texts(request)[-1] == "What is the budget for the Lisbon trip?"
    assert "2400 euros" in "".join(request.system)  # today's log is in the project context
    runtime.memory.close()


def test_memory_md_lines_are_sent_even_though_the_context_holds_them():
    """Measured with scripts/bench_memory_weeks.py: with MEMORY.md holding the newest values
    (consolidation) and its lines left out as already in view, the block held only the
    older notes around them, and a 1.5B model answered the old value from it."""
    shown = "## MEMORY.md\n- The build server was renamed from osprey to condor\n"
    results = [
        {"path": "MEMORY.md", "startLine": 5, "endLine": 5, "score": 0.8,
         "snippet": "- The build server was renamed from osprey to condor"},
        {"path": "memory/2026-03-03.md", "startLine": 3, "endLine": 4, "score": 0.78,
         "snippet": "- The build server was renamed from osprey to condor\n"
                    "- osprey ran out of disk space overnight"}]
    hits = choose(results, shown, 1000)
    assert [(h.path, h.text) for h in hits] == [
        ("MEMORY.md", "- The build server was renamed from osprey to condor"),
        ("memory/2026-03-03.md", "- osprey ran out of disk space overnight")]


def test_nothing_is_sent_for_an_unrelated_message_or_with_recall_off(tmp_path, clock):
    provider = ScriptedProvider(["Hello!", "2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock,
                             search={"recall": {"enabled": True}})
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("good morning"))
    assert not [e for e in events if isinstance(e, Recalled)]
    assert user_texts(provider.requests[0])[-1] == "good morning"
    runtime.memory.close()
    provider = ScriptedProvider(["2400 euros."])
    runtime = recall_runtime(tmp_path / "off", provider, clock,
                             search={"recall": {"enabled": False}})
    events = list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    assert not [e for e in events if isinstance(e, Recalled)]
    assert user_texts(provider.requests[0])[-1] == "What is the budget for the Lisbon trip?"
    runtime.memory.close()


def test_the_flush_request_does_not_carry_the_notes(tmp_path, clock):
    provider = ScriptedProvider(["About 2400 euros.", "NO_REPLY"])
    runtime = recall_runtime(tmp_path, provider, clock)
    session = Session.open(runtime, KEY)
    list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert "2400 euros" in user_texts(provider.requests[0])[-1]
    # a flush while the notes are out (as on a mid-turn flush): the conversation as it is
    session.recall = recall(runtime.memory, session.access, runtime.settings.memory_search,
                            session.history.messages[0], "", 200_000)
    assert session.recall is not None
    list(session.flush())
    assert all("2400" not in text for text in user_texts(provider.requests[1]))
    runtime.memory.close()


def test_group_sessions_recall_shareable_notes_only(tmp_path, clock):
    provider = ScriptedProvider(["ok", "ok"])
    runtime = recall_runtime(tmp_path, provider, clock,
                             search={"shareablePaths": ["memory/shared"]})
    runtime.files.write("memory/shared/office.md",
                        "- The Lisbon office wifi password is on the fridge\n")
    events = list(Session.open(runtime, "agent:main:discord:group:42").run_turn(
        "What is the budget for the Lisbon trip and the Lisbon office wifi?"))
    places = [p for e in events if isinstance(e, Recalled) for p in e.places]
    assert [p[0] for p in places] == ["memory/shared/office.md"]
    assert "2400" not in user_texts(provider.requests[0])[-1]
    runtime.memory.close()


def test_a_failed_search_leaves_the_turn_as_it_was(tmp_path, clock, caplog):
    provider = ScriptedProvider(["Hello."])
    runtime = recall_runtime(tmp_path, provider, clock)

    def broken(*args, **kwargs):
        raise RuntimeError("disk I/O error")

    runtime.memory.search = broken
    with caplog.at_level(logging.WARNING):
        session = Session.open(runtime, KEY)
        events = list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert events[-1].text == "Hello." and not events[-1].failed
    assert "automatic recall skipped: memory search failed: disk I/O error" in caplog.text
    runtime.memory.close()


def test_a_note_written_just_before_is_found(tmp_path, clock):
    provider = ScriptedProvider(["Noted.", "2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock)
    runtime.files.write("memory/2026-11-02.md", "# 2026-11-02\n")
    session = Session.open(runtime, KEY)
    list(session.run_turn("hello"))  # the index is synced once in this process
    runtime.files.write("memory/2026-11-02.md", "# 2026-11-02\n\n" + NOTE)
    runtime.memory.mark_dirty()  # as a write by a tool or the watcher would
    list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert "2400 euros" in user_texts(provider.requests[1])[-1]
    runtime.memory.close()


def test_the_notes_stay_within_their_share_of_the_window(tmp_path, clock):
    results = [{"path": f"memory/n{i}.md", "startLine": 1, "endLine": 3, "score": 0.9 - i / 10,
                "snippet": f"note {i} " + "x" * 700} for i in range(3)]
    hits = choose(results, shown="", max_chars=1000)
    assert [h.path for h in hits] == ["memory/n0.md", "memory/n1.md"]
    assert sum(len(h.text) for h in hits) <= 1000 and hits[1].text.endswith("…")
    # a hit far below the best one is noise beside it
    near = [{"path": "memory/a.md", "startLine": 1, "endLine": 1, "score": 0.95, "snippet": "- a"},
            {"path": "memory/b.md", "startLine": 1, "endLine": 1, "score": 0.85, "snippet": "- b"},
            {"path": "memory/c.md", "startLine": 1, "endLine": 1, "score": 0.7, "snippet": "- c"}]
    assert [h.path for h in choose(near, "", 1000)] == ["memory/a.md", "memory/b.md"]
    # the strong profile sets no margin: the search's ranking stands
    strong = PROFILES["strong"].thresholds
    assert [h.path for h in choose(near, "", 1000, strong)] == ["memory/a.md", "memory/b.md",
                                                                "memory/c.md"]
    assert unseen("- a\n\n- b\n", "x\n- a\n- b\n") == ""
    assert unseen("## People\n- a\n- c", "- a\n- b") == "## People\n- c"
    # a template's headings and placeholders are no notes
    assert unseen("## People\n\n- (name — who they are)\n", "") == ""
    assert unseen("", "anything") == ""
    assert unseen("- a\n- b c…", "- a\n- b c d\n") == ""  # a snippet cut mid-line
    # an 8k window: about 1,600 characters, whatever maxChars says
    provider = ScriptedProvider(["ok"])
    runtime = recall_runtime(tmp_path, provider, clock, search={"recall": {"maxChars": 50000}})
    runtime.models = lambda ref: runtime_model(ref, provider)
    for i in range(8):
        runtime.files.write(f"memory/2026-10-0{i + 1}.md",
                            f"- Lisbon trip budget detail {i}: " + "euros " * 150 + "\n")
    list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    sent = user_texts(provider.requests[0])[-1]
    assert "Lisbon trip budget detail" in sent and len(sent) < 8192 // 5 + 600
    runtime.memory.close()


def runtime_model(ref, provider):
    from clawd.loop.runtime import ModelHandle

    return ModelHandle(ref, 8192, None, False, lambda: provider)


def test_with_the_local_model_a_question_recalls_and_a_greeting_does_not(tmp_path, clock):
    provider = ScriptedProvider(["Hello!", "2400 euros.", "She lives in Porto."])
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.tools = runtime.tools + memory_tools()
    runtime.memory = index_of(runtime, tmp_path, {"provider": "local"})
    runtime.files.write(
        "memory/2026-11-02.md",
        "# 2026-11-02\n\n- Budget for the Lisbon trip: 2400 euros, flights included\n\n"
        "## People\n\n- Ines is my sister; she lives in Porto\n")
    runtime.memory.sync()  # indexed before the turns: a turn waits for a sync only 2 s,
    # which the local embedding model may take on a busy machine
    session = Session.open(runtime, KEY)
    for text in ("good morning", "what was my budget again?", "who is Ines?"):
        list(session.run_turn(text))
    sent = [user_texts(r)[-1] for r in provider.requests]
    assert sent[0] == "good morning"
    assert "2400 euros" in sent[1] and sent[1].endswith("what was my budget again?")
    assert "Porto" in sent[2]
    runtime.memory.close()


def test_ctrl_c_while_recalling_keeps_the_message(tmp_path, clock):
    provider = ScriptedProvider([])
    runtime = recall_runtime(tmp_path, provider, clock)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    runtime.memory.search = interrupted
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert events[-1].interrupted and not provider.requests
    assert [m.text for m in session.history.messages] == [
        "What is the budget for the Lisbon trip?"]
    runtime.memory.close()


def test_a_long_first_index_does_not_hold_the_turn_up(tmp_path, clock, monkeypatch):
    import threading

    import clawd.loop.recall

    class SlowEmbedder(FakeEmbedder):
        def __init__(self):
            super().__init__()
            self.release = threading.Event()

        def embed_documents(self, texts, progress=None):
            self.release.wait(30)  # a first index of years of notes
            return super().embed_documents(texts, progress)

    monkeypatch.setattr(clawd.loop.recall, "SYNC_WAIT", 0.2)
    embedder = SlowEmbedder()
    provider = ScriptedProvider(["I don't know yet.", "2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock, embedder=embedder)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert events[-1].text == "I don't know yet."  # answered while the index was being built
    assert not [e for e in events if isinstance(e, Recalled)]
    embedder.release.set()
    assert runtime.memory.wait_synced(30)
    list(session.run_turn("What is the budget for the Lisbon trip?"))
    assert "2400 euros" in user_texts(provider.requests[1])[-1]
    runtime.memory.close()


@pytest.mark.parametrize("cite", [False, True])
def test_citations_in_results_and_recall_and_the_setting_asks_replies_for_them(
        tmp_path, clock, cite):
    provider = ScriptedProvider([
        Reply("", [tool("memory_search", query="Lisbon trip budget")]),
        "About 2400 euros.\nSource: memory/2026-11-02.md#L1-L4"])
    # a model told of memory_search (under "weak", recall searches instead: recall_only)
    runtime = recall_runtime(tmp_path, provider, clock, search={"citations": cite},
                             profile="strong")
    session = Session.open(runtime, KEY)
    list(session.run_turn("What is the budget for the Lisbon trip?"))
    # the tool's results carry their citation whatever the setting
    result = json.loads(next(m for m in session.history.messages
                             if m.role == "toolResult").text)
    assert result["results"][0]["citation"] == "memory/2026-11-02.md#L1-L4"
    # the recall block names each note by its citation; the setting asks the reply for it
    sent = user_texts(provider.requests[0])[-1]
    assert "From memory/2026-11-02.md#L1-L4 (lines 1-4):" in sent
    asked = 'end it with a line "Source: "'
    assert (asked in sent) is cite
    assert ('e.g. "Source: memory/2026-11-02.md#L1-L4"' in sent) is cite
    system = provider.requests[0].system[0]
    assert ("`Source: memory/2026-11-02.md#L3-L4`" in system) is cite
    assert ("as memory_search gives them in `citation`" in system) is cite
    runtime.memory.close()


@pytest.mark.parametrize("profile, search, told", [
    ("weak", {}, False),  # recall searches for the message: the model is not told of the tool
    ("strong", {}, True),
    ("weak", {"recall": {"enabled": False}}, True),  # no recall: the model searches itself
])
def test_recall_only_withholds_memory_search_from_a_weak_model(tmp_path, clock, profile,
                                                               search, told):
    """Measured (docs/real-models-notes.md): a 1.5B model that searched and found nothing answered
    "no information" instead of the message; with recall searching for it, it answered."""
    provider = ScriptedProvider(["It is 2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock, search=search, profile=profile)
    session = Session.open(runtime, KEY)
    events = list(session.run_turn("What is the budget for the Lisbon trip?"))
    request = provider.requests[0]
    assert ("memory_search" in {t.name for t in request.tools}) is told
    assert ("- `memory_search`" in request.system[0]) is told
    assert "memory_get" in {t.name for t in request.tools}
    assert any(isinstance(e, Recalled) for e in events) is (search == {})
    # AGENTS.md may still say "run memory_search first": the prompt says recall ran it
    withheld = "`memory_search` is not available in this conversation" in request.system[0]
    assert withheld is (not told)
    runtime.memory.close()


def test_a_recalled_note_copied_into_todays_log_is_refused(tmp_path, clock):
    """Asked a question, the 1.5B model wrote the recalled note to today's log: an old fact
    dated anew (once one a correction had replaced)."""
    provider = ScriptedProvider([
        Reply("", [tool("write", path="memory/2026-11-22.md", content=NOTE, append=True)]),
        "About 2400 euros."])
    runtime = recall_runtime(tmp_path, provider, clock)
    events = list(Session.open(runtime, KEY).run_turn("What is the budget for the Lisbon trip?"))
    assert any(isinstance(e, Recalled) for e in events)
    [result] = [e for e in events if isinstance(e, ToolFinished)]
    assert result.is_error
    assert result.text.startswith("not written: memory/2026-11-02.md already holds these lines")
    assert runtime.files.stat("memory/2026-11-22.md") is None
    assert events[-1].text == "About 2400 euros."
    provider.assert_done()
    runtime.memory.close()


def test_when_the_best_hit_is_in_view_nothing_weaker_is_sent():
    """"What is my sister's name, and when is she visiting?": today's log, in view, had it
    at 0.88; the unrelated chunk sent alone made a 1.5B model say the notes held nothing."""
    shown = "## memory/2026-11-27.md\n- Sister Ines is visiting on 12 December for a week.\n"
    results = [
        {"path": "memory/2026-11-27.md", "startLine": 1, "endLine": 1, "score": 0.88,
         "snippet": "- Sister Ines is visiting on 12 December for a week."},
        {"path": "memory/2026-11-02.md", "startLine": 3, "endLine": 3, "score": 0.80,
         "snippet": "- Booked the ferry to Porto for the 12th."}]
    assert choose(results, shown, 1000) == []
    # a weaker hit is still sent beside a best one that is not in view
    results[0]["snippet"] += "\n- She brings her piano."
    assert [h.path for h in choose(results, shown, 1000)] == ["memory/2026-11-27.md",
                                                              "memory/2026-11-02.md"]


@pytest.mark.parametrize("message, wanted", [
    ("What is my cat called?", True),
    ("What is the capital of France?", True),  # a question: notes may answer it
    ("where do I live", True),
    ("Plan my week around the vet appointment.", True),  # the user's own things
    ("Remind me what the vet said.", True),
    ("My sister Ines lives in Porto and teaches piano.", False),  # told, not asked
    ("I decided to use PostgreSQL 16 for the tidepool project.", False),
    ("Write a long poem about the hills of Lisbon.", False),  # nobody's in particular
    ("Explain how a funicular works.", False),
    ("Please remember that my car's MOT is due on 9 January.", False),  # to keep, not asked
    ("thanks!", False),
])
def test_which_messages_recall_searches_for(message, wanted):
    from clawd.loop.recall import wants_recall

    assert wants_recall(message) is wanted


@pytest.mark.parametrize("profile, recalled", [("weak", False), ("strong", True)])
def test_a_statement_gets_no_notes_under_the_weak_profile(tmp_path, clock, profile, recalled):
    provider = ScriptedProvider(["Noted, Porto is lovely."])
    runtime = recall_runtime(tmp_path, provider, clock, profile=profile)
    events = list(Session.open(runtime, KEY).run_turn("My sister Ines moved to Porto in March."))
    assert bool([e for e in events if isinstance(e, Recalled)]) is recalled
    sent = user_texts(provider.requests[0])[-1]
    assert (sent == "My sister Ines moved to Porto in March.") is not recalled
    runtime.memory.close()


def test_what_was_recalled_is_kept_for_the_history_a_page_shows(tmp_path, clock):
    """The web page's "recalled" line was gone after a reload: the transcript kept no
    trace of it. A ``recall`` line now follows the message; the model never sees it."""
    from clawd.frontends.gateway.history import items

    provider = ScriptedProvider(["About 2400 euros.", "Sure."])
    runtime = recall_runtime(tmp_path, provider, clock)
    session = Session.open(runtime, KEY)
    list(session.run_turn("What is the budget for the Lisbon trip?"))
    shown = items(transcript_lines(session)[1:])
    assert [i["type"] for i in shown] == ["user", "recall", "assistant"]
    assert shown[1]["messageId"] == shown[0]["id"]
    assert shown[1]["results"][0]["path"] == "memory/2026-11-02.md"
    list(Session.open(runtime, KEY).run_turn("Thanks"))  # reopened: the history is as before
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "user"]
    runtime.memory.close()
