"""The whole ``clawd.json`` as pydantic models: agents, models, session, hooks and gateway.

``agents.defaults`` holds one agent's settings (the sections of ``config.sections``);
``agents.list[]`` entries name an agent and override any of those keys. ``Config`` is the
root, with the ids of the agents and which one is the default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, PrivateAttr, field_validator, model_validator

from clawd.config.channels import Channels
from clawd.config.gateway import Gateway
from clawd.config.mcp import Mcp
from clawd.config.sections import (
    BaseUrl,
    Bool,
    Compaction,
    ContextPruning,
    Float,
    Int,
    MemorySearch,
    Model,
    Tools,
)

DEFAULT_AGENT_ID = "main"
DEFAULT_IDLE_MINUTES = 120
DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"


# --- agents ---------------------------------------------------------------------------------

class ActiveHours(Model):
    """The hours (``HH:MM``, in the user's zone) a heartbeat may run in; ``end`` before
    ``start`` spans midnight."""

    start: str = Field("08:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    end: str = Field("22:00", pattern=r"^([01]\d|2[0-4]):[0-5]\d$")


class Heartbeat(Model):
    """A turn in the main session every ``every`` that reads ``HEARTBEAT.md`` (off unless
    ``every`` is set)."""

    every: str | None = None
    active_hours: ActiveHours | None = None
    prompt: str | None = None
    model: str | None = None
    max_runs_per_day: Int = Field(12, ge=1)
    idle_days: Float = Field(3, gt=0)  # never for a main session idle longer than this


class AgentDefaults(Model):
    workspace: str = "~/clawd"
    user_timezone: str | None = None  # IANA; None: the host's
    heartbeat: Heartbeat = Heartbeat()

    @field_validator("user_timezone")
    @classmethod
    def _zone(cls, name: str | None) -> str | None:
        from zoneinfo import ZoneInfo

        if name is None:
            return None
        try:
            ZoneInfo(name)
        except (ValueError, LookupError):
            raise ValueError(f"unknown time zone {name!r}: use an IANA name such as "
                             f"Europe/Lisbon") from None
        return name
    model: str = DEFAULT_MODEL
    context_tokens: Int | None = Field(None, ge=1000)
    max_tokens: Int = Field(4096, ge=1)
    bootstrap_max_chars: Int = Field(20000, ge=100)
    workspace_access: Literal["rw", "ro", "none"] = "rw"
    max_steps: Int = Field(25, ge=1)
    compaction: Compaction = Compaction()
    context_pruning: ContextPruning = ContextPruning()
    memory_search: MemorySearch = MemorySearch()
    tools: Tools = Tools()


class AgentEntry(AgentDefaults):
    """One entry of ``agents.list``: an id plus any ``agents.defaults`` key to override."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    name: str | None = None
    default: Bool = False
    # the MCP servers this agent gets, the whole list (None: each server's ``agents`` says)
    mcp: list[str] | None = None


class Agents(Model):
    defaults: AgentDefaults = AgentDefaults()
    entries: list[AgentEntry] = Field([], alias="list")


# --- models, sessions, hooks ----------------------------------------------------------------

class ModelCost(Model):
    """A model's prices in US dollars per million tokens: fresh input, output, cache reads and
    cache writes. ``dollars`` prices a count of each; the REPL's status line shows the cost
    of the last turn with it."""

    input: Float = Field(0, ge=0)
    output: Float = Field(0, ge=0)
    cache_read: Float = Field(0, ge=0)
    cache_write: Float = Field(0, ge=0)

    def dollars(self, input: int, output: int, cache_read: int = 0, cache_write: int = 0
                ) -> float:
        return (input * self.input + output * self.output + cache_read * self.cache_read
                + cache_write * self.cache_write) / 1_000_000


# The guards a model profile can switch (``clawd.guards.profile`` has what each one does).
GuardName = Literal["looping", "text_calls", "swallowed_args", "stray_text", "repeated_writes",
                    "repeated_reads", "blank", "echo", "note_claim", "junk_notes", "flush_retry",
                    "flush_words", "recall_only", "recall_gate", "summary_claims",
                    "founded_notes", "fake_reminders", "file_answer", "flush_answer",
                    "summary_words", "request_words", "reminder_set"]
GUARD_NAMES: tuple[str, ...] = get_args(GuardName)
ProfileName = Literal["weak", "strong"]


class ModelInfo(Model):
    id: str
    context_window: Int | None = Field(None, ge=1000)
    max_tokens: Int | None = Field(None, ge=1)
    cost: ModelCost | None = None
    profile: ProfileName | None = None  # None: the provider's
    guards: dict[GuardName, Bool] = {}


class ProviderConfig(Model):
    api: Literal["openai-completions", "anthropic-messages"] | None = None
    base_url: BaseUrl | None = None
    api_key: str | None = None
    headers: dict[str, str] = {}
    models: list[ModelInfo] = []
    timeout_seconds: Float = Field(120, gt=0)
    max_retries: Int = Field(3, ge=0)
    # None: "strong" for the built-in anthropic and openai, "weak" for a declared server
    profile: ProfileName | None = None
    guards: dict[GuardName, Bool] = {}


class Models(Model):
    providers: dict[str, ProviderConfig] = {}


class Reset(Model):
    mode: Literal["off", "daily", "idle", "both"] = "off"
    at_hour: Int = Field(4, ge=0, le=23)
    idle_minutes: Int = Field(DEFAULT_IDLE_MINUTES, ge=1)

    @model_validator(mode="after")
    def _nothing_ignored(self) -> Reset:
        given = {"atHour" if f == "at_hour" else "idleMinutes"
                 for f in self.model_fields_set & {"at_hour", "idle_minutes"}}
        if "mode" not in self.model_fields_set and given:
            raise ValueError(f"{' and '.join(sorted(given))} would have no effect without a "
                             f"mode (the default is \"off\"): set mode to \"daily\", "
                             f"\"idle\" or \"both\"")
        if self.mode == "idle" and "atHour" in given:
            raise ValueError("atHour would have no effect with mode \"idle\": use mode "
                             "\"both\" for a daily reset as well")
        return self

    @property
    def idle_limit(self) -> int | None:
        """Minutes of silence after which a session starts afresh: ``idleMinutes`` in idle
        and both modes, and in daily mode when it is given — whichever of the daily and the
        idle reset comes first, as in OpenClaw."""
        if self.mode in ("idle", "both") or (
                self.mode == "daily" and "idle_minutes" in self.model_fields_set):
            return self.idle_minutes
        return None


class SessionSettings(Model):
    reset: Reset = Reset()
    # a channel's direct messages: each sender a session of their own, or (``main``) the
    # owner's (``allowFrom``) in the main session
    dm_scope: Literal["per-channel-peer", "main"] = "per-channel-peer"


class SessionMemoryHook(Model):
    enabled: Bool = True
    messages: Int = Field(15, ge=1)
    slug_timeout_seconds: Float = Field(15, gt=0)


class ConsolidationHook(Model):
    """``clawd memory consolidate`` run by itself when a private session ends, at most once
    a day (off unless asked for)."""

    enabled: Bool = False


class Hooks(Model):
    session_memory: SessionMemoryHook = SessionMemoryHook()
    consolidation: ConsolidationHook = ConsolidationHook()


class Storage(Model):
    """Where clawd keeps what it keeps: ``url`` (``postgresql://…``) names a database;
    absent, the embedded files and SQLite (``CLAWD_STORAGE_URL`` overrides it)."""

    url: str | None = None

    @model_validator(mode="after")
    def _postgres(self) -> Storage:
        if self.url is not None and not self.url.startswith(("postgresql://", "postgres://")):
            raise ValueError("storage.url must be a postgresql:// URL (leave it out for the "
                             "embedded files)")
        return self

    def effective_url(self) -> str | None:
        """The database in use: ``CLAWD_STORAGE_URL``, else ``url`` (None: the files)."""
        return os.environ.get("CLAWD_STORAGE_URL") or self.url


class Automation(Model):
    """``clawd serve`` runs due jobs (docs/automation.md)."""

    enabled: Bool = True
    tick_seconds: Float = Field(5, gt=0)  # how often a server looks for due jobs
    keep_runs: Int = Field(500, ge=1)  # runs kept per job, besides those still needed


class Config(Model):
    """The whole ``clawd.json``."""

    agents: Agents = Agents()
    models: Models = Models()
    session: SessionSettings = SessionSettings()
    hooks: Hooks = Hooks()
    gateway: Gateway = Gateway()
    storage: Storage = Storage()
    mcp: Mcp = Mcp()
    channels: Channels = Channels()
    automation: Automation = Automation()

    # where the file was read from: private, so not a key a config file could set
    _source: Path | None = PrivateAttr(None)
    # the agents of people (``clawd users``) this config gained without listing them
    # (``frontends.compose.with_people``): private too, never a key of the file
    _people_agents: frozenset[str] = PrivateAttr(frozenset())

    @property
    def people_agents(self) -> frozenset[str]:
        """The ids (lowercase) of people's agents that ``agents.list`` does not name."""
        return self._people_agents

    @people_agents.setter
    def people_agents(self, ids: frozenset[str]) -> None:
        self._people_agents = frozenset(a.lower() for a in ids)

    @property
    def source(self) -> Path | None:
        return self._source

    @source.setter
    def source(self, path: Path | None) -> None:
        self._source = path

    @model_validator(mode="after")
    def _mcp_of_agents(self) -> Config:
        for entry in self.agents.entries:
            unknown = [name for name in entry.mcp or [] if name not in self.mcp.servers]
            if unknown:
                raise ValueError(f"agents.list {entry.id}: mcp names {', '.join(unknown)}, "
                                 f"not a server of mcp.servers")
        return self

    def agent_ids(self) -> list[str]:
        ids = [entry.id for entry in self.agents.entries]
        return ids or [DEFAULT_AGENT_ID]

    def default_agent_id(self) -> str:
        for entry in self.agents.entries:
            if entry.default:
                return entry.id
        return self.agents.entries[0].id if self.agents.entries else DEFAULT_AGENT_ID
