"""What a tool is: a schema for the model and a function that runs it.

A tool function takes the model's arguments and a ``ToolContext`` and returns the result
text. It raises ``ClawdError`` (usually ``ToolError`` or ``SandboxError``) to report a
failure; the loop turns that into an error result for the model and carries on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from clawd.access import Access
from clawd.config import AgentDefaults
from clawd.errors import ToolError
from clawd.messages import ToolSpec


@dataclass
class ToolContext:
    """Everything a tool may use: the workspace, the agent's settings, approval, memory."""

    workspace: Path
    settings: AgentDefaults
    allow_exec: bool = False
    approve: Callable[[str], bool] | None = None
    memory: Any = None  # the agent's memory index, when memory search is on
    today: Callable[[], date] = field(default=date.today)
    access: Access = field(default_factory=Access)  # group session? (see clawd.access)
    flush: bool = False  # the call comes from a memory-flush turn


@dataclass
class Tool:
    spec: ToolSpec
    run: Callable[[dict[str, Any], ToolContext], str]


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON-schema object for tool parameters."""
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def arg(args: dict[str, Any], name: str, kind: type, default: Any = ...) -> Any:
    """A typed argument, or a ``ToolError`` the model can act on."""
    if name not in args or args[name] is None:
        if default is ...:
            raise ToolError(f"missing required argument '{name}'")
        return default
    value = args[name]
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if kind is bool and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        value = value.strip().lower() == "true"  # small models often quote booleans
    if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:
            value = float(value)
        except ValueError:
            pass
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"argument '{name}' must be {kind.__name__}")
    return value
