"""A small JSON document of the state folder (people, channels, lockouts, jobs) read and
written whole: read leniently (missing is empty, unreadable says so in one line), written
private (0600) through a temporary file and a rename, under the same lock file discipline
as ``sessions.json``."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawd.core.errors import ClawdError


def read_json(path: Path, advice: str = "fix or remove it") -> Any:
    """What ``path`` holds ({} when there is no such file)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ClawdError(f"{path} cannot be read ({exc}); {advice}") from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """``path``'s lock (``<path>.lock``), held by one process and thread at a time."""
    from clawd.storage.files.locking import locked_file

    with locked_file(path.with_name(path.name + ".lock")):
        yield


def write_private(path: Path, text: str, *, sync: bool = False) -> None:
    """``text`` as ``path``'s whole content, readable by its owner only, replaced at once;
    ``sync``: on the disk before it replaces the old content."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
        if sync:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)


def read_object(path: Path) -> dict[str, Any]:
    """``read_json`` of a document that is one JSON object ({} when it is anything else)."""
    data = read_json(path)
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def changing(path: Path, indent: int = 2) -> Iterator[dict[str, Any]]:
    """The object ``path`` holds, read, changed by the caller and written whole, under its
    lock."""
    with locked(path):
        data = read_object(path)
        yield data
        write_private(path, json.dumps(data, indent=indent) + "\n")
