"""What a tool is, declared once: a typed function whose signature gives the schema.

``@tool(name, description)`` turns a function ``fn(ctx, *, arg: type = default, ...)`` into a
``Tool``: its JSON schema for the model comes from the parameters (their types, defaults and
``Annotated[..., Param(...)]`` descriptions), and the model's arguments are parsed against the
same declaration before the function is called, ``Param`` bounds included (as simonw/llm and
pydantic-ai build tools from signatures). A tool function raises ``ClawdError`` (usually
``ToolError`` or ``SandboxError``) to report a failure; the loop turns that into an error
result for the model and carries on.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any

from clawd.config import AgentDefaults
from clawd.context.access import Access
from clawd.core.cancel import CancelToken
from clawd.core.errors import ToolError
from clawd.core.messages import ImagePart, ToolSpec
from clawd.memory.interface import Memory
from clawd.workspace.interface import Backups, WorkspaceFiles

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass
class ToolContext:
    """Everything a tool may use: the workspace (its files and their kept versions), the
    agent's settings, approval, memory."""

    workspace: Path
    settings: AgentDefaults
    allow_exec: bool = False
    approve: Callable[[str], bool] | None = None
    confirm: Callable[[str], bool] | None = None  # for MCP tools, where not ``approve``
    memory: Memory | None = None  # the agent's memory index, when memory search is on
    today: Callable[[], date] = field(default=date.today)
    access: Access = field(default_factory=Access)  # group session? (see clawd.context.access)
    flush: bool = False  # the call comes from a memory-flush turn
    files: WorkspaceFiles = field(kw_only=True)  # the workspace's files
    backups: Backups = field(kw_only=True)  # their kept versions
    # the turn's stop: a tool that waits checks it and raises ``Cancelled`` (``core.cancel``)
    cancel: CancelToken = field(default_factory=CancelToken, kw_only=True)
    # where the call is made (the ``schedule`` tool keeps them with a job): the agent, the
    # session key, the names of the tools the session is offered, the runtime's clock
    agent_id: str = field(default="main", kw_only=True)
    session_key: str = field(default="", kw_only=True)
    offered: tuple[str, ...] = field(default=(), kw_only=True)
    now: Callable[[], datetime] = field(default=lambda: datetime.now().astimezone(),
                                        kw_only=True)


@dataclass
class ToolOutput:
    """A result that is more than text: images beside it, or an error said as a result
    (a tool that raises ``ToolError`` gets the same)."""

    text: str
    images: list[ImagePart] = field(default_factory=list)
    is_error: bool = False


@dataclass
class Tool:
    """A tool the model can call: what it is told (``spec``) and what runs (``run``).
    ``shared``: offered in group sessions too (as far as ``Access`` allows)."""

    spec: ToolSpec
    run: Callable[[dict[str, Any], ToolContext], str | ToolOutput]
    shared: bool = True

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
        return self.run(args, ctx)


@dataclass(frozen=True)
class Param:
    """What the schema says of one parameter, beyond its type and default."""

    description: str | None = None
    name: str | None = None  # the model's name, when it is not a Python name ("from")
    minimum: float | None = None
    maximum: float | None = None
    clamp: bool = False  # a value over ``maximum`` is taken as the maximum, not refused

    def check(self, name: str, value: Any) -> Any:
        """``value`` within the bounds (clamped to the maximum with ``clamp``), else a
        ``ToolError`` naming them."""
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        low, high = self.minimum, self.maximum
        if high is not None and value > high and self.clamp:
            return type(value)(high)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (f"between {_number(low)} and {_number(high)}"
                      if low is not None and high is not None else
                      f"at least {_number(low)}" if low is not None else
                      f"at most {_number(high)}")
            raise ToolError(f"argument '{name}' must be {bounds}")
        return value


def _number(value: float | None) -> str:
    return f"{value:g}" if value is not None else ""


@dataclass(frozen=True)
class _Parameter:
    python: str
    name: str
    kind: type
    default: Any
    info: Param

    def schema(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": JSON_TYPES[self.kind]}
        for key in ("minimum", "maximum", "description"):
            if (value := getattr(self.info, key)) is not None:
                entry[key] = value
        return entry


def tool(name: str, description: str) -> Callable[[Callable[..., str]], Tool]:
    """Declare a tool from a function ``fn(ctx, *, ...)``: see the module docstring."""
    def declare(fn: Callable[..., str]) -> Tool:
        parameters = _parameters(fn)
        spec = ToolSpec(name, description, schema(
            {p.name: p.schema() for p in parameters},
            [p.name for p in parameters if p.default is inspect.Parameter.empty]))

        def run(args: dict[str, Any], ctx: ToolContext) -> str:
            values = {p.python: p.info.check(p.name, arg(
                          args, p.name, p.kind,
                          ... if p.default is inspect.Parameter.empty else p.default))
                      for p in parameters}
            return fn(ctx, **values)

        run.__doc__ = fn.__doc__
        return Tool(spec, run)
    return declare


def _parameters(fn: Callable[..., str]) -> list[_Parameter]:
    """The keyword parameters after ``ctx``, with their types and ``Param`` annotations."""
    hints = typing.get_type_hints(fn, include_extras=True)
    found = []
    for python, parameter in list(inspect.signature(fn).parameters.items())[1:]:
        hint, info = hints.get(python), Param()
        if typing.get_origin(hint) is Annotated:
            hint, *extras = typing.get_args(hint)
            info = next((e for e in extras if isinstance(e, Param)), info)
        if isinstance(hint, types.UnionType):  # ``int | None``: optional, default None
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if hint not in JSON_TYPES:
            raise TypeError(f"{fn.__name__}: parameter {python} has an unsupported type {hint}")
        found.append(_Parameter(python, info.name or python, hint, parameter.default, info))
    return found


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
        with contextlib.suppress(ValueError):
            value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"argument '{name}' must be {kind.__name__}")
    return value
