"""A small window gets the workspace's untouched templates in short forms (or not at all when
they are only blanks to fill) and a system prompt that names the tools without repeating
their schemas; a file you changed is sent as it is, and a large window gets everything."""

from __future__ import annotations

from datetime import datetime, timezone

from clawd.context.layers import build_layers
from clawd.core.tokens import estimate_text
from clawd.storage.files.workspace import DiskFiles
from clawd.tools.files import file_tools
from clawd.workspace.init import apply, plan_init

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def workspace(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    apply(plan_init(state, state / "clawd.json", tmp_path / "ws", "main"))
    return DiskFiles(tmp_path / "ws")


def layers(files, compact):
    return build_layers(files, [t.spec for t in file_tools()], private=True, now=NOW,
                        max_chars=20_000, read_only=False, compact=compact)


def test_a_small_window_gets_the_short_forms_and_no_blank_templates(tmp_path):
    files = workspace(tmp_path)
    small, large = layers(files, True), layers(files, False)
    assert [f.name for f in large.files] == ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md",
                                             "IDENTITY.md"]
    assert [f.name for f in small.files] == ["AGENTS.md", "SOUL.md", "TOOLS.md"]
    assert all("(short form: the file is as clawd laid it down" in f.text
               for f in small.files)
    assert "`read`, `write`, `edit` (each described in its schema)" in small.system
    assert "- `read`: Read a text file" in large.system
    small_size = estimate_text(small.system) + estimate_text(small.project)
    large_size = estimate_text(large.system) + estimate_text(large.project)
    assert small_size < large_size / 2


def test_a_file_you_changed_is_sent_whole_in_a_small_window(tmp_path):
    files = workspace(tmp_path)
    files.write("USER.md", files.read("USER.md").replace("- Name:", "- Name: Sam"))
    files.write("AGENTS.md", files.read("AGENTS.md") + "\n- Always answer in Portuguese.\n")
    small = {f.name: f.text for f in layers(files, True).files}
    assert "- Name: Sam" in small["USER.md"]
    assert "Always answer in Portuguese." in small["AGENTS.md"]
    assert "short form" not in small["AGENTS.md"]
