"""Lines consolidation replaced: MEMORY.md's ``## Replaced`` record is read back, and a
search result covering a replaced line of a daily log shows what replaced it, while the
note itself is left as it is."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

from clawd.context.consolidation import Op, apply, bullets, check, source_lines
from clawd.memory.superseded import annotate, latest, unmark
from clawd.storage.files.memory import open_file_index
from clawd.storage.files.workspace import DiskFiles
from clawd.workspace.files import (
    ReplacedLine,
    read_context_files,
    replaced_left_out,
    replaced_lines,
)

from conftest import disk_tool_context
from memory_fakes import FakeEmbedder, settings, write

DAY = "memory/2026-03-03.md"
LOG = ("# 2026-03-03\n\n- The build server is called osprey; it runs the nightly builds.\n"
       "- The code for the bike shed padlock is 5826.\n")
MEMORY = """# MEMORY.md

## Facts and references

- The build server was renamed from osprey to condor. (memory/2026-03-16.md#L3)

## Replaced

- The build server is called osprey; it runs the nightly builds. (memory/2026-03-03.md#L3) \
— replaced on 2026-03-16 by: The build server was renamed from osprey to condor.
- Wifi password on the fridge — replaced on 2026-03-10 by: Wifi password in the drawer
"""


def test_the_record_names_each_replaced_line_and_skips_entries_without_one():
    entries = replaced_lines(MEMORY + "\n## Later\n\n- not (memory/x.md#L1) — replaced on "
                                      "2026-01-01 by: outside the record\n")
    assert entries == [ReplacedLine("The build server is called osprey; it runs the nightly "
                                    "builds.", DAY, 3, 3, "2026-03-16",
                                    "The build server was renamed from osprey to condor.")]
    ranged = replaced_lines("## Replaced\n- Old fact (memory/a.md#L4-L6) — replaced on "
                            "2026-02-01 by: New fact\n")
    assert (ranged[0].start, ranged[0].end) == (4, 6)


def test_consolidation_writes_entries_the_record_reads_back():
    notes = {"memory/2026-03-03.md": LOG, "memory/2026-03-16.md":
             "# 2026-03-16\n\n- The build server was renamed from osprey to condor.\n"}
    sources = source_lines(notes)
    first = apply("# MEMORY.md\n\n## Facts and references\n\n", check(
        [Op("add", "Facts and references", sources[0].text[2:], "S1")], sources, "")[0],
        sources, date(2026, 3, 3)).text
    (mark,) = bullets(first)
    second = apply(first, [Op("replace", mark, "The build server was renamed from osprey to "
                              "condor.", "S3")], sources, date(2026, 3, 16)).text
    (entry,) = replaced_lines(second)
    assert (entry.path, entry.start, entry.day) == (DAY, 3, "2026-03-16")
    assert entry.new == "The build server was renamed from osprey to condor."


OLD_MARKED = ("- ~~The build server is called osprey; it runs the nightly builds.~~ [replaced on "
              "2026-03-16 by: The build server was renamed from osprey to condor.]")


def test_the_replaced_line_is_struck_through_beside_its_replacement_and_others_are_not():
    marked = annotate(LOG, 1, latest(replaced_lines(MEMORY))[DAY])
    assert marked.split("\n")[2:4] == [OLD_MARKED, "- The code for the bike shed padlock is 5826."]
    assert unmark(marked) == LOG  # a group session gets the note's own lines back
    assert unmark(marked[:marked.index("condor")] + "…") == LOG[:LOG.index("\n- The code")]
    assert unmark("- ~~done~~ and dusted") == "- ~~done~~ and dusted"  # the user's own
    numbered = annotate("1. The build server is called osprey; it runs the nightly builds.", 3,
                        latest(replaced_lines(MEMORY))[DAY])
    assert numbered.startswith("1. ~~The build server") and unmark(numbered).startswith("1. The")
    # a chunk that starts further down counts its lines from there
    assert annotate(LOG.split("\n", 2)[2], 3, latest(replaced_lines(MEMORY))[DAY]).count(
        "[replaced on") == 1


def test_a_line_edited_since_is_left_alone_and_a_moved_one_is_found():
    entries = latest(replaced_lines(MEMORY))[DAY]
    edited = LOG.replace("called osprey; it runs the nightly builds", "a Mac mini now")
    assert "[replaced" not in annotate(edited, 1, entries)
    moved = LOG.replace("# 2026-03-03\n\n", "# 2026-03-03\n\nMorning: rain.\n\n")
    lines = annotate(moved, 1, entries).split("\n")
    assert OLD_MARKED in lines


def test_another_note_that_repeats_the_old_fact_closely_is_marked_too(tmp_path: Path):
    """A saved session whose reply quoted the old fact (or a later log that copied it) is
    handed out with the same mark, where it repeats it closely; its other lines, and lines
    sharing only some of the old fact's words, are left alone."""
    session = ("# Session 2026-03-04 10:00: builds\n\n## Conversation\n\n"
               "**user** (2026-03-04 09:58):\nWhere do the nightly builds run?\n\n"
               "**assistant** (2026-03-04 09:58):\nThe build server is called osprey; it runs "
               "the nightly builds. (2026-03-03)\n\n**user** (2026-03-04 09:59):\nAnd the "
               "disk?\n\n**assistant** (2026-03-04 09:59):\nThe build server osprey got a new "
               "disk.\n")
    ws = tmp_path / "ws"
    write(ws, DAY, LOG)
    write(ws, "memory/2026-03-04-builds.md", session)
    write(ws, "MEMORY.md", MEMORY)
    idx = open_file_index("main", ws, settings(sync={"watch": False}, fallback="none"),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    try:
        idx.sync()
        (hit,) = [r for r in idx.search("nightly builds osprey", min_score=0.0)["results"]
                  if r["path"] == "memory/2026-03-04-builds.md"]
    finally:
        idx.close()
    marked = [line for line in hit["snippet"].split("\n") if "[replaced on" in line]
    assert len(marked) == 1 and "~~The build server is called osprey" in marked[0]
    assert "The build server was renamed from osprey to condor." in marked[0]
    assert "The build server osprey got a new disk." in hit["snippet"]  # 2 of 5 words: left
    entries = latest(replaced_lines(MEMORY))[DAY]
    assert annotate(session, 1, [], entries).count("[replaced on") == 1
    assert annotate(session, 1, []) == session  # nothing replaced anywhere: as it is


def test_a_fact_replaced_twice_shows_the_newest_replacement():
    memory = ("## Replaced\n"
              "- The recital is on 17 April. (memory/2026-03-02.md#L3) — replaced on "
              "2026-03-12 by: The recital moved to 24 April.\n"
              "- The recital moved to 24 April. (memory/2026-03-12.md#L3) — replaced on "
              "2026-03-27 by: The recital moved again, to 2 May.\n")
    found = latest(replaced_lines(memory))
    assert [(e.day, e.new) for e in found["memory/2026-03-02.md"]] == \
        [("2026-03-27", "The recital moved again, to 2 May.")]
    assert found["memory/2026-03-12.md"][0].new == "The recital moved again, to 2 May."


def test_search_shows_the_replacement_and_follows_changes_to_memory_md(tmp_path: Path):
    ws = tmp_path / "ws"
    note = write(ws, DAY, LOG)
    memory = write(ws, "MEMORY.md", MEMORY)
    idx = open_file_index("main", ws, settings(sync={"watch": False}, fallback="none"),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    try:
        idx.sync()
        (hit,) = [r for r in idx.search("build server osprey", min_score=0.0)["results"]
                  if r["path"] == DAY]
        assert OLD_MARKED in hit["snippet"]
        assert note.read_text() == LOG  # the note is the user's: never changed
        # the record is read again when MEMORY.md changes: the entry gone, the mark goes
        memory.write_text(MEMORY.split("## Replaced")[0])
        os.utime(memory, ns=(1, 1))
        (hit,) = [r for r in idx.search("build server osprey", min_score=0.0)["results"]
                  if r["path"] == DAY]
        assert "[replaced" not in hit["snippet"]
    finally:
        idx.close()


def test_the_context_leaves_the_record_out_and_says_so(tmp_path: Path):
    write(tmp_path, "MEMORY.md", MEMORY)
    (memory,) = [f for f in read_context_files(DiskFiles(tmp_path), include_memory=True,
                                               today=date(2026, 3, 30), max_chars=20_000)
                 if f.name == "MEMORY.md"]
    assert "renamed from osprey to condor. (memory/2026-03-16.md#L3)" in memory.text
    assert "called osprey" not in memory.text and "fridge" not in memory.text
    assert memory.text.rstrip().endswith(
        "## Replaced\n[2 older values replaced (by consolidation or a correction), with what "
        "replaced them: not "
        "shown here; read MEMORY.md to see them]")
    assert replaced_left_out("# M\n\n- a\n") == "# M\n\n- a\n"


def tool_context(ws: Path, access=None):
    from clawd.config import AgentDefaults
    from clawd.context.access import Access
    return disk_tool_context(workspace=ws, settings=AgentDefaults.model_validate(
        {"memorySearch": {"fallback": "none"}}), access=access or Access())


def run_tool(name: str, args: dict, ctx) -> str:
    from clawd.tools.files import file_tools
    from clawd.tools.memory import memory_tools
    return next(t for t in memory_tools() + file_tools() if t.spec.name == name).run(args, ctx)


def test_memory_get_and_read_show_the_mark_and_take_a_citation_as_the_path(tmp_path: Path):
    write(tmp_path, DAY, LOG)
    write(tmp_path, "MEMORY.md", MEMORY)
    ctx = tool_context(tmp_path)
    # a model handed a citation passes it as the path: it reads those lines
    assert run_tool("memory_get", {"path": f"{DAY}#L3"}, ctx).startswith(OLD_MARKED + "\n[...")
    assert run_tool("read", {"path": f"{DAY}#L3-L4"}, ctx).startswith(
        OLD_MARKED + "\n- The code for the bike shed padlock is 5826.\n\n[showing lines 3-4")
    assert OLD_MARKED in run_tool("read", {"path": DAY}, ctx)
    assert "~~" not in run_tool("memory_get", {"path": "MEMORY.md"}, ctx)  # the record itself
    assert (tmp_path / DAY).read_text() == LOG


def test_a_group_session_never_sees_the_replacements_from_memory_md(tmp_path: Path):
    from clawd.context.access import Access
    from clawd.tools.memory import visible_search
    write(tmp_path, DAY, LOG)
    write(tmp_path, "MEMORY.md", MEMORY)
    group = Access("rw", group=True, shareable=("memory",))
    assert run_tool("memory_get", {"path": DAY}, tool_context(tmp_path, group)) == LOG.rstrip()
    idx = open_file_index("main", tmp_path, settings(sync={"watch": False}, fallback="none"),
                          tmp_path / "state", embedder=FakeEmbedder(), env={})
    try:
        idx.sync()
        private = visible_search(idx, Access(), "build server osprey", min_score=0.0)
        shared = visible_search(idx, group, "build server osprey", min_score=0.0)
        assert OLD_MARKED in next(r["snippet"] for r in private["results"] if r["path"] == DAY)
        snippet = next(r["snippet"] for r in shared["results"] if r["path"] == DAY)
        assert "condor" not in snippet and "- The build server is called osprey" in snippet
    finally:
        idx.close()
