"""What ``clawd init`` lays down: the state dir, an agent's sessions dir, a starter config and
the workspace copied from ``workspace_template/`` (the bootstrap files, ``MEMORY.md``, note
templates in ``templates/``, outside ``memory/`` so they are never indexed as memories) and
an empty ``memory/``.

``plan_init`` only looks at the disk and returns the list of ``Action``s (what it would create,
and what already exists and is kept), so a dry run is the plan itself. ``apply`` carries the
plan out. Nothing is overwritten: files are opened in exclusive-create mode, so even a file
that appears between planning and applying is kept as it is. The starter config is written
only when no config file exists; when the chosen workspace or agent id differ from the
defaults, the starter records them so later commands find the same workspace. The one file
init may change is an existing config that lacks the agent: its ``agents.list`` entry (with
the workspace) is inserted as text, keeping every comment (``clawd.config.text``), once a
copy of the file as it was is saved beside it (``clawd.json.bak``, never replacing an older
copy); when that is not possible, init stops with the exact entry to paste.
``init_target`` picks the agent and workspace; ``local_server_example`` is the starter's
example of a local server, for the next step ``clawd init`` prints.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Literal

from clawd.config import (
    DEFAULT_AGENT_ID,
    AgentDefaults,
    Config,
    load_config,
    own_workspace,
    parse_config,
    resolve_agent,
)
from clawd.config.text import add_agent, agent_snippet, json5_string
from clawd.core.errors import ClawdError
from clawd.workspace.files import MEMORY_DIR
from clawd.workspace.template import TEMPLATE_DIR, template_files

log = logging.getLogger(__name__)

STARTER_CONFIG = "starter_config.json5"
# Same rule as agents.list[].id: the id becomes a directory name, so nothing like "../x".
AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Transcripts and the config (which may hold API keys) are private to the user.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

Status = Literal["create", "created", "exists"]


@dataclass(frozen=True)
class Action:
    """One thing init creates or adds, or found already there.

    ``status`` is ``"create"`` in a plan, ``"created"`` once applied, and ``"exists"`` for a
    path that was already there and is kept untouched. ``source`` names the package resource
    a file comes from (``None`` for directories); ``content`` is the bytes to write. An
    ``edit`` adds agents to an existing config: ``source`` says which, ``content`` is the
    new text, ``original`` the text it was planned over and ``backup`` where that is kept.
    """

    kind: Literal["dir", "file", "edit"]
    path: Path
    source: str | None = None
    status: Status = "create"
    content: bytes | None = field(default=None, repr=False)
    mode: int | None = None
    original: bytes | None = field(default=None, repr=False)
    backup: Path | None = None

    def describe(self) -> str:
        """One line for a front end, e.g. ``created file ~/clawd/AGENTS.md``."""
        if self.kind == "edit":
            added = "would add" if self.status == "create" else "added"
            return f"{added} {self.source} in {self.path} (old version kept as {self.backup})"
        verbs = {"create": "would create", "created": "created", "exists": "exists, kept"}
        origin = f" (from {self.source})" if self.source and self.status != "exists" else ""
        return f"{verbs[self.status]} {self.kind} {self.path}{origin}"


def init_target(config: Config | None, agent_id: str | None, workspace: str | None
                ) -> tuple[str, Path]:
    """The agent init is for (``agent_id``, else the config's default agent) and its
    workspace: ``workspace`` if given, else the agent's in the config, else, for an agent the
    config does not list yet, the one it would get there (``<defaults.workspace>-<id>``)."""
    if config is None:
        agent_id = agent_id or DEFAULT_AGENT_ID
        default = AgentDefaults().workspace
    else:
        agent_id = agent_id or config.default_agent_id()
        default = (resolve_agent(config, agent_id)[1].workspace
                   if agent_id in config.agent_ids()
                   else own_workspace(config.agents.defaults.workspace, agent_id))
    return agent_id, _absolute(Path(workspace or default))


def plan_init(state_dir: Path, config_file: Path, workspace: Path,
              agent_id: str = DEFAULT_AGENT_ID) -> list[Action]:
    """Everything init would create for ``agent_id``, in creation order; reads the disk only.

    Raises ``ClawdError`` for an invalid agent id, when a path that must be a directory is a
    file (or the reverse), for an invalid existing config, and when an existing config lacks
    the agent and its entry cannot be added as text (the message gives the entry to paste).
    """
    if not AGENT_ID_RE.match(agent_id or ""):
        raise ClawdError(f"invalid agent id {agent_id!r} (use letters, digits, '-' and '_', "
                         f"starting with a letter or digit)")
    state_dir, config_file = _absolute(state_dir), _absolute(config_file)
    workspace = _absolute(workspace)
    actions = [
        _dir(state_dir, PRIVATE_DIR_MODE),
        _dir(state_dir / "agents" / agent_id / "sessions", PRIVATE_DIR_MODE),
    ]
    if config_file.parent != state_dir:
        actions.append(_dir(config_file.parent))
    actions.append(_file(config_file, STARTER_CONFIG,
                         render_starter_config(workspace, agent_id).encode("utf-8"),
                         PRIVATE_FILE_MODE))
    if actions[-1].status == "exists":
        actions.extend(_agent_edit(config_file, agent_id, workspace))
    actions.append(_dir(workspace))
    # memory/ holds only the user's notes (everything in it is indexed): created empty.
    actions.append(_dir(workspace / MEMORY_DIR))
    planned = {workspace, workspace / MEMORY_DIR}
    for rel, resource in template_files():
        target = workspace / rel
        if target.parent not in planned:
            planned.add(target.parent)
            actions.append(_dir(target.parent))
        actions.append(_file(target, f"{TEMPLATE_DIR}/{rel}", resource.read_bytes()))
    return actions


def apply(actions: list[Action]) -> list[Action]:
    """Carry out a plan; returns each action with its outcome (``created`` or ``exists``)."""
    done = []
    for action in actions:
        if action.status != "create":
            done.append(action)
            continue
        if action.kind == "edit":
            _edit(action)
            log.info("added %s in %s", action.source, action.path)
            done.append(replace(action, status="created"))
            continue
        created = _make_dir(action) if action.kind == "dir" else _write_new(action)
        if created:
            log.info("created %s %s", action.kind, action.path)
        else:
            log.info("%s %s exists, kept", action.kind, action.path)
        done.append(replace(action, status="created" if created else "exists"))
    return done


def starter_config_text() -> str:
    """The commented starter config exactly as shipped (every setting at its default)."""
    return resources.files("clawd").joinpath(STARTER_CONFIG).read_text(encoding="utf-8")


def render_starter_config(workspace: Path, agent_id: str = DEFAULT_AGENT_ID) -> str:
    """The starter config, recording ``workspace`` and ``agent_id`` where not the defaults.

    Without this, ``clawd init --workspace DIR`` would lay the files down in DIR while
    every later command still looked in the default workspace.
    """
    text = starter_config_text()
    if _absolute(workspace) != _absolute(Path(AgentDefaults().workspace)):
        setting = f"workspace: {json5_string(_absolute(workspace))},"
        text = _set_line(text, r"^(\s*)// workspace: .*$", lambda indent, _: indent + setting)
    if agent_id != DEFAULT_AGENT_ID:
        setting = f"list: [{{ id: {json5_string(agent_id)} }}],"
        text = _set_line(text, r"^(\s*)(// Several isolated agents.*)$",
                         lambda indent, line: f"{indent}{setting}\n{indent}{line}")
    return text


def _set_line(text: str, pattern: str, build: Callable[[str, str], str]) -> str:
    """Replace the first line matching ``pattern`` (group 1: its indent) with ``build``'s."""
    new, count = re.subn(pattern, lambda m: build(m.group(1), m.group(0).strip()), text,
                         count=1, flags=re.MULTILINE)
    if count != 1:  # the shipped starter and this code disagree: fail loudly in tests
        raise ClawdError(f"starter config has no line matching {pattern!r}")
    return new


def local_server_example() -> tuple[str, str]:
    """The starter config's commented example of a local OpenAI-compatible server, as a
    ``models.providers`` member to paste, and the model reference it declares."""
    lines = starter_config_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "// ollama: {")
    indent = lines[start].index("//") + len("// ")
    block = []
    for line in lines[start:]:
        block.append(line[indent:])
        if line.strip() == "// },":
            break
    snippet = "\n".join(block)
    providers = parse_config(f"{{models: {{providers: {{{snippet}}}}}}}").models.providers
    name, declared = next(iter(providers.items()))
    return snippet, f"{name}/{declared.models[0].id}"


def _agent_edit(config_file: Path, agent_id: str, workspace: Path) -> list[Action]:
    """The edit that adds ``agent_id`` to an existing config (none if it is there)."""
    config = load_config(config_file)
    if agent_id in config.agent_ids():
        return []
    original = config_file.read_bytes()
    edited = add_agent(original.decode("utf-8"), config, agent_id, workspace)
    if edited is None:
        raise ClawdError(f"{config_file}: agent {agent_id!r} is not in the config and clawd "
                         f"cannot add it without rewriting the file: "
                         f"{agent_snippet(config, agent_id, workspace)}, then run clawd "
                         f"init again")
    # without a list, the implicit default agent gets its entry too (see agent_entries)
    added = [agent_id] if config.agents.entries else [DEFAULT_AGENT_ID, agent_id]
    what = f"agent{'s' * (len(added) > 1)} {' and '.join(map(repr, added))} to agents.list"
    return [Action("edit", config_file, what, content=edited.encode("utf-8"),
                   original=original, backup=_backup_path(config_file))]


def _backup_path(path: Path) -> Path:
    """``clawd.json.bak``, else the first free ``clawd.json.bak.N``: no backup is replaced."""
    backup, n = path.with_name(f"{path.name}.bak"), 1
    while _exists(backup):
        n += 1
        backup = path.with_name(f"{path.name}.bak.{n}")
    return backup


def _edit(action: Action) -> None:
    """Carry out an ``edit``: the old text kept as ``backup``, the new one swapped in whole
    (written beside it, then renamed over it), with the file's own permissions."""
    target = action.path.resolve()  # a symlinked config is edited where it lives
    if target.read_bytes() != action.original:
        raise ClawdError(f"{action.path} changed while clawd init ran; run it again")
    assert action.backup is not None  # an edit always plans its backup
    if not _write_new(Action("file", action.backup, content=action.original,
                             mode=PRIVATE_FILE_MODE)):
        raise ClawdError(f"{action.backup} appeared while clawd init ran; run it again")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    if not _write_new(Action("file", temporary, content=action.content,
                             mode=stat.S_IMODE(target.stat().st_mode))):
        raise ClawdError(f"{temporary} is in the way; remove it and run clawd init again")
    os.replace(temporary, target)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def _exists(path: Path) -> bool:
    # lexists: a dangling symlink is still "there" and must not be written through.
    return os.path.lexists(path)


def _dir(path: Path, mode: int | None = None) -> Action:
    if _exists(path) and not path.is_dir():
        raise ClawdError(f"{path} exists and is not a directory")
    return Action("dir", path, status="exists" if _exists(path) else "create", mode=mode)


def _file(path: Path, source: str, content: bytes, mode: int | None = None) -> Action:
    if path.is_dir():
        raise ClawdError(f"{path} is a directory, expected a file")
    return Action("file", path, source, "exists" if _exists(path) else "create", content, mode)


def _make_dir(action: Action) -> bool:
    if _exists(action.path):
        return False
    action.path.parent.mkdir(parents=True, exist_ok=True)
    try:
        action.path.mkdir(mode=action.mode if action.mode is not None else 0o777)
    except FileExistsError:
        return False
    return True


def _write_new(action: Action) -> bool:
    action.path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(action.path, flags, action.mode if action.mode is not None else 0o666)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(action.content or b"")
    except BaseException:
        # A half-written file would be "exists, kept" forever after; remove it instead.
        action.path.unlink(missing_ok=True)
        raise
    return True
