"""Moving a files home into a database and back: ``migrate`` and ``export``.

``migrate`` reads one agent's embedded layout (its ``sessions/`` folder: ``sessions.json``,
the transcripts, ``deleted/``; its records beside it; its workspace with the versions kept
under ``.clawd/history``) and writes it into a ``PgStorage``, then reads every transcript
line and file back and compares SHA-256 digests. It never changes a file (a store it
cannot parse is rebuilt in memory from the transcripts, as the file store would). An item
already in the database with the same content is left as it is, so a second run is safe;
one that differs is reported and not touched. ``dry_run`` counts without writing (into a
database with no schema yet, against ``Nothing``).

``export`` writes an agent's storage as the embedded layout under a folder: transcripts and
files byte for byte (each transcript line as it was written, ``\\n`` after each; a migrated
file with the permission bits it had), the session store with ``sessionFile`` naming the
exported transcripts, the records, the kept versions and the ``.clawd/.gitignore`` that
keeps them out of git. The memory index is not moved either way: it is rebuilt from the
notes. Its embedding cache is carried into the database's (``carry_vectors``), so notes a
files home had embedded are not embedded again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from clawd.core.errors import ClawdError
from clawd.sessions.store import normalize_key
from clawd.storage.files.transcripts import DELETED_DIR, rebuild
from clawd.workspace.backups import HISTORY_DIR, STATE_DIR, ignore_records

log = logging.getLogger(__name__)
SKIPPED_FOLDERS = {".git"}  # a repository's own records are not the assistant's files


@dataclass
class Moved:
    """What one agent's move did (or, dry, would do)."""

    agent_id: str
    sessions: int = 0  # session store entries
    transcripts: int = 0
    lines: int = 0
    files: int = 0
    bytes: int = 0
    versions: int = 0
    records: int = 0
    vectors: int = 0  # embedding-cache entries carried over
    unchanged: int = 0  # items already there, the same
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        said = (f"agent {self.agent_id}: {_n(self.sessions, 'session')}, "
                f"{_n(self.transcripts, 'transcript')} ({_n(self.lines, 'line')}), "
                f"{_n(self.files, 'file')} ({_n(self.bytes, 'byte')}), "
                f"{_n(self.versions, 'kept version')}, {_n(self.records, 'record')}")
        if self.vectors:
            said += f", {_n(self.vectors, 'cached vector')}"
        if self.unchanged:
            said += f"; {self.unchanged} already there"
        return said + "".join(f"\n  problem: {p}" for p in self.problems)


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def digest(parts: list[bytes]) -> str:
    return hashlib.sha256(b"\n".join(parts)).hexdigest()


def transcript_lines(raw: bytes) -> list[str]:
    """A transcript file's lines as they will be stored (blank ones left out; bytes that are
    not UTF-8, as a torn write leaves, replaced)."""
    return [line.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
            for line in raw.split(b"\n") if line.strip()]


def workspace_files(root: Path) -> dict[str, Path]:
    """Every regular file of the workspace by workspace-relative path (``.clawd/`` and
    ``.git/`` left out; links are not followed)."""
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in SKIPPED_FOLDERS | {STATE_DIR} or path.is_symlink():
            continue
        if path.is_file():
            found[rel.as_posix()] = path
    return found


def kept_versions(root: Path) -> list[tuple[str, str, Path]]:
    """(file, stamp, where) of every version kept under ``.clawd/history``."""
    base = root / HISTORY_DIR
    if not base.is_dir():
        return []
    return [(p.parent.relative_to(base).as_posix(), p.stem, p)
            for p in sorted(base.rglob("*.md")) if p.is_file()]


def store_entries(sessions_dir: Path) -> dict[str, Any]:
    """``sessions.json`` as it is, or (missing or unreadable) rebuilt from the transcripts;
    the file is never written."""
    try:
        data = orjson.loads((sessions_dir / "sessions.json").read_bytes())
        if isinstance(data, dict):
            return {normalize_key(k): v for k, v in data.items() if isinstance(v, dict)}
    except (OSError, ValueError):
        pass
    return dict(rebuild(sessions_dir))


class Nothing:
    """An agent of a database with no schema yet, as ``migrate`` reads it: it holds nothing.
    A dry run compares with it, so it creates no schema to read an empty one."""

    def __init__(self, agent_id: str):
        self.agent_id = agent_id
        self.sessions = self.files = self.backups = self

    def session_ids(self) -> list[str]:
        return []

    deleted_ids = session_ids

    def entries(self) -> dict[str, Any]:
        return {}

    def session_file(self, session_id: str) -> str:
        return session_id

    def read_bytes(self, rel: str) -> bytes | None:
        return None

    def versions(self, everything: bool = False) -> list[Any]:
        return []


def migrate(sessions_dir: Path, workspace: Path, target: Any, *, dry_run: bool) -> Moved:
    """Copy one agent's files (``sessions_dir``, ``workspace``) into ``target``, a
    ``PgStorage``; verified by digest unless ``dry_run``."""
    moved = Moved(target.agent_id)
    known = set(target.session_ids()) | set(target.deleted_ids())
    for folder, deleted in ((sessions_dir, False), (sessions_dir / DELETED_DIR, True)):
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            _transcript(path, target, moved, dry_run, deleted, known)
    entries = store_entries(sessions_dir)
    stored = target.sessions.entries()
    for key, entry in entries.items():
        entry = {**entry, "sessionFile": target.session_file(str(entry.get("sessionId")))}
        if stored.get(key) == entry:
            moved.unchanged += 1
        elif key in stored:
            moved.problems.append(f"session {key}: the database has another entry; kept it")
        else:
            moved.sessions += 1
            if not dry_run:
                target.sessions.update(key, lambda _old, e=entry: e, touch=False)
    for name, value in _records(sessions_dir.parent).items():
        moved.records += 1
        if not dry_run:
            target.records.put(name, value)
    for rel, path in workspace_files(workspace).items():
        data = path.read_bytes()
        there = target.files.read_bytes(rel)
        if there == data:
            moved.unchanged += 1
            continue
        if there is not None:
            moved.problems.append(f"{rel}: the database holds other content; kept it")
            continue
        moved.files, moved.bytes = moved.files + 1, moved.bytes + len(data)
        if not dry_run:
            target.files.write_bytes(rel, data, mode=stat.S_IMODE(path.stat().st_mode))
            if target.files.read_bytes(rel) != data:
                moved.problems.append(f"{rel}: read back different; check the database")
    have = {(v.name, v.stamp) for v in target.backups.versions(everything=True)}
    for name, stamp, path in kept_versions(workspace):
        if (name, stamp) in have:
            moved.unchanged += 1
            continue
        moved.versions += 1
        if not dry_run:
            target.backups.put(name, stamp, path.read_bytes())
    return moved


def carry_vectors(index_file: Path, target: Any, moved: Moved, *, dry_run: bool) -> None:
    """The embedding cache of the agent's SQLite index file (if it has one) into the
    database's cache, whose entries are kept where both have one; the file is only read."""
    import apsw

    if not index_file.is_file():
        return
    try:
        conn = apsw.Connection(str(index_file), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows = conn.execute("SELECT provider, model, fingerprint, hash, dims, embedding "
                                "FROM embedding_cache").fetchall()
        finally:
            conn.close()
    except apsw.Error as exc:
        moved.problems.append(f"{index_file}: its embedding cache could not be read ({exc}); "
                              f"the notes will be embedded again")
        return
    moved.vectors = len(rows) if dry_run else target.memory_index().cache_import(rows)


def _transcript(path: Path, target: Any, moved: Moved, dry_run: bool, deleted: bool,
                known: set[str]) -> None:
    session_id = path.stem
    lines = transcript_lines(path.read_bytes())
    if session_id in known:
        there = target.transcript(session_id).raw_lines()
        if there == lines:
            moved.unchanged += 1
        else:
            moved.problems.append(f"transcript {session_id}: the database holds another "
                                  f"one; kept it")
        return
    moved.transcripts, moved.lines = moved.transcripts + 1, moved.lines + len(lines)
    if dry_run:
        return
    log_ = target.transcript(session_id)
    log_.append_lines(lines)
    back = log_.raw_lines()
    if digest([b.encode() for b in back]) != digest([b.encode() for b in lines]):
        moved.problems.append(f"transcript {session_id}: read back different; check the "
                              f"database")
    if deleted:
        target.set_aside(session_id)


def _records(agent_dir: Path) -> dict[str, dict[str, Any]]:
    """The agent's records: the ``<name>.json`` files beside its sessions."""
    found = {}
    for path in sorted(agent_dir.glob("*.json")) if agent_dir.is_dir() else []:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(value, dict):
            found[path.stem] = value
    return found


def export(source: Any, home: Path, workspace: Path) -> Moved:
    """Write agent ``source`` (a ``PgStorage``) as the embedded layout: its sessions under
    ``home/agents/<id>/sessions``, its records beside them, its files in ``workspace``."""
    moved = Moved(source.agent_id)
    sessions_dir = home / "agents" / source.agent_id / "sessions"
    for folder in (sessions_dir, sessions_dir / DELETED_DIR, workspace):
        folder.mkdir(parents=True, exist_ok=True)
    if any(sessions_dir.glob("*.jsonl")) or any(p for p in workspace.iterdir()):
        raise ClawdError(f"{sessions_dir} or {workspace} is not empty; export into new "
                         f"folders")
    live = set(source.session_ids())
    for session_id in sorted(live | set(source.deleted_ids())):
        text = source.transcript(session_id).raw_text()
        folder = sessions_dir if session_id in live else sessions_dir / DELETED_DIR
        (folder / f"{session_id}.jsonl").write_bytes(text.encode())
        moved.transcripts, moved.lines = moved.transcripts + 1, moved.lines + text.count("\n")
    entries = {key: {**entry, "sessionFile": str(sessions_dir / f"{entry.get('sessionId')}"
                                                               f".jsonl")}
               for key, entry in source.sessions.entries().items()}
    (sessions_dir / "sessions.json").write_bytes(orjson.dumps(entries,
                                                              option=orjson.OPT_INDENT_2))
    moved.sessions = len(entries)
    for name, value in source.records.items().items():
        (sessions_dir.parent / f"{name}.json").write_text(json.dumps(value) + "\n")
        moved.records += 1
    for rel in source.files.paths():
        data = source.files.read_bytes(rel) or b""
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if (mode := source.files.mode(rel)) is not None:
            target.chmod(mode)
        moved.files, moved.bytes = moved.files + 1, moved.bytes + len(data)
    for version in source.backups.versions(everything=True):
        target = workspace / HISTORY_DIR / version.name / f"{version.stamp}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.backups.data(version))
        moved.versions += 1
    if moved.versions:  # as the files store does when it keeps a version
        ignore_records(workspace)
    return moved
