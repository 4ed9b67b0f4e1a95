"""Config loading: JSON5, defaults, unknown and mistyped keys, agent overrides, env vars."""

from __future__ import annotations

import pytest

from clawd.config import (DEFAULT_FLUSH_PROMPT, Config, config_path, load_config, parse_config,
                          parse_duration, resolve_agent, state_dir)
from clawd.errors import ConfigError


def test_missing_file_means_defaults(tmp_path):
    config = load_config(tmp_path / "nope.json")
    settings = resolve_agent(config)[1]
    assert settings.compaction.reserve_tokens_floor == 20000
    assert settings.compaction.memory_flush.soft_threshold_tokens == 4000
    assert settings.compaction.memory_flush.prompt == DEFAULT_FLUSH_PROMPT
    assert settings.compaction.keep_recent_tokens == 20000
    assert settings.bootstrap_max_chars == 20000
    assert settings.context_pruning.ttl == "5m"
    assert settings.context_pruning.soft_trim.head_chars == 1500
    assert settings.memory_search.query.max_results == 6
    assert settings.memory_search.query.min_score == 0.35
    assert settings.memory_search.chunking.tokens == 400
    assert config.hooks.session_memory.messages == 15
    assert config.session.reset.at_hour == 4


def test_json5_comments_and_trailing_commas(tmp_path):
    path = tmp_path / "clawd.json"
    path.write_text("""{
      // a comment
      agents: { defaults: { model: 'openai/gpt-4o', contextTokens: 64000, }, },
    }""")
    settings = resolve_agent(load_config(path))[1]
    assert settings.model == "openai/gpt-4o" and settings.context_tokens == 64000


@pytest.mark.parametrize("text, fragment", [
    ("{agents: {defaults: {compactoin: {}}}}", "unknown key 'agents.defaults.compactoin'"),
    ("{agents: {defaults: {compaction: {reserveTokensFloor: 'lots'}}}}",
     "agents.defaults.compaction.reserveTokensFloor"),
    ("{agents: {defaults: {contextPruning: {mode: 'sometimes'}}}}",
     "agents.defaults.contextPruning.mode"),
    ("{agents: {defaults: {contextPruning: {ttl: '5 parsecs'}}}}", "not a duration"),
    ("{models: {providers: {local: {api: 'grpc'}}}}", "models.providers.local.api"),
    ("{agents: {list: [{id: 'a', bogus: 1}]}}", "unknown key 'agents.list.0.bogus'"),
    ("{agents: {list: [{id: 'a'}, {id: 'a'}]}}", "the id 'a' twice"),
    ("{agents: {list: [{id: 'a', default: true}, {id: 'b', default: true}]}}",
     "more than one agent as default (a, b)"),
    ("{agents: {", "not valid JSON5"),
    ("[1, 2]", "top level must be an object"),
])
def test_bad_config_names_key_and_file(tmp_path, text, fragment):
    path = tmp_path / "my-clawd.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_hybrid_weights_are_normalised():
    config = parse_config("{agents: {defaults: {memorySearch: {query: {hybrid: "
                          "{vectorWeight: 3, textWeight: 1}}}}}}")
    hybrid = resolve_agent(config)[1].memory_search.query.hybrid
    assert hybrid.vector_weight == pytest.approx(0.75)
    assert hybrid.text_weight == pytest.approx(0.25)


def test_agent_overrides_merge_over_defaults():
    config = parse_config("""{agents: {
        defaults: {workspace: '/w', compaction: {reserveTokensFloor: 1000, keepRecentTokens: 9}},
        list: [{id: 'main', default: true}, {id: 'work', workspace: '/work',
                compaction: {keepRecentTokens: 5}}]}}""")
    assert config.default_agent_id() == "main"
    work = resolve_agent(config, "work")[1]
    assert work.workspace == "/work"
    assert work.compaction.keep_recent_tokens == 5
    assert work.compaction.reserve_tokens_floor == 1000  # inherited, not reset to default
    with pytest.raises(ConfigError, match="unknown agent 'other'"):
        resolve_agent(config, "other")


def test_agents_without_own_workspace_do_not_share_one():
    config = parse_config("{agents: {defaults: {workspace: '/w'}, "
                          "list: [{id: 'main'}, {id: 'side'}]}}")
    assert resolve_agent(config, "main")[1].workspace == "/w"
    assert resolve_agent(config, "side")[1].workspace == "/w-side"


def test_env_vars(monkeypatch, tmp_path):
    monkeypatch.setenv("CLAWD_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("CLAWD_CONFIG", raising=False)
    assert state_dir() == tmp_path / "state"
    assert config_path() == tmp_path / "state" / "clawd.json"
    monkeypatch.setenv("CLAWD_CONFIG", str(tmp_path / "other.json5"))
    assert config_path() == tmp_path / "other.json5"


@pytest.mark.parametrize("text, seconds", [("5m", 300), ("90s", 90), ("1h", 3600),
                                           ("250ms", 0.25), ("2", 120)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_empty_file_is_defaults(tmp_path):
    path = tmp_path / "clawd.json"
    path.write_text("  ")
    assert load_config(path).model_dump() == Config().model_dump()
