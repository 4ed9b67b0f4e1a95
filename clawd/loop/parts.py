"""The collaborators a session hands to its model calls and its upkeep, instead of itself.

- ``Record``: the session's entry in ``sessions.json``, kept as it is on disk (``patch``).
- ``Conversation``: the history the model sees and the transcript on disk, appended to
  together (``append``), or on disk only (``keep_on_disk``: a blank answer asked again, a
  message refused as too large).
- ``ModelInUse``: which model the session talks to (this run's, the session's pin or the
  config's), its provider connected once and its profile's step guards; a switch is seen
  at once by every part holding it.
- ``Window``: how full the model's window is: the budget (flush and compaction
  points), the fixed layers (system prompt, workspace files, tool schemas) and the context
  size the ``TokenMeter`` measures. ``fixed_context``: the fixed layers' share of a session
  not yet sent to the model, without opening it (the gateway's context meter).

Each holds data and answers questions about it; none calls back into the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clawd.context.access import Access, offered
from clawd.context.layers import Layers
from clawd.context.meter import TokenMeter
from clawd.core.errors import ProviderSetupError
from clawd.core.messages import Message, ToolSpec
from clawd.core.tokens import Budget, estimate_messages, estimate_text, estimate_tools
from clawd.guards.base import Guards
from clawd.guards.profile import Profile
from clawd.loop.runtime import ModelHandle, Runtime, session_model
from clawd.mcp.shapes import over_cap
from clawd.providers.base import Provider
from clawd.sessions.entry import SessionEntry
from clawd.sessions.interface import SessionRecords, TranscriptLog
from clawd.sessions.transcript import History


class Record:
    """One session's entry in the store (a ``SessionEntry``)."""

    def __init__(self, store: SessionRecords, key: str, entry: SessionEntry):
        self.store, self.key, self.entry = store, key, entry

    def patch(self, add: dict[str, int] | None = None, copy: dict[str, str] | None = None,
              touch: bool = True, **fields: Any) -> None:
        """Set fields, add to counters and copy fields in the store, against what is on disk
        (re-creating a vanished entry from this copy); ``entry`` becomes what is there.
        ``touch=False``: housekeeping, not activity (``updatedAt`` is left alone)."""
        self.entry = self.store.patch(self.key, base=self.entry, add=add, copy=copy,
                                      touch=touch, **fields) or self.entry


class Conversation:
    """The history the model sees and the transcript that keeps everything."""

    def __init__(self, history: History, transcript: TranscriptLog):
        self.history, self.transcript = history, transcript

    def append(self, message: Message, target: list[Message] | None = None) -> None:
        """Persist a message, then add it to ``target`` (the history by default; a flush's
        own turn is a list of its own)."""
        self.transcript.append_message(message)
        (self.history.messages if target is None else target).append(message)

    def keep_on_disk(self, message: Message) -> None:
        """Persist a message that stays out of the history."""
        self.transcript.append_message(message)


class ModelInUse:
    """The model of one session: this run's (``run_model``: ``--model``, one-shot), else
    the one pinned to the session (``modelOverride``, read from ``record`` each time), else
    the agent's configured one. ``record`` is ``None`` for a session not opened (the
    gateway's context meter): ``run_model`` only."""

    def __init__(self, runtime: Runtime, record: Record | None, run_model: str | None = None):
        self.rt, self.record, self.run_model = runtime, record, run_model
        self._provider: Provider | None = None
        self._guards: tuple[str, Guards] | None = None

    @property
    def ref(self) -> str:
        if self.run_model:
            return self.run_model
        return session_model(self.record.entry if self.record else None, self.rt.settings)

    @property
    def handle(self) -> ModelHandle:
        return self.rt.models(self.ref)

    @property
    def profile(self) -> Profile:
        return self.handle.profile

    @property
    def pinned(self) -> bool:
        """Whether the model comes from a pin on the session (not this run, not the config)."""
        return not self.run_model and bool(self.record and self.record.entry.get("modelOverride"))

    @property
    def source(self) -> str:
        """Where ``ref`` comes from, for ``/model``."""
        if self.run_model:
            return "--model, for this run only"
        if self.pinned:
            return "a pin on this session; /model default follows the config again"
        return "the config"

    @property
    def provider(self) -> Provider:
        """The provider of the model, connected on first use (a pinned model that cannot
        be used says how to switch)."""
        if self._provider is None:
            try:
                self._provider = self.handle.connect()
            except ProviderSetupError as exc:
                if not self.pinned:
                    raise
                raise ProviderSetupError(
                    f"this session is pinned to {self.ref}, which cannot be used: "
                    f"{exc}; switch with /model PROVIDER/MODEL, or /model default to follow "
                    f"the config") from None
        return self._provider

    @property
    def guards(self) -> Guards:
        """The step guards of the model's profile, made once per model."""
        if self._guards is None or self._guards[0] != self.ref:
            self._guards = (self.ref, self.profile.step_guards())
        return self._guards[1]

    @contextmanager
    def lent(self, ref: str | None) -> Iterator[None]:
        """``ref`` (if any) as this run's model while the block runs, then the model as it
        was (a job's run in a session the gateway holds open for its chats)."""
        if not ref:
            yield
            return
        saved = self.run_model, self._provider
        self.run_model, self._provider = ref, None
        try:
            yield
        finally:
            self.run_model, self._provider = saved

    def switched(self) -> None:
        """The session's pin was set or removed: this run's model no longer applies, and
        the provider is connected anew on next use."""
        self._provider, self.run_model = None, None


class Window:
    """The model in use and how full its context window is."""

    def __init__(self, runtime: Runtime, access: Access, model: ModelInUse,
                 meter: TokenMeter, tools: list[ToolSpec]):
        self.rt, self.access, self.in_use, self.meter = runtime, access, model, meter
        self.offered = tools  # the session's tools; ``tools``: those the model is told of
        self._tool_tokens: dict[tuple[str, ...], int] = {}
        self._over: dict[tuple[tuple[str, ...], int | None, int], frozenset[str]] = {}

    def withheld(self) -> frozenset[str]:
        """Tools the model in use is not told of: ``memory_search`` when its profile lets
        automatic recall search for it (``recall_only``; measured in docs/real-models.md: a
        small model that searched and found nothing answered "no information" instead of the
        message); and the MCP tools past the profile's count or the window's share
        (``clawd.mcp.shapes.over_cap``)."""
        model = self.model
        cap = (tuple(s.name for s in self.offered if s.origin), model.profile.mcp_tools,
               model.context_window)
        if cap not in self._over:
            self._over[cap] = over_cap(self.offered, cap[1], cap[2])
        hidden = self._over[cap]
        if model.profile.withholds_memory_search and self.rt.settings.memory_search.recall.enabled:
            return hidden | {"memory_search"}
        return hidden

    @property
    def tools(self) -> list[ToolSpec]:
        hidden = self.withheld()
        return [spec for spec in self.offered if spec.name not in hidden]

    @property
    def model(self) -> ModelHandle:
        return self.in_use.handle

    @property
    def budget(self) -> Budget:
        return self.rt.budget(self.model)

    def layers(self) -> Layers:
        """The system prompt and the workspace files, as they are now (not naming the MCP
        tools this session does not offer: a server switched off in it)."""
        offered = {spec.name for spec in self.offered}
        apart = frozenset(t.spec.name for t in self.rt.tools
                          if t.spec.origin and t.spec.name not in offered)
        return self.rt.layers(self.access, self.budget, self.withheld() | apart)

    @property
    def tool_tokens(self) -> int:
        """The tool schemas' tokens (the same for a session as long as its model's are)."""
        tools = self.tools
        key = tuple(spec.name for spec in tools)
        if key not in self._tool_tokens:
            self._tool_tokens[key] = estimate_tools(tools)
        return self._tool_tokens[key]

    def fixed_tokens(self, layers: Layers) -> int:
        return estimate_text(layers.system) + estimate_text(layers.project) + self.tool_tokens

    def too_large(self, message: Message, layers: Layers, kept_at: str) -> str | None:
        """Why a user message can never be sent (it alone overfills the window), or None
        (``kept_at``: the transcript the message is kept in all the same)."""
        fixed, budget = self.meter.scaled(self.fixed_tokens(layers)), self.budget
        size = self.meter.scaled(estimate_messages([message]))
        room = budget.compact_at - fixed
        if size <= room:
            return None
        return (f"your message is {size:,} tokens and cannot fit: the model's window is "
                f"{budget.context_window:,} tokens, the system prompt, tools and workspace "
                f"files take {fixed:,} and {budget.context_window - budget.compact_at:,} are "
                f"kept for the reply, which leaves {max(room, 0):,} for a message; nothing was "
                f"sent (the message is kept in the transcript {kept_at}, out of the "
                f"conversation)")

    def used(self, extra: list[Message] | None = None, layers: Layers | None = None) -> int:
        """The context size now: last reported prompt plus estimates of everything since
        (``extra``: messages about to be added)."""
        return self.meter.context(self.fixed_tokens(layers or self.layers()), extra)


def fixed_context(runtime: Runtime, key: str, model: str, ratio: float = 1.0) -> int:
    """The context size of session ``key`` before its first model call, as ``/status``
    counts it: the fixed layers' estimated tokens (system prompt, workspace files, tool
    schemas) with ``model``, scaled by the session's ``tokenRatio``. Nothing is opened or
    locked: the session's history is not read."""
    access = Access.of(key, runtime.settings, runtime.workspace)
    window = Window(runtime, access, ModelInUse(runtime, None, model),
                    TokenMeter(History(), ratio), [t.spec for t in offered(runtime.tools, access)])
    return window.used()
