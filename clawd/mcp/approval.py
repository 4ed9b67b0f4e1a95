"""Whether an MCP server's tool asks before it runs: pure functions, no SDK (docs/mcp.md).

A server's ``approval`` says which of its tools ask, as ``exec`` asks: ``writes`` (the
default) asks for every tool whose annotations do not say ``readOnlyHint: true`` (a tool
that says ``destructiveHint: true`` asks even then: the hints contradict, the careful one
wins); ``always`` asks for every tool; ``never`` asks for none. ``autoApprove`` names tools
that never ask (as Cline's config does). The annotations are the server's word, read as
given: a server that lies about a tool is a server not to configure.

Where a person can answer (the REPL), the call is put to them (``request``); where nobody
can (``clawd chat -m``, ``--script``, the gateway), a tool that asks is refused with the
way to allow it (``refusal``), and nothing runs.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from clawd.config.mcp import Approval
from clawd.core.textcut import shorten

REQUEST_ARGS_CHARS = 300  # the arguments shown when a person is asked


def asks(approval: Approval, annotations: Any, tool: str, auto: Collection[str] = ()) -> bool:
    """Whether a call of ``tool`` (its MCP ``annotations``: the SDK's object, a dict or
    None) must be approved first."""
    if approval == "never" or tool in auto:
        return False
    if approval == "always":
        return True
    return not (hint(annotations, "readOnlyHint") is True
                and hint(annotations, "destructiveHint") is not True)


def hint(annotations: Any, key: str) -> bool | None:
    """One hint of a tool's annotations (``readOnlyHint``, ``destructiveHint``), whatever
    their shape: the SDK's object (snake_case attributes), a dict, or nothing."""
    if annotations is None:
        return None
    if isinstance(annotations, dict):
        value = annotations.get(key)
    else:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        value = getattr(annotations, snake, None)
    return value if isinstance(value, bool) else None


def request(name: str, arguments: dict[str, Any]) -> str:
    """What a person is asked to approve: the tool by the model's name for it, and its
    arguments (shortened)."""
    args = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"{name} {shorten(args, REQUEST_ARGS_CHARS)}"


def refusal(name: str, server: str) -> str:
    """The result of a call that asks where nobody can answer."""
    return (f"{name} may change things, so it needs a person's approval, and nobody can "
            f"approve it in this run (not an interactive chat); nothing was done. To let "
            f"it run without asking, set approval: \"never\" on mcp.servers.{server}, or "
            f"name the tool in its autoApprove")


def declined(name: str) -> str:
    return f"the user declined to run {name}; nothing was done"
