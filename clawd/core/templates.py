"""Rendering of the prompt templates shipped in ``clawd/prompts/`` (Jinja2).

Prompts live in files, not string literals: ``render("system.md.j2", **values)``. The
environment is created once, on first use, so importing clawd stays cheap.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


def data_dir(name: str) -> Any:
    """A data folder shipped inside the package: ``clawd/<name>`` (``prompts``,
    ``workspace_template``)."""
    return resources.files("clawd") / name


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    root = data_dir("prompts")
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)),
                              keep_trailing_newline=False, trim_blocks=True,
                              lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render(name: str, **values: Any) -> str:
    """The template ``prompts/<name>`` rendered with ``values``, stripped of outer blank lines."""
    return _environment().get_template(name).render(**values).strip()
