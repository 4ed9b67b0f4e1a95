"""What a plain turn reads of the workspace: its context files once, as the turn starts
(the window's count before the request and the first request use them); a note written
during the turn is in the next step's request, and a flush before the first request makes
it read them anew."""

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


def test_a_plain_turn_reads_its_context_files_once(tmp_path):
    runtime = make_runtime(tmp_path, ScriptedProvider(["Hello.", "Again."]))
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("hi"))
        reads = _counting(runtime)
        list(session.run_turn("hi again"))
    assert len(reads) == 1 and "AGENTS.md" in reads[0]


def test_a_note_written_during_the_turn_is_in_the_next_request(tmp_path):
    provider = ScriptedProvider([
        Reply("", [tool("write", path="USER.md", content="# User\n\nName: Ines Duarte\n")]),
        "Noted."])
    runtime = make_runtime(tmp_path, provider, tools=file_tools())
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("call me Ines Duarte"))
    first, second = (" ".join(r.system) for r in provider.requests)
    assert "Ines Duarte" not in first and "Ines Duarte" in second


def test_a_note_the_flush_wrote_before_the_first_request_is_in_it(tmp_path):
    """The flush runs between the turn's start and its first request, and writes: the
    request reads the files anew, the flush's note with them."""
    from clawd.context.flush import SILENT

    note = Reply("", [tool("write", path="memory/2026-11-22.md", append=True,
                           content="- The user's name is Ines Duarte.\n")])
    provider = ScriptedProvider(["Hi."])
    comp = {"reserveTokensFloor": 1000, "memoryFlush": {"softThresholdTokens": 1000}}
    runtime = make_runtime(tmp_path, provider, window=20_000, tools=file_tools(),
                           settings={"compaction": comp})
    with Session.open(runtime, "agent:main:main") as session:
        list(session.run_turn("hi, my name is Ines Duarte"))
        provider.add(note, SILENT, "Hello Ines.")
        list(session.run_turn("what's my name? " + "please " * 17_400))
    flush, *_, answer = provider.requests[1:]
    assert flush.messages[-1].flush and "Ines Duarte." in " ".join(answer.system)
    provider.assert_done()
