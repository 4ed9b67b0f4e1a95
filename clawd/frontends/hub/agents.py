"""What the hub needs of the agents it runs turns for: a runtime per agent id, where a
turn's tools ask before they act, the id a name means. ``gateway.agents.ServedAgents`` is
the one the gateway builds; a channel reaches the agents through the hub it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from clawd.core.errors import ClawdError
from clawd.loop.runtime import Runtime


class UnknownAgent(ClawdError):
    """A request named an agent this gateway does not serve."""


class Approvals(Protocol):
    """Where the tools of a turn ask first: the client that sent it."""

    def bind(self, turn: Any, push: Callable[[dict[str, Any]], None]) -> None:
        """``turn`` runs on this thread from now on: its questions go to ``push``."""

    def answer(self, turn_id: str, number: int, approved: bool,
               values: dict[str, Any] | None = None) -> bool:
        """Answer question ``number`` of the turn running here; whether it was waiting."""

    def check(self, asked: dict[str, Any], approved: bool,
              values: dict[str, Any] | None) -> None:
        """Refuse an answer that cannot answer the question put by the line ``asked`` (a
        form's value of the wrong type), before it is handed to another worker."""


class Agents(Protocol):
    """The agents a hub serves (``gateway.agents.ServedAgents``)."""

    @property
    def approvals(self) -> Approvals:
        """Where the tools of a turn ask first."""

    @property
    def people(self) -> Any:
        """``storage.people.People`` when people have agents of their own, else None."""

    def runtime(self, agent_id: str) -> Runtime:
        """The agent's runtime, built when first asked for."""

    def find(self, name: str | None) -> str:
        """The id of the agent ``name`` (None: the default); ``UnknownAgent`` if none."""

    def close(self) -> None:
        """Close what the runtimes hold open."""
