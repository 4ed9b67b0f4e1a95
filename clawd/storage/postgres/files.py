"""The workspace in PostgreSQL: ``PgFiles`` (``WorkspaceFiles``) and ``PgBackups``
(``Backups``).

A file is a ``workspace_files`` row: its path (workspace-relative, forward slashes), its
bytes, a version counted up by every change, when it changed, and its permission bits
when it came from a files workspace. Folders are the paths'
prefixes: ``memory`` is a folder while a file lies under it. Paths follow the folder's
rules without a folder to resolve them in: ``..`` and ``.`` are folded, and a path that is
empty, absolute, holds NUL or climbs out of the workspace is a ``SandboxError``. An append
is one statement (``data || new``), so two writers never lose each other's lines; a write
replaces the row in one statement. Kept versions are ``file_versions`` rows, named and pruned
as ``workspace.backups`` names and prunes its copies.
"""

from __future__ import annotations

import contextlib
import posixpath
from datetime import datetime
from typing import TYPE_CHECKING

from clawd.core.errors import ClawdError, SandboxError
from clawd.workspace.backups import (
    KEEP,
    PROTECTED,
    STAMP,
    find_version,
    kept_name,
    next_stamp,
    stamp_order,
)
from clawd.workspace.interface import Stat, Version

if TYPE_CHECKING:
    from clawd.storage.postgres.connections import Connections


def canonical_path(path: str) -> str:
    """The workspace-relative path ``path`` names (``.`` for the workspace itself)."""
    if not isinstance(path, str) or not path.strip():
        raise SandboxError("a path is required")
    if "\x00" in path:
        raise SandboxError(f"invalid path: {path!r}")
    if path.startswith(("/", "~")):
        raise SandboxError(f"absolute paths are not allowed: {path} (use a path relative to "
                           f"the workspace)")
    folded = posixpath.normpath(path)
    if folded == ".." or folded.startswith("../"):
        raise SandboxError(f"path escapes the workspace: {path}")
    return folded


class PgFiles:
    """One agent's workspace files: ``workspace_files`` rows."""

    def __init__(self, db: Connections, agent_id: str):
        self.db, self.agent_id = db, agent_id
        self.location = f"{db.location} (workspace of agent {agent_id})"

    def canonical(self, path: str) -> str:
        return canonical_path(path)

    def stat(self, path: str) -> Stat | None:
        name = canonical_path(path)
        if name == ".":
            return Stat("folder", 0)
        with self.db.connection() as conn:
            row = conn.execute("SELECT length(data) FROM workspace_files WHERE agent_id = %s "
                               "AND path = %s", (self.agent_id, name)).fetchone()
            if row:
                return Stat("file", row[0])
            under = conn.execute("SELECT 1 FROM workspace_files WHERE agent_id = %s AND "
                                 "starts_with(path, %s) LIMIT 1",
                                 (self.agent_id, name + "/")).fetchone()
        return Stat("folder", 0) if under else None

    def read(self, path: str, *, exact: bool = False) -> str | None:
        data = self.read_bytes(canonical_path(path))
        if data is None:
            return None
        return data.decode("utf-8") if exact else data.decode("utf-8", errors="replace")

    def read_bytes(self, name: str) -> bytes | None:
        """The bytes of the file ``name`` (canonical), or None."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT data FROM workspace_files WHERE agent_id = %s AND "
                               "path = %s", (self.agent_id, name)).fetchone()
        return bytes(row[0]) if row else None

    def read_many(self, paths: list[str]) -> dict[str, str | None]:
        names: dict[str, str] = {}
        for path in paths:
            with contextlib.suppress(SandboxError):
                names[path] = canonical_path(path)
        with self.db.connection() as conn:
            rows = dict(conn.execute("SELECT path, data FROM workspace_files WHERE agent_id = "
                                     "%s AND path = ANY(%s)",
                                     (self.agent_id, list(set(names.values())))).fetchall())
        return {path: bytes(rows[name]).decode("utf-8", errors="replace") if name in rows
                else None for path, name in names.items()}

    def append(self, path: str, text: str) -> None:
        name = self._writable(path)
        with self.db.connection() as conn:
            conn.execute("INSERT INTO workspace_files (agent_id, path, data) VALUES (%s, %s, %s) "
                         "ON CONFLICT (agent_id, path) DO UPDATE SET "
                         "data = workspace_files.data || EXCLUDED.data, "
                         "version = workspace_files.version + 1, mtime = now()",
                         (self.agent_id, name, text.encode("utf-8")))

    def create(self, path: str, text: str) -> None:
        name = self._writable(path)
        with self.db.connection() as conn:
            made = conn.execute("INSERT INTO workspace_files (agent_id, path, data) "
                                "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                                (self.agent_id, name, text.encode("utf-8"))).fetchone()
        if not made:
            raise FileExistsError(f"{name} exists")

    def write(self, path: str, text: str) -> None:
        self.write_bytes(self._writable(path), text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes, mtime: datetime | None = None,
                    mode: int | None = None) -> None:
        """Replace (or create) the file ``name`` (canonical) with ``data``; ``mode``: its
        permission bits (None: a new file's default, an old one's kept)."""
        with self.db.connection() as conn:
            conn.execute("INSERT INTO workspace_files (agent_id, path, data, mtime, mode) "
                         "VALUES (%s, %s, %s, coalesce(%s, now()), %s) "
                         "ON CONFLICT (agent_id, path) DO UPDATE SET data = EXCLUDED.data, "
                         "version = workspace_files.version + 1, mtime = EXCLUDED.mtime, "
                         "mode = coalesce(EXCLUDED.mode, workspace_files.mode)",
                         (self.agent_id, name, data, mtime, mode))

    def mode(self, name: str) -> int | None:
        """The permission bits of the file ``name`` (canonical) as migrated, or None."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT mode FROM workspace_files WHERE agent_id = %s AND "
                               "path = %s", (self.agent_id, name)).fetchone()
        return row[0] if row else None

    def writable(self) -> bool:
        return True

    def listing(self, folder: str) -> list[str]:
        return sorted(self._under(folder)[0])

    def entries(self, folder: str) -> list[str]:
        files, folders = self._under(folder)
        return sorted([posixpath.basename(f) for f in files] + [f"{d}/" for d in folders])

    def paths(self) -> list[str]:
        """Every file of the workspace, sorted."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT path FROM workspace_files WHERE agent_id = %s "
                                "ORDER BY path", (self.agent_id,)).fetchall()
        return [row[0] for row in rows]

    def _under(self, folder: str) -> tuple[list[str], set[str]]:
        """The files directly in ``folder`` and the names of the folders in it."""
        name = canonical_path(folder)
        prefix = "" if name == "." else name + "/"
        with self.db.connection() as conn:
            rows = conn.execute("SELECT path FROM workspace_files WHERE agent_id = %s AND "
                                "starts_with(path, %s)", (self.agent_id, prefix)).fetchall()
        files, folders = [], set()
        for (path,) in rows:
            rest = path[len(prefix):]
            if "/" in rest:
                folders.add(rest.split("/", 1)[0])
            else:
                files.append(path)
        return files, folders

    def _writable(self, path: str) -> str:
        """The canonical ``path``, when a file may be written there: not the workspace, not
        a folder, and no file where one of its folders would be."""
        name = canonical_path(path)
        if name == ".":
            raise IsADirectoryError(f"{path} is the workspace")
        parents = [name.rsplit("/", depth)[0] for depth in range(1, name.count("/") + 1)]
        with self.db.connection() as conn:
            clash = conn.execute("SELECT path FROM workspace_files WHERE agent_id = %s AND "
                                 "(path = ANY(%s) OR starts_with(path, %s)) LIMIT 1",
                                 (self.agent_id, parents, name + "/")).fetchone()
        if clash and clash[0] in parents:
            raise NotADirectoryError(f"{clash[0]} is a file, not a folder")
        if clash:
            raise IsADirectoryError(f"{name} is a folder")
        return name


class PgBackups:
    """Kept versions of one agent's files: ``file_versions`` rows."""

    def __init__(self, db: Connections, agent_id: str, files: PgFiles):
        self.db, self.agent_id, self.files = db, agent_id, files
        self.location = f"{db.location} (kept versions of agent {agent_id})"

    def keep(self, path: str, now: datetime) -> Version:
        name = canonical_path(path)
        data = self.files.read_bytes(name)
        if data is None:
            raise FileNotFoundError(f"{name} does not exist")
        with self.db.connection() as conn, conn.transaction():
            taken = [row[0] for row in conn.execute(
                "SELECT stamp FROM file_versions WHERE agent_id = %s AND path = %s AND "
                "starts_with(stamp, %s) FOR UPDATE",
                (self.agent_id, name, now.strftime(STAMP))).fetchall()]
            stamp = next_stamp(now, taken)
            conn.execute("INSERT INTO file_versions (agent_id, path, stamp, data) "
                         "VALUES (%s, %s, %s, %s)", (self.agent_id, name, stamp, data))
        for old in self.versions(name)[:-KEEP]:
            with self.db.connection() as conn:
                conn.execute("DELETE FROM file_versions WHERE agent_id = %s AND path = %s "
                             "AND stamp = %s", (self.agent_id, old.name, old.stamp))
        return Version(name, stamp, len(data))

    def put(self, name: str, stamp: str, data: bytes) -> None:
        """Keep ``data`` as the version ``stamp`` of ``name`` (a migrated copy)."""
        with self.db.connection() as conn:
            conn.execute("INSERT INTO file_versions (agent_id, path, stamp, data) "
                         "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (self.agent_id, name, stamp, data))

    def versions(self, name: str | None = None, *, everything: bool = False) -> list[Version]:
        """The kept versions (of ``name``; of the files clawd keeps; with ``everything``,
        of whatever a migrated workspace kept)."""
        with self.db.connection() as conn:
            if name:
                rows = conn.execute("SELECT path, stamp, length(data) FROM file_versions "
                                    "WHERE agent_id = %s AND path = %s",
                                    (self.agent_id, kept_name(name))).fetchall()
            else:
                rows = conn.execute("SELECT path, stamp, length(data) FROM file_versions "
                                    "WHERE agent_id = %s", (self.agent_id,)).fetchall()
        found = [Version(path, stamp, size) for path, stamp, size in rows
                 if name or everything or path in PROTECTED or path.startswith("memory/")]
        return sorted(found, key=lambda v: (v.name, stamp_order(v.stamp)))

    def find(self, ref: str) -> Version:
        return find_version(self, ref)

    def text(self, version: Version) -> str:
        return self.data(version).decode("utf-8", errors="replace")

    def where(self, version: Version) -> str:
        return f"{self.location}: {version.ref}"

    def restore(self, version: Version, now: datetime) -> Version | None:
        data = self.data(version)
        saved = (self.keep(version.name, now)
                 if self.files.read_bytes(version.name) is not None else None)
        self.files.write_bytes(version.name, data)
        return saved

    def data(self, version: Version) -> bytes:
        with self.db.connection() as conn:
            row = conn.execute("SELECT data FROM file_versions WHERE agent_id = %s AND "
                               "path = %s AND stamp = %s",
                               (self.agent_id, version.name, version.stamp)).fetchone()
        if row is None:
            raise ClawdError(f"no version {version.ref}")
        return bytes(row[0])
