"""A server's question to the person during a call (MCP elicitation, form mode): the fields it
asks for and the answers typed for them, as pure functions.

A server may ask, in the middle of a tool call, for a few values (a flat object of strings,
numbers, booleans and choices: ``requested_schema``). Where a person can answer (the REPL:
``McpClients.elicit``), each field is asked in turn (``fields``) and each answer read as its
type (``coerce``); where nobody can, or the person gives up, the answer is "decline", and the
server goes on without. The server's words reach the terminal cleaned of control characters
(``clean``): they are its text, not clawd's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
TRUE, FALSE = ("y", "yes", "true", "1"), ("n", "no", "false", "0")


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # string | number | integer | boolean
    description: str
    required: bool
    choices: tuple[str, ...] = ()
    default: Any = None

    def prompt(self) -> str:
        """What the person is asked for this field."""
        said = f"{self.name}" + (f" ({self.description})" if self.description else "")
        hint = ("/".join(self.choices) if self.choices else "y/n" if self.kind == "boolean"
                else self.kind)
        extra = f", default {self.default}" if self.default is not None else (
            "" if self.required else ", Enter to skip")
        return f"{said} [{hint}{extra}]: "


def clean(text: str, limit: int = 500) -> str:
    """A server's text as it may be shown: no control characters, one line, cut."""
    text = " ".join(_CONTROL.sub("", text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def fields(schema: Any) -> list[Field]:
    """The fields of a ``requested_schema`` (a dict, or the SDK's object)."""
    if not isinstance(schema, dict):
        schema = schema.model_dump(by_alias=True, exclude_none=True) if schema else {}
    required = set(schema.get("required") or [])
    found = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        choices = tuple(str(c) for c in prop.get("enum") or ())
        found.append(Field(clean(str(name), 64), str(prop.get("type") or "string"),
                           clean(str(prop.get("description") or prop.get("title") or ""), 200),
                           name in required, choices, prop.get("default")))
    return found


def coerce(field: Field, text: str) -> Any:
    """The answer ``text`` as ``field``'s value (None: skipped); a ``ValueError`` saying what
    is expected when it is not one."""
    text = text.strip()
    if not text:
        if field.default is not None:
            return field.default
        if field.required:
            raise ValueError(f"{field.name} is required")
        return None
    if field.choices:
        if text not in field.choices:
            raise ValueError(f"one of {', '.join(field.choices)}")
        return text
    if field.kind == "boolean":
        if text.lower() in TRUE + FALSE:
            return text.lower() in TRUE
        raise ValueError("y or n")
    if field.kind in ("number", "integer"):
        try:
            return int(text) if field.kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"a{'n integer' if field.kind == 'integer' else ' number'}") from None
    return text
