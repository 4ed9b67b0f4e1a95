"""The workspace template ``clawd init`` lays down, as shipped in the package: its files,
and the lines of the notes' templates that say nothing of the user's own (so an untouched
template is neither indexed nor sent as context)."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from clawd.core.templates import data_dir

if TYPE_CHECKING:  # importlib.resources.abc is Python 3.11's
    from importlib.resources.abc import Traversable

TEMPLATE_DIR = "workspace_template"


def template_files() -> list[tuple[str, Traversable]]:
    """The workspace template as (relative posix path, resource) pairs, sorted by path."""
    found: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            # Editor backups, .DS_Store, caches: never part of a user's workspace.
            if child.name.startswith(".") or child.name == "__pycache__":
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            elif child.is_file():
                found.append((rel, child))

    walk(data_dir(TEMPLATE_DIR), "")
    # Top-level files before the templates/ folder, then alphabetical: a readable plan.
    return sorted(found, key=lambda item: (item[0].count("/"), item[0]))


@functools.cache
def template_lines() -> frozenset[str]:
    """The lines of the notes' templates (MEMORY.md and ``templates/*.md``) that say nothing
    of the user's own: neither headings nor blank, stripped. A note made of these alone is
    the template as it was laid down."""
    lines: set[str] = set()
    for rel, resource in template_files():
        if rel == "MEMORY.md" or rel.startswith("templates/"):
            lines.update(line.strip() for line in resource.read_text(encoding="utf-8")
                         .splitlines() if line.strip() and not line.lstrip().startswith("#"))
    return frozenset(lines)


_LABEL = re.compile(r"^\s*[-*+]\s+(?:\*\*)?(?P<label>[^:*\n]{2,80}?)(?:\*\*)?\s*:(?:\*\*)?\s*$")


@functools.cache
def template_labels() -> frozenset[str]:
    """The labels of the blanks the workspace's templates hold ("- Pronouns:", "- Time
    zone:" in USER.md), lower-cased: a note whose lines are these labels with values
    after them is a template filled in."""
    labels: set[str] = set()
    for rel, resource in template_files():
        if rel.endswith(".md"):
            for line in resource.read_text(encoding="utf-8").splitlines():
                if (found := _LABEL.match(line)) is not None:
                    labels.add(" ".join(found["label"].lower().split()))
    return frozenset(labels)


@functools.cache
def template_text(rel: str) -> str | None:
    """The text of the template file ``rel`` as shipped (None: no such template)."""
    for name, resource in template_files():
        if name == rel:
            return resource.read_text(encoding="utf-8")
    return None
