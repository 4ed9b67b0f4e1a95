"""No config key is silently ignored: honoured, or refused in one line naming it."""

from __future__ import annotations

import pytest

from clawd.config import parse_config
from clawd.core.errors import ConfigError
from clawd.core.events import Notice
from clawd.frontends.commands import Chat
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime


def test_daily_mode_honours_idle_minutes_in_a_chat(tmp_path, clock):
    provider = ScriptedProvider(default="fine")
    runtime = make_runtime(tmp_path, provider, clock=clock)
    runtime.config = parse_config('{session: {reset: {mode: "daily", idleMinutes: 30}}}')
    chat = Chat.open(runtime, "agent:main:main")
    list(chat.handle("first"))
    first = chat.session.entry["sessionId"]
    clock.advance(minutes=29)
    list(chat.handle("second"))
    assert chat.session.entry["sessionId"] == first
    clock.advance(minutes=31)  # still the same day: only the idle reset can fire
    events = list(chat.handle("third"))
    assert any(isinstance(e, Notice) and "idle for more than 30 minutes" in e.text
               for e in events)
    assert chat.session.entry["sessionId"] != first


def test_daily_mode_without_idle_minutes_has_no_idle_reset():
    reset = parse_config('{session: {reset: {mode: "daily"}}}').session.reset
    assert reset.idle_limit is None
    assert parse_config('{session: {reset: {mode: "idle"}}}').session.reset.idle_limit == 120
    assert parse_config('{session: {reset: {mode: "both"}}}').session.reset.idle_limit == 120


@pytest.mark.parametrize("text, says", [
    ('{session: {reset: {idleMinutes: 30}}}', 'idleMinutes would have no effect without a mode'),
    ('{session: {reset: {atHour: 5, idleMinutes: 9}}}', 'atHour and idleMinutes would have'),
    ('{session: {reset: {mode: "idle", atHour: 5}}}', 'use mode "both"'),
    ('{session: {reset: {mode: "daily"}, reset: {mode: "idle"}}}',
     "the key 'reset' is given twice"),
    ('{agents: {defaults: {memorySearch: {sources: ["memory", "sessions"]}}}}',
     'experimental.sessionMemory is off'),
    ('{agents: {defaults: {memorySearch: {experimental: {sessionMemory: true}}}}}',
     'sources lacks "sessions"'),
    ('{agents: {defaults: {memorySearch: {sources: ["memory", "sessions"], experimental: '
     '{sessionMemory: true}}}, list: [{id: "main"}, {id: "work", memorySearch: '
     '{experimental: {sessionMemory: false}}}]}}', "agent work: memorySearch.sources"),
    ('{agents: {defaults: {memorySearch: {provider: "local", remote: {baseUrl: "http://x"}}}}}',
     'remote is set but provider is "local"'),
])
def test_keys_that_would_be_ignored_are_refused(text, says):
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "clawd.json")
    message = str(caught.value)
    assert says in message and message.startswith("clawd.json") and "\n" not in message


def test_the_pairs_are_fine_together():
    parse_config('{session: {reset: {mode: "off", atHour: 5, idleMinutes: 30}}}')  # said: off
    parse_config('{session: {reset: {mode: "both", atHour: 5, idleMinutes: 30}}}')
    parse_config('{agents: {defaults: {memorySearch: {sources: ["memory", "sessions"], '
                 'experimental: {sessionMemory: true}}}}}')
    parse_config('{agents: {defaults: {memorySearch: {provider: "local", fallback: "openai", '
                 'remote: {baseUrl: "http://x"}}}}}')


def test_a_config_that_is_not_utf8_is_one_line(tmp_path):
    from clawd.config import load_config

    path = tmp_path / "clawd.json"
    path.write_bytes(b'{agents: {defaults: {model: "caf\xe9"}}}')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(path)
