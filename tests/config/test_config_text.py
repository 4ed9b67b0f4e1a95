"""Adding an agent to the JSON5 config as text: every layout keeps its comments and form,
and an insertion that would change anything else is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawd.config import parse_config, resolve_agent
from clawd.config.text import add_agent, agent_snippet
from clawd.workspace.init import starter_config_text

WORK = Path("/home/u/clawd work")  # a space, to check the quoting


def added(text: str, agent_id: str = "work", workspace: Path | None = WORK) -> str:
    edited = add_agent(text, parse_config(text), agent_id, workspace)
    assert edited is not None
    return edited


def keeps_every_line(before: str, after: str) -> bool:
    """Whether ``after`` holds all of ``before``'s lines, comments included, in order."""
    remaining = iter(after.splitlines())
    return all(old in remaining for old in before.splitlines())


def test_starter_config_gains_a_list_below_its_commented_example():
    text = starter_config_text()
    edited = added(text)
    assert keeps_every_line(text, edited)
    assert ('    // ],\n'
            '    list: [\n'
            '      { id: "main", default: true },\n'
            '      { id: "work", workspace: "/home/u/clawd work" },\n'
            '    ],\n'
            '  },\n') in edited
    config = parse_config(edited)
    assert config.agent_ids() == ["main", "work"] and config.default_agent_id() == "main"
    assert resolve_agent(config, "work")[1].workspace == str(WORK)


@pytest.mark.parametrize("text, expected", [
    # an existing list, one entry per line, comments after the entries and at its end
    ("{\n  agents: {\n    list: [\n      { id: 'a' },  // first\n      { id: 'b' } // second\n"
     "      // more to come\n    ],\n  },\n}\n",
     "{\n  agents: {\n    list: [\n      { id: 'a' },  // first\n      { id: 'b' }, // second\n"
     "      // more to come\n      { id: \"work\" },\n    ],\n  },\n}\n"),
    # an empty list: the implicit default agent is listed first, so it stays the default
    ("{\n\tagents: {\n\t\tlist: [\n\t\t],\n\t},\n}\n",
     "{\n\tagents: {\n\t\tlist: [\n\t\t  { id: \"main\", default: true },\n"
     "\t\t  { id: \"work\" },\n\t\t],\n\t},\n}\n"),
    # agents without a list; its last member has no trailing comma but a comment
    ("{\n  agents: {\n    defaults: { model: 'openai/gpt-4o' } // mine\n  }\n}\n",
     "{\n  agents: {\n    defaults: { model: 'openai/gpt-4o' }, // mine\n    list: [\n"
     "      { id: \"main\", default: true },\n      { id: \"work\" },\n    ],\n  }\n}\n"),
    # no agents at all, after a block comment
    ("{\n  /* local */ models: { providers: {} },\n}",
     "{\n  /* local */ models: { providers: {} },\n  agents: {\n    list: [\n"
     "      { id: \"main\", default: true },\n      { id: \"work\" },\n    ],\n  },\n}"),
    # inline layouts stay inline
    ("{agents: {list: [{id: 'a'},]}}", "{agents: {list: [{id: 'a'}, { id: \"work\" }]}}"),
    ("{agents: {defaults: {}}}",
     "{agents: {defaults: {}, list: [{ id: \"main\", default: true }, { id: \"work\" }]}}"),
    ("{}", "{agents: { list: [{ id: \"main\", default: true }, { id: \"work\" }] }}"),
    # strings holding brackets, commas and comment markers are not structure
    ("{agents: {defaults: {workspace: '/w/[x], // {y}'}, 'list': [{id: \"a\"}]}}",
     "{agents: {defaults: {workspace: '/w/[x], // {y}'}, 'list': [{id: \"a\"}, "
     "{ id: \"work\" }]}}"),
])
def test_layouts(text, expected):
    assert added(text, workspace=None) == expected


@pytest.mark.parametrize("text", [
    '{"agents": {"list": [{"id": "main"}]}}',
    '{\n  "agents": {\n    "defaults": {"model": "openai/gpt-4o"}\n  }\n}\n',
    '{\n  "models": {}\n}\n',
])
def test_plain_json_stays_plain_json(text):
    edited = added(text)
    data = json.loads(edited)
    assert data["agents"]["list"][-1] == {"id": "work", "workspace": str(WORK)}


def test_an_edit_that_would_change_anything_else_is_refused():
    # "entries" (the field's own name) is accepted for "list": a second list would replace it
    text = "{agents: {entries: [{id: 'a'}, {id: 'b'}]}}"
    config = parse_config(text)
    assert config.agent_ids() == ["a", "b"]
    assert add_agent(text, config, "work", WORK) is None
    assert agent_snippet(config, "work", WORK) == \
        'add { id: "work", workspace: "/home/u/clawd work" } to agents.list'
    assert agent_snippet(parse_config("{}"), "work", None) == \
        'add list: [{ id: "main", default: true }, { id: "work" }] to agents'


def test_other_agents_keep_their_settings_and_default():
    text = """{agents: {
      defaults: {workspace: '/w', model: 'openai/gpt-4o'},
      list: [{id: 'a'}, {id: 'b', default: true}, {id: 'c', model: 'openai/o3'}],
    }}"""
    before = parse_config(text)
    after = parse_config(added(text, "d", None))
    assert after.agent_ids() == ["a", "b", "c", "d"] and after.default_agent_id() == "b"
    for agent in "abc":
        assert resolve_agent(after, agent) == resolve_agent(before, agent)
    assert resolve_agent(after, "d")[1].workspace == "/w-d"
