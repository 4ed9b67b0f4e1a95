"""Tests for ``clawd init``: the plan is a dry run, apply creates, a rerun changes nothing."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from clawd.config import Config, load_config, parse_config, resolve_agent
from clawd.core.errors import ClawdError
from clawd.workspace.init import (
    Action,
    apply,
    plan_init,
    render_starter_config,
    starter_config_text,
    template_files,
)

WORKSPACE_FILES = ["AGENTS.md", "IDENTITY.md", "MEMORY.md", "SOUL.md", "TOOLS.md", "USER.md",
                   "templates/daily.md", "templates/project-tracking.md",
                   "templates/research-intel.md"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAWD_HOME", raising=False)
    monkeypatch.delenv("CLAWD_CONFIG", raising=False)
    return tmp_path


def layout(root: Path) -> dict[str, Path]:
    state = root / "state"
    return {"state_dir": state, "config_file": state / "clawd.json",
            "workspace": root / "ws", "agent_id": "main"}


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


# --- planning ---------------------------------------------------------------------------------

def test_plan_is_a_dry_run(home):
    paths = layout(home)
    before = snapshot(home)
    actions = plan_init(**paths)
    assert snapshot(home) == before  # nothing created
    assert all(a.status == "create" for a in actions)
    planned = {a.path: a.kind for a in actions}
    assert planned[paths["state_dir"]] == "dir"
    assert planned[paths["state_dir"] / "agents" / "main" / "sessions"] == "dir"
    assert planned[paths["config_file"]] == "file"
    assert planned[paths["workspace"] / "memory"] == "dir"
    for name in WORKSPACE_FILES:
        assert planned[paths["workspace"] / name] == "file", name
    assert all("would create" in a.describe() for a in actions)


def test_plan_orders_parents_before_children(home):
    paths = [a.path for a in plan_init(**layout(home))]
    for i, path in enumerate(paths):
        assert not any(path in later.parents for later in paths[:i]), path


def test_template_files_are_shipped_and_skip_hidden():
    names = [rel for rel, _ in template_files()]
    assert names == sorted(names, key=lambda n: (n.count("/"), n))
    assert sorted(names) == sorted(WORKSPACE_FILES)


@pytest.mark.parametrize("bad", ["", "../escape", "a/b", ".hidden", "x" * 65, "sp ace"])
def test_invalid_agent_id_is_refused(home, bad):
    with pytest.raises(ClawdError, match="invalid agent id"):
        plan_init(home / "state", home / "state" / "clawd.json", home / "ws", bad)


def test_file_where_a_directory_belongs_is_an_error(home):
    (home / "ws").write_text("not a directory")
    with pytest.raises(ClawdError, match="not a directory"):
        plan_init(**layout(home))


# --- applying ---------------------------------------------------------------------------------

def test_apply_creates_everything(home):
    paths = layout(home)
    done = apply(plan_init(**paths))
    assert all(a.status == "created" for a in done)
    assert all(a.path.exists() for a in done)
    assert (paths["state_dir"] / "agents" / "main" / "sessions").is_dir()
    for name in WORKSPACE_FILES:
        assert (paths["workspace"] / name).is_file(), name
    assert paths["config_file"].read_text(encoding="utf-8") == \
        render_starter_config(paths["workspace"])
    config = load_config(paths["config_file"])
    assert Path(config.agents.defaults.workspace) == paths["workspace"]
    agents = (paths["workspace"] / "AGENTS.md").read_text(encoding="utf-8")
    assert "MEMORY.md" in agents and "memory/YYYY-MM-DD.md" in agents
    for needle in ("memory_search", "memory_get", "append: true"):
        assert needle in agents, needle


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_state_and_config_are_private(home):
    paths = layout(home)
    apply(plan_init(**paths))
    assert stat.S_IMODE(paths["state_dir"].stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(paths["config_file"].stat().st_mode) & 0o077 == 0


def test_second_run_is_a_no_op_and_keeps_user_edits(home):
    paths = layout(home)
    apply(plan_init(**paths))
    edited = b"# My own rules\n\xe2\x9c\x93 keep this byte for byte\n"
    (paths["workspace"] / "AGENTS.md").write_bytes(edited)
    (paths["workspace"] / "SOUL.md").unlink()  # a deleted file comes back, nothing else moves
    before = snapshot(home)

    second = plan_init(**paths)
    assert [a.path for a in second if a.status == "create"] == [paths["workspace"] / "SOUL.md"]
    apply(second)
    assert (paths["workspace"] / "AGENTS.md").read_bytes() == edited
    after = snapshot(home)
    assert {k: v for k, v in after.items() if k != "ws/SOUL.md"} == before

    third = apply(plan_init(**paths))
    assert all(a.status == "exists" for a in third)
    assert all(a.describe().startswith("exists, kept") for a in third)
    assert snapshot(home) == after


def test_apply_never_overwrites_a_file_that_appeared_after_planning(home):
    paths = layout(home)
    actions = plan_init(**paths)
    paths["workspace"].mkdir()
    (paths["workspace"] / "USER.md").write_text("mine")
    done = {a.path: a.status for a in apply(actions)}
    assert (paths["workspace"] / "USER.md").read_text() == "mine"
    assert done[paths["workspace"] / "USER.md"] == "exists"
    assert done[paths["workspace"] / "TOOLS.md"] == "created"


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_dangling_symlink_is_not_written_through(home):
    paths = layout(home)
    paths["workspace"].mkdir()
    target = home / "elsewhere.md"
    (paths["workspace"] / "MEMORY.md").symlink_to(target)
    apply(plan_init(**paths))
    assert not target.exists()


def test_existing_config_is_kept(home):
    paths = layout(home)
    paths["state_dir"].mkdir()
    paths["config_file"].write_text('{agents: {defaults: {model: "openai/gpt-4o"}}}')
    actions = plan_init(**paths)
    config_action = next(a for a in actions if a.path == paths["config_file"])
    assert config_action.status == "exists"
    apply(actions)
    assert load_config(paths["config_file"]).agents.defaults.model == "openai/gpt-4o"


def test_config_outside_the_state_dir_gets_its_folder(home):
    paths = layout(home) | {"config_file": home / "etc" / "clawd" / "clawd.json"}
    apply(plan_init(**paths))
    assert parse_config(paths["config_file"].read_text(), paths["config_file"])


def test_agent_id_and_workspace_are_respected(home):
    paths = layout(home) | {"workspace": home / "work-notes", "agent_id": "work"}
    apply(plan_init(**paths))
    assert (paths["state_dir"] / "agents" / "work" / "sessions").is_dir()
    assert not (paths["state_dir"] / "agents" / "main").exists()
    assert (home / "work-notes" / "AGENTS.md").is_file()
    assert not (home / "ws").exists()
    # The fresh config records both, so later commands find the same workspace.
    config = load_config(paths["config_file"])
    agent_id, settings = resolve_agent(config, "work")
    assert agent_id == "work" and config.default_agent_id() == "work"
    assert Path(settings.workspace) == home / "work-notes"


def test_relative_workspace_is_made_absolute(home, monkeypatch):
    monkeypatch.chdir(home)
    paths = layout(home) | {"workspace": Path("rel-ws")}
    actions = plan_init(**paths)
    assert all(a.path.is_absolute() for a in actions)
    apply(actions)
    config = load_config(paths["config_file"])
    assert Path(config.agents.defaults.workspace) == home / "rel-ws"


# --- the starter config -----------------------------------------------------------------------

SETTING = re.compile(r"^(\s*)// ([A-Za-z]\w*: .*?,)(\s*//.*)?$")


def uncomment_settings(text: str) -> str:
    """Uncomment every one-line ``// key: value,`` setting (not prose, not example blocks)."""
    return "\n".join(SETTING.sub(r"\1\2\3", line) for line in text.splitlines())


def uncomment_block(text: str, first_line: str) -> str:
    """Uncomment the commented block that starts with ``first_line``, to its closing line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == first_line)
    indent = lines[start].index("//")
    for i in range(start, len(lines)):
        lines[i] = lines[i][:indent] + lines[i][indent + 3:]
        if lines[i][indent:] in ("},", "],"):
            break
    return "\n".join(lines)


def test_starter_config_parses_to_the_defaults():
    text = starter_config_text()
    assert parse_config(text).model_dump() == Config().model_dump()


def test_starter_config_comments_show_the_real_defaults():
    text = uncomment_settings(starter_config_text())
    uncommented = [line for line in text.splitlines() if SETTING.match(line)]
    assert not uncommented
    live = [line.strip() for line in text.splitlines()
            if re.match(r"^\s*[A-Za-z]\w*: [^{]", line)]
    assert len(live) >= 40  # the main keys are all shown
    for key in ("workspace", "model", "reserveTokensFloor", "softThresholdTokens", "ttl",
                "keepLastAssistants", "provider", "minScore", "vectorWeight", "atHour",
                "idleMinutes", "messages"):
        assert any(line.startswith(f"{key}:") for line in live), key
    # Uncommented, every shown value must equal the built-in default, key for key.
    assert parse_config(text).model_dump() == Config().model_dump()


def test_starter_config_examples_are_valid():
    text = uncomment_block(starter_config_text(), "// ollama: {")
    config = parse_config(text)
    ollama = config.models.providers["ollama"]
    assert ollama.api == "openai-completions"
    assert ollama.base_url.startswith("http://127.0.0.1:11434")
    assert ollama.models[0].context_window
    text = uncomment_block(starter_config_text(), "// list: [")
    assert parse_config(text).agent_ids() == ["main", "work"]


def test_rendered_starter_config_handles_odd_paths(tmp_path):
    odd = tmp_path / 'we"ird \\ dir ü'
    config = parse_config(render_starter_config(odd, "a_1"))
    assert Path(config.agents.defaults.workspace) == odd
    assert config.agent_ids() == ["a_1"]


def test_default_workspace_stays_commented(home):
    text = render_starter_config(Path("~/clawd").expanduser())
    assert text == starter_config_text()


def test_action_describe_names_the_source():
    action = Action("file", Path("/w/AGENTS.md"), "workspace_template/AGENTS.md")
    assert action.describe() == "would create file /w/AGENTS.md (from workspace_template/AGENTS.md)"


# --- an agent added to an existing config -----------------------------------------------------

def test_a_new_agent_is_added_to_the_existing_config_keeping_its_comments(home):
    paths = layout(home)
    apply(plan_init(**paths))
    config_file, state = paths["config_file"], paths["state_dir"]
    before = config_file.read_text(encoding="utf-8")
    work = home / "work-ws"

    actions = plan_init(state, config_file, work, "work")
    [edit] = [a for a in actions if a.kind == "edit"]
    assert edit.describe() == (f"would add agents 'main' and 'work' to agents.list in "
                               f"{config_file} (old version kept as {config_file}.bak)")
    assert config_file.read_text(encoding="utf-8") == before  # planning changes nothing
    done = apply(actions)
    assert next(a for a in done if a.kind == "edit").describe().startswith("added agents")

    after = config_file.read_text(encoding="utf-8")
    assert config_file.with_name("clawd.json.bak").read_text(encoding="utf-8") == before
    remaining = iter(after.splitlines())
    assert all(line in remaining for line in before.splitlines())  # every comment kept
    config = load_config(config_file)
    assert config.agent_ids() == ["main", "work"] and config.default_agent_id() == "main"
    assert Path(resolve_agent(config, "main")[1].workspace) == paths["workspace"]
    assert Path(resolve_agent(config, "work")[1].workspace) == work
    assert (work / "AGENTS.md").is_file() and (state / "agents" / "work" / "sessions").is_dir()
    if os.name == "posix":
        for path in (config_file, config_file.with_name("clawd.json.bak")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path

    assert not [a for a in plan_init(state, config_file, work, "work") if a.kind == "edit"]
    apply(plan_init(state, config_file, home / "x", "x"))  # a third: one entry, a new backup
    assert load_config(config_file).agent_ids() == ["main", "work", "x"]
    assert config_file.with_name("clawd.json.bak").read_text(encoding="utf-8") == before
    assert config_file.with_name("clawd.json.bak.2").read_text(encoding="utf-8") == after


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_a_symlinked_config_is_edited_where_it_lives(home):
    paths = layout(home)
    real = home / "dotfiles" / "clawd.json"
    real.parent.mkdir()
    real.write_text("{agents: {list: [{id: 'main'}]}}")
    paths["state_dir"].mkdir()
    paths["config_file"].symlink_to(real)
    apply(plan_init(**paths | {"agent_id": "work"}))
    assert paths["config_file"].is_symlink()
    assert load_config(real).agent_ids() == ["main", "work"]


def test_a_config_that_cannot_be_edited_as_text_gives_the_entry_to_paste(home):
    paths = layout(home)
    paths["state_dir"].mkdir()
    text = "{agents: {entries: [{id: 'a'}]}}"  # the field's own name: a list would replace it
    paths["config_file"].write_text(text)
    with pytest.raises(ClawdError) as info:
        plan_init(**paths | {"agent_id": "work"})
    assert str(info.value) == (
        f"{paths['config_file']}: agent 'work' is not in the config and clawd cannot add it "
        f"without rewriting the file: add {{ id: \"work\", workspace: \"{paths['workspace']}\" "
        f"}} to agents.list, then run clawd init again")
    assert paths["config_file"].read_text() == text
    assert sorted(p.name for p in paths["state_dir"].iterdir()) == ["clawd.json"]


def test_a_config_changed_after_planning_is_not_edited(home):
    paths = layout(home)
    apply(plan_init(**paths))
    actions = plan_init(**paths | {"agent_id": "work"})
    paths["config_file"].write_text("{}")
    with pytest.raises(ClawdError, match="changed while clawd init ran"):
        apply(actions)
    assert paths["config_file"].read_text() == "{}"


# --- through the command line: the agent's entry, and the next step ---------------------------

def run(args, capsys):
    from clawd.frontends import cli
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the command line end to end
def test_cli_init_agent_adds_it_and_the_agent_works(isolated_home, capsys):
    assert run(["init"], capsys)[0] == 0
    code, out, err = run(["init", "--agent", "work"], capsys)
    assert code == 0, err
    assert "added agents 'main' and 'work' to agents.list" in out
    workspace = isolated_home / "clawd-work"
    assert f"Workspace: {workspace}\n" in out and (workspace / "AGENTS.md").is_file()
    assert out.rstrip().endswith("\n    clawd chat --agent work")
    code, out, err = run(["sessions", "--agent", "work"], capsys)
    assert code == 0 and "agent work" in out, err
    code, out, _ = run(["--agent", "work", "init"], capsys)
    assert "0 created" in out and "added" not in out


def test_cli_init_ends_with_lines_that_make_the_model_usable(isolated_home, capsys):
    code, out, _ = run(["init"], capsys)
    step = out[out.index("Next:"):]
    assert step.startswith("Next: anthropic/claude-sonnet-4-6 needs an API key")
    assert "\n    export ANTHROPIC_API_KEY=...\n" in step
    assert step.rstrip().endswith("Then:\n    clawd chat")
    # Doing what it says, the local server way, is enough: the next init says "clawd chat".
    server = step.split("under models.providers:\n")[1].split("\nand under agents.defaults:")[0]
    model = step.split("and under agents.defaults:\n")[1].split("\nThen:")[0]
    config_file = isolated_home / ".clawd" / "clawd.json"
    text = config_file.read_text().replace("    providers: {\n", f"    providers: {{\n{server}\n")
    config_file.write_text(re.sub(r"^ *// model: .*$", model, text, count=1, flags=re.M))
    code, out, err = run(["init"], capsys)
    assert code == 0 and out.endswith("\nNext: clawd chat\n"), err
    assert resolve_agent(load_config(config_file))[1].model == "ollama/llama3.1:8b"



def test_the_local_server_init_suggests_is_the_readmes_example(isolated_home, capsys):
    """The lines init prints for a local server, put where it says, are a valid config, and
    the same one (the same keys and values) as the README's example of a local server."""
    step = run(["init"], capsys)[1]
    server = step.split("under models.providers:\n")[1].split("\nand under agents.defaults:")[0]
    model = step.split("and under agents.defaults:\n")[1].split("\nThen:")[0]
    printed = parse_config(f"{{agents: {{defaults: {{{model}}}}},\n"
                           f"models: {{providers: {{\n{server}\n}}}}}}")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    local = readme[readme.index("**A local OpenAI-compatible server**"):]
    example = re.search(r"```json5\n(.*?)```", local, re.DOTALL)
    assert example, "the README shows a local server's config"
    assert printed.model_dump() == parse_config(example.group(1)).model_dump()
    assert "apiKey" not in server and "maxTokens" not in server

@pytest.mark.parametrize("model, variable", [("anthropic/claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
                                             ("openai/gpt-4o", "OPENAI_API_KEY")])
def test_cli_init_with_the_key_set_says_clawd_chat(isolated_home, capsys, monkeypatch, model,
                                                   variable):
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text(
        f"{{agents: {{defaults: {{model: '{model}'}}}}}}")
    assert f"\n    export {variable}=...\n" in run(["init"], capsys)[1]
    monkeypatch.setenv(variable, "sk-test")
    assert run(["init"], capsys)[1].endswith("\nNext: clawd chat\n")


def test_cli_init_names_what_else_stands_in_the_way(isolated_home, capsys):
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text(
        "{agents: {defaults: {model: 'local/qwen'}}}")
    out = run(["init"], capsys)[1]
    assert "\nNext: unknown provider 'local'" in out and out.endswith("; then clawd chat\n")
