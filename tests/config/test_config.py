"""Config loading: JSON5, defaults, unknown and mistyped keys, agent overrides, env vars."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from clawd.config import (
    DEFAULT_FLUSH_PROMPT,
    Config,
    Model,
    config_path,
    load_config,
    parse_config,
    parse_duration,
    resolve_agent,
    state_dir,
)
from clawd.core.errors import ConfigError


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
    ("{agents: {defaults: {compaction: {memoryFlush: {enabled: 'yes'}}}}}",
     "agents.defaults.compaction.memoryFlush.enabled': use true or false, not \"yes\""),
    ("{agents: {list: [{id: 'a', default: 1}]}}", "'agents.list.0.default': use true or false"),
    ("{models: {providers: {local: {models: [{id: 'm', contextWindow: '8k'}]}}}}",
     "models.providers.local.models.0.contextWindow"),
    ("{source: '/elsewhere'}", "unknown key 'source'"),
    ("{agents: {", "not valid JSON5: line 1, column 11: unexpected end of input"),
    ("{\n a: 1\n b: 2}", 'not valid JSON5: line 3, column 2: unexpected "b"'),
    ("{\n  agents: {defaults: {model: 'x/y'}}\n  models: {}\n}",
     'not valid JSON5: line 3, column 3: unexpected "m" (is a comma missing between it and '
     'the entry before?)'),
    ("{models: {providers: {p: {models: [{id: 'a'} // one\n {id: 'b'}]}}}}",
     'line 2, column 2: unexpected "{" (is a comma missing between it and the entry before?)'),
    ("{models: {providers: {local: {baseUrl: '127.0.0.1:18099/v1'}}}}",
     "bad value for 'models.providers.local.baseUrl': \"127.0.0.1:18099/v1\" is not an "
     "http:// or https:// URL (did you mean \"http://127.0.0.1:18099/v1\"?)"),
    ("{models: {providers: {local: {baseUrl: 'ftp://host/v1'}}}}", "is not an http://"),
    ("{models: {providers: {local: {baseUrl: 'http://'}}}}", "is not an http://"),
    ("{agents: {defaults: {memorySearch: {remote: {baseUrl: 'localhost:11434'}}}}}",
     "'agents.defaults.memorySearch.remote.baseUrl'"),
    ("[1, 2]", "top level must be an object"),
])
def test_bad_config_names_key_and_file(tmp_path, text, fragment):
    path = tmp_path / "my-clawd.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)



@pytest.mark.parametrize("text", ["{agents b: 1}", "{agents: 1\n b 2}", "{a: 1 : 2}",
                                  "{agents: {"])
def test_a_syntax_error_no_comma_fixes_has_no_comma_hint(text):
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert "not valid JSON5: line" in str(info.value) and "comma" not in str(info.value)

@pytest.mark.parametrize("text, key, guess", [
    ("{agents: {defaults: {modle: 'x'}}}", "agents.defaults.modle", "model"),
    ("{agents: {defaults: {maxtokens: 10}}}", "agents.defaults.maxtokens", "maxTokens"),
    ("{agnets: {}}", "agnets", "agents"),
    ("{agents: {list: [{id: 'a', workspce: '/w'}]}}", "agents.list.0.workspce", "workspace"),
    ("{models: {providers: {local: {baseurl: 'http://h'}}}}", "models.providers.local.baseurl",
     "baseUrl"),
    ("{models: {providers: {local: {models: [{id: 'm', contextWindw: 8192}]}}}}",
     "models.providers.local.models.0.contextWindw", "contextWindow"),
    ("{agents: {defaults: {compaction: {memoryFlush: {softThresholdToken: 1}}}}}",
     "agents.defaults.compaction.memoryFlush.softThresholdToken", "softThresholdTokens"),
    ("{session: {reset: {mdoe: 'daily'}}}", "session.reset.mdoe", "mode"),
])
def test_unknown_key_suggests_the_closest_valid_key(text, key, guess):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "/etc/clawd.json")
    assert str(info.value) == (f"/etc/clawd.json: unknown key {key!r} "
                               f"(did you mean {guess!r}?)")


@pytest.mark.parametrize("text", ["{xyzzy: 1}", "{agents: {defaults: {zzz: 1}}}",
                                  "{models: {providers: {local: {qqqq: 1}}}}"])
def test_unknown_key_with_nothing_close_has_no_guess(text):
    with pytest.raises(ConfigError, match="unknown key") as info:
        parse_config(text)
    assert "did you mean" not in str(info.value)


def config_sections() -> list[type[Model]]:
    found, todo = [], [Model]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def scalar_fields(kind: type) -> list[tuple[type[Model], str]]:
    """(section, camelCase key) of every config field holding ``kind`` (or ``kind | None``)."""
    return [(section, info.alias or name) for section in config_sections()
            for name, info in section.model_fields.items()
            if typing.get_origin(info.annotation) is not dict and (
                info.annotation is kind or kind in typing.get_args(info.annotation)
                or any(typing.get_args(arg)[:1] == (kind,)
                       for arg in typing.get_args(info.annotation)))]


def rejected(section: type[Model], key: str, value) -> str | None:
    """The error message for ``key: value`` in ``section``, if that key is refused."""
    try:
        section.model_validate({key: value})
    except ValidationError as exc:
        return next((e["msg"] for e in exc.errors() if e["loc"] == (key,)), None)
    return None


def test_every_boolean_is_strict():
    fields = scalar_fields(bool)
    assert len(fields) >= 15  # the walk found them (enabled, default, wait, watch, ...)
    for section, key in fields:
        for wrong in ("yes", "true", "false", 1, 0):
            assert rejected(section, key, wrong), (section.__name__, key, wrong)
        assert not rejected(section, key, True) and not rejected(section, key, False)


@pytest.mark.parametrize("kind", [int, float])
def test_every_number_refuses_booleans_and_quoted_numbers(kind):
    fields = scalar_fields(kind)
    assert len(fields) >= (30 if kind is int else 10)
    for section, key in fields:
        for wrong in (True, False, "5", "0.5"):
            assert rejected(section, key, wrong), (section.__name__, key, wrong)


def test_json5_numbers_stay_numbers():
    config = parse_config("""{agents: {defaults: {maxTokens: 0x1000, contextTokens: 6.4e4,
        compaction: {thresholdRatio: 1, memoryFlush: {softThreshold: .5}},
        tools: {exec: {timeoutSeconds: 90}}}}}""")
    settings = resolve_agent(config)[1]
    assert settings.max_tokens == 4096 and type(settings.max_tokens) is int
    assert settings.context_tokens == 64000 and type(settings.context_tokens) is int
    assert settings.compaction.threshold_ratio == 1.0
    assert settings.compaction.memory_flush.soft_threshold == 0.5
    assert settings.tools.exec.timeout_seconds == 90.0
    with pytest.raises(ConfigError, match="'agents.defaults.maxTokens': .*fractional"):
        parse_config("{agents: {defaults: {maxTokens: 4096.5}}}")


def test_agent_entry_values_are_checked_with_their_own_key():
    with pytest.raises(ConfigError) as info:
        parse_config("{agents: {list: [{id: 'a'}, {id: 'b', tools: {exec: {enabled: 'no'}}}]}}",
                     "c.json")
    assert str(info.value) == ("c.json: bad value for 'agents.list.1.tools.exec.enabled': "
                               "use true or false, not \"no\"")


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


def test_a_base_url_keeps_its_path_and_loses_surrounding_spaces():
    config = parse_config("{models: {providers: {local: {baseUrl: ' https://h:8080/v1 '}}}}")
    assert config.models.providers["local"].base_url == "https://h:8080/v1"


def test_extra_paths_lose_their_surrounding_spaces():
    config = parse_config('{agents: {defaults: {memorySearch: {extraPaths: '
                          '[" notes/ ", "\\tteam.md", "  "]}}}}')
    assert config.agents.defaults.memory_search.extra_paths == ["notes/", "team.md"]
    agent = parse_config('{agents: {defaults: {memorySearch: {extraPaths: ["a.md"]}}, '
                         'list: [{id: "main", default: true}, '
                         '{id: "w", memorySearch: {extraPaths: [" b.md "]}}]}}')
    from clawd.config import resolve_agent
    assert resolve_agent(agent, "w")[1].memory_search.extra_paths == ["a.md", "b.md"]
