"""What a session may see and touch: private and group sessions, and ``workspaceAccess``.

A *group* session (a key with ``:group:`` or ``:channel:``, in any case) is private-safe:
MEMORY.md and the daily logs are not injected, and its memory tools and ``read`` reach only
the notes (MEMORY.md, ``memory/``, ``extraPaths`` in the workspace) that
``memorySearch.shareablePaths`` marks as shareable — with none marked (the
default) it is offered no memory tools at all. It never reads clawd's copies of earlier
versions (``.clawd/``), and it may add to private notes but never replace them.
Its memory flush and its session-memory file
are written only where other group sessions cannot read (never into a shareable path).

``workspaceAccess``: ``rw`` everything; ``ro`` no ``write``/``edit`` (and no memory flush,
``/memory add`` or session-memory file); ``none`` no workspace at all: no files injected and
no tool that touches the workspace (``read``, ``write``, ``edit``, ``exec``, the memory tools).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clawd.core.errors import ToolError
from clawd.memory.sources import extra_roots, is_under
from clawd.sessions.store import is_group_key
from clawd.workspace.backups import is_clawd_state
from clawd.workspace.files import MEMORY_DIR, is_private_memory, is_shareable, relative

WRITE_TOOLS = frozenset({"write", "edit"})
WORKSPACE_TOOLS = frozenset({"read", "write", "edit", "exec", "memory_search", "memory_get"})
MEMORY_TOOLS = frozenset({"memory_search", "memory_get"})


@dataclass(frozen=True)
class Access:
    """One session's reach: its ``workspaceAccess`` and whether it is a group session."""

    workspace: str = "rw"  # rw | ro | none
    group: bool = False
    shareable: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # extraPaths inside the workspace: private memory too

    @classmethod
    def of(cls, key: str, settings, workspace: Path) -> Access:
        group = is_group_key(key)
        root = workspace.resolve()
        notes = tuple(relative(root, extra) for extra in
                      extra_roots(root, settings.memory_search) if is_under(root, extra)
                      ) if group else ()
        return cls(settings.workspace_access, group,
                   tuple(settings.memory_search.shareable_paths), notes)

    @property
    def private(self) -> bool:
        """MEMORY.md and the daily logs may enter the context."""
        return not self.group

    @property
    def workspace_files(self) -> bool:
        return self.workspace != "none"

    def withheld(self) -> frozenset[str]:
        """The names of the tools this session is not offered."""
        if self.workspace == "none":
            return WORKSPACE_TOOLS
        hidden: set[str] = set()
        if self.workspace == "ro":
            hidden |= WRITE_TOOLS
        if self.group and not self.shareable:
            hidden |= MEMORY_TOOLS
        return frozenset(hidden)

    def may_read(self, rel_path: str) -> bool:
        """Whether a memory note (workspace-relative path) may be read in this session."""
        return not self.group or is_shareable(rel_path, list(self.shareable))

    def _is_private(self, rel_path: str) -> bool:
        """Private memory a group session may not read (nor replace): MEMORY.md, memory/,
        the extraPaths in the workspace, and clawd's copies of earlier versions (.clawd/)."""
        if not self.group or is_clawd_state(rel_path):
            return self.group
        private = is_private_memory(rel_path) or is_shareable(rel_path, list(self.notes))
        return private and not self.may_read(rel_path)

    def check_read(self, rel_path: str) -> None:
        """Refuse ``read`` of private memory in a group session."""
        if self._is_private(rel_path):
            raise ToolError(f"{rel_path} is private memory: group and channel sessions read "
                            f"only what memorySearch.shareablePaths marks as shareable")

    def check_replace(self, rel_path: str) -> None:
        """Refuse a group session's ``write`` over private memory: it may add to a note
        (``append: true``) but never replace one, nor learn its content by trying."""
        if self._is_private(rel_path):
            raise ToolError(f"{rel_path} is private memory: a group or channel session may add "
                            f"to it (write with append: true) but not replace it")

    def may_save_session(self) -> bool:
        """The session-memory file (``memory/<date>-<slug>.md``) follows the flush's rule."""
        return not (self.group and is_shareable(f"{MEMORY_DIR}/session.md", list(self.shareable)))

    def check_flush_write(self, rel_path: str) -> None:
        """A group session's flush never writes where other group sessions can read."""
        if self.group and is_shareable(rel_path, list(self.shareable)):
            raise ToolError(f"{rel_path} is shareable with group sessions: a group session's "
                            f"memory flush writes only to private notes such as the daily log")


def offered(tools: list, access: Access) -> list:
    """The tools a session is offered (the others are neither described nor run); a group
    session is not offered a tool that is not ``shared`` (an MCP server's, unless the server
    is marked for groups)."""
    hidden = access.withheld()
    return [tool for tool in tools if tool.spec.name not in hidden
            and (access.private or tool.shared)]
