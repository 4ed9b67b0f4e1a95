"""What a plain turn reads of the workspace: its context files once as the turn starts
(the window's count before the request uses them) and once for the request itself; a
note written during the turn is in the next step's request."""

from __future__ import annotations

from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.tools.files import file_tools

from conftest import make_runtime


def _counting(runtime) -> list[list[str]]:
    files, reads = runtime.files, []
    real = files.read_many

    def read_many(paths):
        reads.append(list(paths))
        return real(paths)

    files.read_many = read_many
    return reads


def test_a_plain_turn_reads_its_context_files_twice(tmp_path):
    runtime = make_runtime(tmp_path, ScriptedProvider(["Hello.", "Again."]))
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("hi"))
        reads = _counting(runtime)
        list(session.run_turn("hi again"))
    assert len(reads) == 2 and "AGENTS.md" in reads[0]


def test_a_note_written_during_the_turn_is_in_the_next_request(tmp_path):
    provider = ScriptedProvider([
        Reply("", [tool("write", path="USER.md", content="# User\n\nName: Ines Duarte\n")]),
        "Noted."])
    runtime = make_runtime(tmp_path, provider, tools=file_tools())
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("call me Ines Duarte"))
    first, second = (" ".join(r.system) for r in provider.requests)
    assert "Ines Duarte" not in first and "Ines Duarte" in second
