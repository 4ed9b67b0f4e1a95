"""Group and channel sessions are private-safe, however their key is spelt."""

from __future__ import annotations

import json

import pytest

from clawd.config import Config, parse_config
from clawd.context.access import Access
from clawd.core.errors import ConfigError, ToolError
from clawd.frontends import cli, compose
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.sessions.store import is_group_key, main_key
from clawd.storage.files.sessions import SessionStore
from clawd.tools.files import file_tools
from clawd.tools.memory import memory_tools

from conftest import make_runtime

GROUP = "agent:main:telegram:Group:42"


def seed(ws):
    (ws / "AGENTS.md").write_text("be kind")
    (ws / "MEMORY.md").write_text("SECRET-MEMORY the user's bank PIN")
    (ws / "memory" / "2026-11-22.md").write_text("SECRET-TODAY doctor at 3")
    (ws / "memory" / "2026-11-21.md").write_text("SECRET-YESTERDAY salary talk")
    (ws / "memory" / "shared").mkdir()
    (ws / "memory" / "shared" / "team.md").write_text("SHARED-NOTE standup at 9")


def sent(provider) -> str:
    request = provider.requests[-1]
    return json.dumps([request.system, [m.text for m in request.messages]])


@pytest.mark.parametrize("key", ["agent:main:telegram:Group:42", "AGENT:MAIN:TELEGRAM:GROUP:42",
                                 "agent:main:discord:Channel:7", "Agent:Main:slack:CHANNEL:x"])
def test_group_keys_in_any_case_get_no_private_memory(tmp_path, key):
    provider = ScriptedProvider(["hi"])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + memory_tools())
    seed(rt.workspace)
    session = Session.open(rt, key)
    list(session.run_turn("hello"))
    text = sent(provider)
    assert "be kind" in text
    assert "SECRET" not in text
    names = [t.name for t in provider.requests[-1].tools]
    assert "memory_search" not in names and "memory_get" not in names
    assert is_group_key(key)


def test_private_session_still_gets_memory_and_daily_logs(tmp_path):
    provider = ScriptedProvider(["hi"])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + memory_tools())
    seed(rt.workspace)
    list(Session.open(rt, "agent:main:main").run_turn("hello"))
    text = sent(provider)
    assert "SECRET-MEMORY" in text and "SECRET-TODAY" in text and "SECRET-YESTERDAY" in text
    assert "memory_get" in [t.name for t in provider.requests[-1].tools]


def test_keys_are_normalised_where_made_and_read(tmp_path):
    assert main_key("main", "Work") == "agent:main:work"
    assert main_key("main", " Agent:Main:Telegram:Group:42 ") == "agent:main:telegram:group:42"
    store = SessionStore(tmp_path / "sessions.json")
    store.update("agent:main:Telegram:Group:42", lambda old: {"sessionId": "s1",
                                                              "sessionFile": "f"})
    assert store.get("AGENT:main:telegram:group:42")["sessionId"] == "s1"
    assert list(store.entries()) == ["agent:main:telegram:group:42"]


def test_a_store_written_with_mixed_case_keys_keeps_working(tmp_path):
    provider = ScriptedProvider(["hi", "again"])
    rt = make_runtime(tmp_path, provider)
    first = Session.open(rt, "agent:main:work")
    list(first.run_turn("hello"))
    path = rt.storage.sessions_dir / "sessions.json"
    data = json.loads(path.read_text())
    # as an older clawd wrote it: the key as typed, plus a stale duplicate spelling
    old = data.pop("agent:main:work")
    stale = {**old, "sessionId": "stale", "updatedAt": "2000-01-01T00:00:00+00:00"}
    path.write_text(json.dumps({"agent:main:Work": old, "AGENT:MAIN:WORK": stale}))
    again = Session.open(rt, "agent:main:WORK")
    assert again.entry["sessionId"] == first.entry["sessionId"]
    assert [m.text for m in again.history.messages] == ["hello", "hi"]
    list(again.run_turn("more"))
    assert list(json.loads(path.read_text())) == ["agent:main:work"]


def shared_runtime(tmp_path, provider, memory=None):
    """A workspace with private and shareable notes. Its model is under the strong
    profile: what is kept apart here holds whatever a model's guards would refuse (a weak
    model's note of what nobody said is refused before any access rule is asked)."""
    rt = make_runtime(tmp_path, provider, tools=file_tools() + memory_tools(),
                      settings={"memorySearch": {"shareablePaths": ["memory/shared/"]}})
    rt.models = fixed_models(provider, 200_000, profile="strong")
    rt.memory = memory
    seed(rt.workspace)
    return rt


def test_group_memory_tools_reach_only_shareable_paths(tmp_path):
    provider = ScriptedProvider([
        Reply(tool_calls=[tool("memory_get", path="MEMORY.md")]),
        Reply(tool_calls=[tool("memory_get", path="memory/2026-11-22.md")]),
        Reply(tool_calls=[tool("read", path="MEMORY.md")]),
        Reply(tool_calls=[tool("read", path="./memory/../MEMORY.md")]),
        Reply(tool_calls=[tool("edit", path="MEMORY.md", oldText="PIN", newText="x")]),
        Reply(tool_calls=[tool("memory_get", path="memory/shared/team.md")]),
        Reply(tool_calls=[tool("read", path="AGENTS.md")]),
        "done"])
    rt = shared_runtime(tmp_path, provider)
    session = Session.open(rt, GROUP)
    list(session.run_turn("tell me everything"))
    results = [m for m in session.history.messages if m.role == "toolResult"]
    texts = [m.text for m in results]
    assert all("private memory" in t for t in texts[:5]), texts
    assert "SHARED-NOTE" in texts[5] and texts[6] == "be kind"
    assert "SECRET" not in sent(provider)
    assert "PIN" in (rt.workspace / "MEMORY.md").read_text()


class FakeIndex:
    """A memory index whose search returns fixed hits (the tool filters them)."""

    def __init__(self):
        from clawd.config import MemorySearch
        self.settings = MemorySearch()
        self.asked: list[int] = []

    def search(self, query, max_results=None, min_score=None):
        self.asked.append(max_results)
        hits = [("MEMORY.md", "memory"), ("memory/2026-11-22.md", "memory"),
                ("memory/shared/team.md", "memory"), ("memory/shared-not/x.md", "memory"),
                ("memory/shared/s.jsonl", "sessions"), ("/abs/extra/x.md", "memory")]
        return {"results": [{"path": p, "startLine": 1, "endLine": 1, "score": 0.9,
                             "snippet": p, "source": s} for p, s in hits],
                "provider": None, "model": None, "fallback": None}


def test_group_memory_search_keeps_shareable_hits_only(tmp_path):
    index = FakeIndex()
    provider = ScriptedProvider([Reply(tool_calls=[tool("memory_search", query="standup")]),
                                 "ok"])
    rt = shared_runtime(tmp_path, provider, index)
    session = Session.open(rt, GROUP)
    list(session.run_turn("when is standup?"))
    result = json.loads(next(m for m in session.history.messages if m.role == "toolResult").text)
    assert [r["path"] for r in result["results"]] == ["memory/shared/team.md"]
    assert index.asked[0] >= 50  # it looked deeper than the usual 6
    private = Session.open(rt, "agent:main:main")
    provider.add(Reply(tool_calls=[tool("memory_search", query="x")]), "ok")
    list(private.run_turn("search"))
    result = json.loads([m for m in private.history.messages if m.role == "toolResult"][-1].text)
    assert len(result["results"]) == 6


def test_group_flush_never_writes_into_a_shareable_path(tmp_path):
    access = Access("rw", group=True, shareable=("memory/shared",))
    with pytest.raises(ToolError, match="shareable"):
        access.check_flush_write("memory/shared/team.md")
    access.check_flush_write("memory/2026-11-22.md")  # the private daily log is fine
    Access("rw").check_flush_write("memory/shared/team.md")  # private sessions: no rule

    provider = ScriptedProvider([
        Reply(tool_calls=[tool("write", path="memory/shared/team.md", content="leak")]),
        Reply(tool_calls=[tool("write", path="memory/2026-11-22.md", content="group fact",
                               append=True)]),
        "NO_REPLY"])
    rt = shared_runtime(tmp_path, provider)
    session = Session.open(rt, GROUP)
    events = list(session.flush())
    shared = rt.workspace / "memory" / "shared" / "team.md"
    assert shared.read_text() == "SHARED-NOTE standup at 9"
    assert "group fact" in (rt.workspace / "memory" / "2026-11-22.md").read_text()
    assert events


def test_group_sessions_cannot_read_earlier_versions_of_private_memory(tmp_path):
    provider = ScriptedProvider([
        Reply(tool_calls=[tool("write", path="MEMORY.md", content="short")]),  # private
        "ok"])
    rt = shared_runtime(tmp_path, provider)
    list(Session.open(rt, "agent:main:main").run_turn("rewrite memory"))
    kept = [p.relative_to(rt.workspace).as_posix()
            for p in (rt.workspace / ".clawd").rglob("*") if p.is_file()
            and "MEMORY.md" in p.as_posix()]
    assert kept, "the private write kept the earlier MEMORY.md"
    provider.add(*[Reply(tool_calls=[tool("read", path=path)]) for path in
                   [kept[0], ".clawd/history/MEMORY.md", ".clawd"]], "done")
    session = Session.open(rt, GROUP)
    list(session.run_turn("show me old versions"))
    texts = [m.text for m in session.history.messages if m.role == "toolResult"]
    assert len(texts) == 3 and all("private memory" in t for t in texts), texts
    assert "SECRET" not in sent(provider)


def test_group_sessions_add_to_private_memory_but_never_replace_it(tmp_path):
    today = "memory/2026-11-22.md"
    provider = ScriptedProvider([
        Reply(tool_calls=[tool("write", path="MEMORY.md", content="wiped")]),
        # the exact content plus a line: refused all the same, so it cannot confirm a guess
        Reply(tool_calls=[tool("write", path=today, content="SECRET-TODAY doctor at 3\nx\n")]),
        Reply(tool_calls=[tool("write", path="memory/new.md", content="a new note")]),
        Reply(tool_calls=[tool("write", path=today, content="group fact", append=True)]),
        "done"])
    rt = shared_runtime(tmp_path, provider)
    session = Session.open(rt, GROUP)
    list(session.run_turn("remember things: SECRET-TODAY doctor at 3"))
    texts = [m.text for m in session.history.messages if m.role == "toolResult"]
    assert all("add to it (write with append: true) but not replace it" in t
               for t in texts[:3]), texts
    assert texts[3].startswith("appended")
    assert (rt.workspace / "MEMORY.md").read_text() == "SECRET-MEMORY the user's bank PIN"
    assert (rt.workspace / today).read_text() == "SECRET-TODAY doctor at 3\n- group fact\n"
    assert not (rt.workspace / "memory" / "new.md").exists()
    Access("rw").check_replace("MEMORY.md")  # private sessions: no rule


def test_shareable_paths_are_validated(tmp_path):
    ok = parse_config('{agents: {defaults: {memorySearch: {shareablePaths: '
                      '["./memory/shared/", "notes\\\\team.md"]}}}}')
    assert ok.agents.defaults.memory_search.shareable_paths == ["memory/shared", "notes/team.md"]
    for bad in ['"/etc"', '"../x"', '"memory/../../x"', '"~/x"', '""', '"C:/x"']:
        with pytest.raises(ConfigError, match="shareablePaths"):
            parse_config('{agents: {defaults: {memorySearch: {shareablePaths: [' + bad + ']}}}}')


def test_a_full_session_key_names_its_agent():
    config = parse_config('{agents: {list: [{id: "main", default: true}, {id: "Work"}]}}')
    assert compose.chat_agent(config, None, "agent:work:main") == "Work"
    assert compose.chat_agent(config, None, "AGENT:WORK:telegram:group:1") == "Work"
    assert compose.chat_agent(config, "work", "agent:work:main") == "Work"
    assert compose.chat_agent(config, "main", "work") == "main"
    assert compose.chat_agent(config, None, None) is None
    assert compose.chat_agent(config, None, "agent:nonexist:main") == "nonexist"  # resolve fails
    with pytest.raises(ConfigError, match="different agents"):
        compose.chat_agent(config, "main", "agent:work:main")
    with pytest.raises(ConfigError, match="agent:<agentId>:<name>"):
        compose.chat_agent(Config(), None, "agent:main")


def test_chat_with_a_full_key_runs_in_that_agents_store(tmp_path, isolated_home, capsys):
    from fakeserver import FakeServer, openai_stream

    with FakeServer() as server:
        state = isolated_home / ".clawd"
        state.mkdir()
        (state / "clawd.json").write_text(json.dumps({
            "agents": {"defaults": {"model": "local/m", "memorySearch": {"enabled": False}},
                       "list": [{"id": "main", "default": True,
                                 "workspace": str(tmp_path / "ws-main")},
                                {"id": "work", "workspace": str(tmp_path / "ws-work")}]},
            "models": {"providers": {"local": {"api": "openai-completions",
                                               "baseUrl": server.url + "/v1",
                                               "maxRetries": 0}}}}))
        (tmp_path / "ws-work").mkdir()
        (tmp_path / "ws-work" / "AGENTS.md").write_text("WORK-AGENT rules")
        server.queue("POST", "/v1/chat/completions", lambda r: openai_stream("hello"))
        assert cli.main(["chat", "--session", "agent:Work:main", "-m", "hi"]) == 0
        assert "WORK-AGENT" in json.dumps(server.requests[0].json())
        work = SessionStore(state / "agents" / "work" / "sessions" / "sessions.json")
        assert list(work.entries()) == ["agent:work:main"]
        assert not (state / "agents" / "main" / "sessions" / "sessions.json").exists()
        capsys.readouterr()
        assert cli.main(["chat", "--session", "agent:nonexist:main", "-m", "hi"]) == 2
        err = capsys.readouterr().err
        assert err.strip().count("\n") == 0 and "unknown agent 'nonexist'" in err


def test_group_flush_notes_by_reply_never_land_in_a_shared_daily_log(tmp_path):
    provider = ScriptedProvider(["the group decided to meet on friday"])
    rt = make_runtime(tmp_path, provider, settings={"memorySearch": {"shareablePaths": ["memory"]}})
    rt.models = fixed_models(provider, 200_000, profile="strong")
    session = Session.open(rt, GROUP)
    events = list(session.flush())
    assert not list((rt.workspace / "memory").iterdir())
    assert any("not saved" in getattr(e, "text", "") for e in events)


def test_a_group_session_is_not_saved_into_a_shared_memory_folder(tmp_path):
    from clawd.core.events import Notice
    from clawd.frontends.commands import Chat

    provider = ScriptedProvider(default="fine")
    rt = make_runtime(tmp_path, provider, settings={"memorySearch": {"shareablePaths": ["memory"]}})
    chat = Chat.open(rt, GROUP)
    list(chat.handle("the group plans a trip"))
    events = list(chat.handle("/new"))
    assert any(isinstance(e, Notice) and "shareable" in e.text for e in events)
    assert not list((rt.workspace / "memory").iterdir())
    private = Chat.open(rt, "agent:main:main")
    list(private.handle("my own plans"))
    list(private.handle("/new"))
    assert (rt.workspace / "memory" / "2026-11-22-fine.md").exists()  # private: saved


def test_extra_paths_in_the_workspace_are_private_memory_too(tmp_path):
    provider = ScriptedProvider([Reply(tool_calls=[tool("read", path="notes/diary.md")]), "ok",
                                 Reply(tool_calls=[tool("read", path="notes/diary.md")]), "ok"])
    rt = make_runtime(tmp_path, provider, settings={"memorySearch": {"extraPaths": ["notes"]}})
    (rt.workspace / "notes").mkdir()
    (rt.workspace / "notes" / "diary.md").write_text("SECRET-DIARY")
    group = Session.open(rt, GROUP)
    list(group.run_turn("read the diary"))
    result = next(m for m in group.history.messages if m.role == "toolResult")
    assert result.is_error and "SECRET" not in result.text
    private = Session.open(rt, "agent:main:main")
    list(private.run_turn("read the diary"))
    assert "SECRET-DIARY" in next(m for m in private.history.messages
                                  if m.role == "toolResult").text
