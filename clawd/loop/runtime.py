"""One agent's fixed surroundings (``Runtime``) and the handle of one model (``ModelHandle``).

The composition root (``clawd.frontends.compose``) builds a ``Runtime`` once per process: settings,
workspace, tools, memory, clock, and ``models``, which resolves a ``provider/model`` reference
to a ``ModelHandle`` carrying everything the loop needs to know of that model: its window, its
output limit, whether its requests carry prompt-cache breakpoints, how to connect to it, and
its profile (the guards its replies go through).
The budget (flush and compaction points) and the fixed layers of a request (system prompt and
workspace files) follow from a runtime, a session key and a model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawd.config import AgentDefaults, Config
from clawd.context.access import Access, offered
from clawd.context.layers import SMALL_WINDOW, Layers, build_layers
from clawd.core.errors import ClawdError
from clawd.core.messages import iso_clock
from clawd.core.tokens import (
    MIN_ROOM,
    Budget,
    at_most,
    encoder_name,
    estimate_text,
    estimate_tools,
    make_budget,
)
from clawd.guards.profile import PROFILES, Profile
from clawd.memory.interface import Memory
from clawd.providers.base import Provider
from clawd.sessions.entry import SessionEntry
from clawd.sessions.interface import SessionRecords
from clawd.storage.interface import AgentStorage
from clawd.tools.base import Tool
from clawd.workspace.interface import Backups, WorkspaceFiles

if TYPE_CHECKING:
    from clawd.mcp.client import McpClients


@dataclass(frozen=True)
class ModelHandle:
    """One model as the loop sees it. ``connect`` makes its provider (and may fail with a
    ``ProviderSetupError``, e.g. a missing key); everything else is known without it."""

    ref: str
    context_window: int
    max_tokens: int | None  # None: the agent's ``maxTokens``
    uses_cache: bool
    connect: Callable[[], Provider]
    profile: Profile = PROFILES["weak"]  # the guards its replies go through


def fixed_models(provider: Provider, window: int, *, max_tokens: int | None = None,
                 cache: bool = False, profile: str = "weak") -> Callable[[str], ModelHandle]:
    """A ``models`` resolver that answers every reference with one provider and window (the
    scripted provider in tests and benchmarks); every guard on unless ``profile`` says."""
    return lambda ref: ModelHandle(ref, window, max_tokens, cache, lambda: provider,
                                   PROFILES[profile])


@dataclass
class Runtime:
    """One agent's fixed surroundings, built once by the front end."""

    config: Config
    agent_id: str
    settings: AgentDefaults
    workspace: Path  # where the workspace is (the folder ``exec`` runs in)
    storage: AgentStorage  # sessions, transcripts, workspace files, records, leases
    models: Callable[[str], ModelHandle]
    tools: list[Tool] = field(default_factory=list)
    memory: Memory | None = None
    mcp: McpClients | None = None  # the MCP servers whose tools are in ``tools``
    allow_exec: bool = False
    approve: Callable[[str], bool] | None = None
    # asks a person before an MCP tool that changes things (``clawd.mcp.approval``) where
    # ``approve`` is not the one to ask: the gateway's page (None: ``approve`` asks)
    confirm: Callable[[str], bool] | None = None
    clock: Callable[[], datetime] = lambda: datetime.now().astimezone()

    @property
    def files(self) -> WorkspaceFiles:
        """The workspace's files, as the loop and the front ends use them."""
        return self.storage.files

    @property
    def backups(self) -> Backups:
        """Earlier versions of the workspace's files, kept before a change."""
        return self.storage.backups

    @property
    def store(self) -> SessionRecords:
        return self.storage.sessions

    def writable(self) -> bool:
        """Whether notes can be written: the config allows it and the store does."""
        return self.settings.workspace_access == "rw" and self.files.writable()

    def warm(self) -> None:
        """Load what a first turn would wait for: the tokenizer and the configured model's
        provider (its SDK imported, its client made); one that cannot be made is left for
        the turn to report."""
        encoder_name()
        with contextlib.suppress(ClawdError):
            self.models(self.settings.model).connect()

    def now_iso(self) -> str:
        return iso_clock(self.clock)()

    def budget(self, model: ModelHandle) -> Budget:
        """The flush and compaction points and the shares of the window for one model."""
        comp = self.settings.compaction
        return make_budget(model.context_window, comp.reserve_tokens_floor,
                           comp.memory_flush.soft_threshold_tokens,
                           comp.memory_flush.soft_threshold, comp.threshold_ratio,
                           comp.keep_recent_tokens, self.settings.max_tokens)

    def layers(self, access: Access, budget: Budget,
               withheld: frozenset[str] = frozenset()) -> Layers:
        """Layers 0 and 1 of a request in a session with ``access``: the system prompt and
        the workspace files, within the budget's share of the window (``withheld``: tools
        the model in use is not told of, ``Window.withheld``)."""
        return build_layers(
            self.files, [t.spec for t in offered(self.tools, access)
                         if t.spec.name not in withheld],
            private=access.private, workspace_files=access.workspace_files, now=self.clock(),
            max_chars=self.settings.bootstrap_max_chars,
            read_only=self.settings.workspace_access != "rw", max_tokens=budget.files,
            citations=self.settings.memory_search.citations,
            recalled="memory_search" in withheld,
            compact=budget.context_window <= SMALL_WINDOW,
            services=self.mcp.instructions({t.spec.origin for t in self.tools
                                            if t.spec.origin}) if self.mcp else None)

    def check_window(self, access: Access, model: ModelHandle) -> None:
        """Refuse, in one line, a model whose window cannot hold the fixed layers (system
        prompt, tool schemas, workspace files) and leave ``MIN_ROOM`` for the conversation."""
        budget = self.budget(model)
        layers = self.layers(access, budget)
        specs = [t.spec for t in self.tools if not t.spec.origin]  # MCP's: a share at most
        bound = at_most(layers.system) + at_most(layers.project) + sum(
            at_most(f"{s.name} {s.description} {s.parameters}") for s in specs)
        if bound + MIN_ROOM <= budget.compact_at:
            return  # fits whatever the count: the tokenizer loads after the first prompt
        fixed = (estimate_text(layers.system) + estimate_text(layers.project)
                 + estimate_tools(specs))
        if fixed + MIN_ROOM <= budget.compact_at:
            return
        need = -(-(fixed + MIN_ROOM) * 4 // 3 // 1024) * 1024  # compaction at 3/4, 1k steps
        raise ClawdError(
            f"{model.ref}: a context window of {budget.context_window:,} tokens is too small: "
            f"the system prompt, tools and workspace files take {fixed:,} tokens and leave "
            f"less than {MIN_ROOM:,} for the conversation; set the model's real window "
            f"(models.providers.{model.ref.partition('/')[0]}.models[].contextWindow, at "
            f"least {need:,}) and run its server with it, or choose a model with a larger "
            f"window")


def session_model(entry: SessionEntry | None, settings: Any) -> str:
    """The model a session uses: the one pinned to it (``/model``, ``/new MODEL``), else the
    agent's configured model, so a config change reaches old sessions."""
    return (entry or {}).get("modelOverride") or settings.model
