"""Where notes go for embedding: only to a remote service the config names, announced before
the first upload, at the configured endpoint; and how agents' extraPaths combine."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_memory_embeddings import openai_embeddings

from clawd.config import parse_config, resolve_agent
from clawd.frontends.compose import build_runtime
from clawd.storage.files.memory import open_file_index

from fakeserver import FakeServer
from memory_fakes import settings, write


@pytest.fixture
def server():
    with FakeServer() as srv:
        srv.default("POST", "/v1/embeddings", openai_embeddings)
        yield srv


def test_a_chat_key_in_the_environment_keeps_embeddings_local(tmp_path: Path, server,
                                                             monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-chat")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")  # where a leak would land
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Dana Whitfield is the accountant.\n")
    index = open_file_index("main", ws, settings(sync={"watch": False}), tmp_path / "state")
    index.sync()
    assert index.status()["provider"] == "local"
    assert index.search("accountant")["results"][0]["path"] == "MEMORY.md"
    assert server.requests == []
    index.close()


def test_the_first_upload_is_announced_before_it_happens(tmp_path: Path, server, caplog):
    said_before: list[bool] = []

    def embeddings(request):
        said_before.append(any("sending" in r.getMessage() for r in caplog.records))
        return openai_embeddings(request)

    server.default("POST", "/v1/embeddings", embeddings)
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Dana Whitfield is the accountant.\n")
    cfg = settings(provider="openai", sync={"watch": False},
                   remote={"baseUrl": f"{server.url}/v1", "apiKey": "sk-mem",
                           "batch": {"enabled": False}})
    index = open_file_index("main", ws, cfg, tmp_path / "state", env={})
    with caplog.at_level(logging.WARNING, logger="clawd.memory"):
        index.sync()
    notes = [r.getMessage() for r in caplog.records if "sending" in r.getMessage()]
    assert len(notes) == 1
    assert "openai text-embedding-3-small" in notes[0] and server.url in notes[0]
    assert said_before and all(said_before)
    caplog.clear()
    write(ws, "memory/more.md", "# More\n\n- Another line.\n")
    with caplog.at_level(logging.WARNING, logger="clawd.memory"):
        index.sync()  # same provider: nothing new to announce
    assert not [r for r in caplog.records if "sending" in r.getMessage()]
    index.close()


def runtime_for(tmp_path: Path, server, remote: str) -> object:
    config = parse_config(f"""{{
        models: {{providers: {{openai: {{baseUrl: '{server.url}/v1', apiKey: 'sk-chat'}}}}}},
        agents: {{defaults: {{workspace: '{tmp_path / "ws"}',
            memorySearch: {{provider: 'openai', sync: {{watch: false}},
                            remote: {{apiKey: 'sk-mem', batch: {{enabled: false}} {remote}}}}}}}}}
    }}""")
    return build_runtime(config, None)


def test_remote_embeddings_use_the_openai_provider_base_url(tmp_path: Path, server):
    write(tmp_path / "ws", "MEMORY.md", "# Memory\n\n- Dana Whitfield is the accountant.\n")
    runtime = runtime_for(tmp_path, server, "")
    runtime.memory.sync()
    assert [r.path for r in server.requests][:1] == ["/v1/embeddings"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-mem"
    runtime.memory.close()


def test_remote_base_url_wins_over_the_provider_one(tmp_path: Path, server):
    with FakeServer() as other:
        other.default("POST", "/v1/embeddings", openai_embeddings)
        write(tmp_path / "ws", "MEMORY.md", "# Memory\n\n- Dana is the accountant.\n")
        runtime = runtime_for(tmp_path, server, f", baseUrl: '{other.url}/v1'")
        runtime.memory.sync()
        assert server.requests == [] and other.requests
        runtime.memory.close()


def test_agent_extra_paths_add_to_the_defaults():
    config = parse_config("""{agents: {
        defaults: {memorySearch: {extraPaths: ['~/notes', '/shared/wiki']}},
        list: [{id: 'main', default: true},
               {id: 'work', memorySearch: {extraPaths: ['/work/docs', '/shared/wiki']}}]}}""")
    assert resolve_agent(config, "work")[1].memory_search.extra_paths == \
        ["~/notes", "/shared/wiki", "/work/docs"]
    assert resolve_agent(config, "main")[1].memory_search.extra_paths == \
        ["~/notes", "/shared/wiki"]
