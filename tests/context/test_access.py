"""``workspaceAccess``: what ``ro`` and ``none`` leave the model."""

from __future__ import annotations

import pytest

from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.exec import exec_tool
from clawd.tools.files import file_tools
from clawd.tools.memory import memory_tools

from conftest import make_runtime

ALL = file_tools() + [exec_tool()] + memory_tools()
pytestmark = pytest.mark.usefixtures("both_storages")


@pytest.mark.parametrize("access, offered, injected", [
    ("rw", {"read", "write", "edit", "exec", "memory_search", "memory_get"}, True),
    ("ro", {"read", "exec", "memory_search", "memory_get"}, True),
    ("none", set(), False),
])
def test_workspace_access_decides_tools_and_files(tmp_path, access, offered, injected):
    provider = ScriptedProvider(["hi"])
    rt = make_runtime(tmp_path, provider, settings={"workspaceAccess": access}, tools=ALL)
    rt.models = fixed_models(provider, 200_000, profile="strong")  # told of every tool
    rt.files.write("SOUL.md", "SOUL-TEXT")
    rt.files.write("MEMORY.md", "MEMORY-TEXT")
    list(Session.open(rt, "agent:main:main").run_turn("hello"))
    request = provider.requests[-1]
    assert {t.name for t in request.tools} == offered
    system = "\n".join(request.system)
    assert ("SOUL-TEXT" in system) is injected and ("MEMORY-TEXT" in system) is injected


def test_none_refuses_a_tool_call_it_never_offered(tmp_path):
    provider = ScriptedProvider([Reply(tool_calls=[tool("read", path="SOUL.md")]), "ok"])
    rt = make_runtime(tmp_path, provider, settings={"workspaceAccess": "none"}, tools=ALL)
    rt.files.write("SOUL.md", "SOUL-TEXT")
    session = Session.open(rt, "agent:main:main")
    list(session.run_turn("read it"))
    result = next(m for m in session.history.messages if m.role == "toolResult")
    assert result.is_error and "SOUL-TEXT" not in result.text


def test_memory_habits_are_taught_only_where_the_model_can_write(tmp_path):
    for access, taught in (("rw", True), ("ro", False), ("none", False)):
        provider = ScriptedProvider(["hi"])
        rt = make_runtime(tmp_path / access, provider, settings={"workspaceAccess": access},
                          tools=ALL)
        list(Session.open(rt, "agent:main:main").run_turn("hello"))
        assert ("## Memory habits" in provider.requests[-1].system[0]) is taught
