"""Validation errors of the config as one line each, naming the key and the file.

``describe`` turns pydantic's ``ValidationError`` into ``<file>: unknown key 'x' (did you
mean 'y'?)`` or ``<file>: bad value for 'a.b': ...``, plus how many more problems there are:
the first is what to fix, and the nearest valid key of its level is the likely intent.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from clawd.config.schema import Config


def describe(exc: ValidationError, path: Path | str, root: type[BaseModel] = Config) -> str:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden":
        problem = f"unknown key {key!r}"
        guess = _closest_key(root, first["loc"])
        if guess:
            problem += f" (did you mean {guess!r}?)"
    else:
        problem = f"bad value for {key!r}: {first['msg'].removeprefix('Value error, ')}"
    more = len(exc.errors()) - 1
    return f"{path}: {problem}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def _closest_key(root: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The valid key nearest to the unknown last part of ``loc`` at its level, if any is
    close (case is ignored: ``maxtokens`` finds ``maxTokens``)."""
    section: Any = root
    for part in loc[:-1]:  # from the root's type down to the type holding the unknown key
        section = _without_none(section)
        if get_origin(section) in (list, dict):  # ``part`` is an index or a dict's own key
            section = get_args(section)[-1]
        elif isinstance(section, type) and issubclass(section, BaseModel):
            field = next((f for name, f in section.model_fields.items()
                          if part in (f.alias, name)), None)
            section = field and field.annotation
        else:
            return None
    section = _without_none(section)
    if not (isinstance(section, type) and issubclass(section, BaseModel)):
        return None
    keys = {(f.alias or name).lower(): f.alias or name for name, f in section.model_fields.items()}
    close = difflib.get_close_matches(str(loc[-1]).lower(), keys, n=1, cutoff=0.6)
    return keys[close[0]] if close else None


def _without_none(annotation: Any) -> Any:
    """``X`` for ``X | None``; any other type as it is."""
    if get_origin(annotation) in (Union, UnionType):
        return next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation
