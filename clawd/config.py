"""Typed configuration: ``clawd.json`` (JSON5) validated once at load.

Every key has the camelCase name of the SPEC and a default; an unknown or mistyped key is a
``ConfigError`` naming the key path and the file, and the valid key of that level it is
closest to (``did you mean 'model'?``). Values are not guessed at: a boolean is ``true`` or
``false`` (not ``"yes"`` or ``1``) and a number is a JSON5 number (not ``"4096"`` or
``true``) — the ``Bool``, ``Int`` and ``Float`` field types. ``agents.list[]`` entries override
``agents.defaults`` key by key (deep merge); ``resolve_agent`` returns the merged settings of
one agent. ``state_dir()`` and ``config_path()`` honour ``CLAWD_HOME`` and ``CLAWD_CONFIG``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr,
                      ValidationError, model_validator)

from clawd.errors import ConfigError

DEFAULT_AGENT_ID = "main"
DEFAULT_IDLE_MINUTES = 120
DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"
DEFAULT_FLUSH_SYSTEM = "Session nearing compaction. Store durable memories now."
DEFAULT_FLUSH_PROMPT = ("Write any lasting notes to memory/YYYY-MM-DD.md; "
                        "reply with NO_REPLY if nothing to store.")


def _boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"use true or false, not {_json5(value)}")
    return value


def _number(value: Any) -> Any:
    # Python counts True as 1 and pydantic would read "4096" as 4096: both hide a mistake.
    if isinstance(value, (bool, str)):
        raise ValueError(f"use a number, not {_json5(value)}")
    return value


def _json5(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# Config scalars: a boolean must be true or false (not "yes", "true" or 1) and a number a
# JSON5 number (not a quoted one, not true); whole floats such as 1e3 still fit an int.
Bool = Annotated[bool, BeforeValidator(_boolean)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class Model(BaseModel):
    """Base of every config section: camelCase keys, unknown keys rejected."""

    model_config = ConfigDict(alias_generator=_camel, populate_by_name=True, extra="forbid",
                              validate_default=True)


# --- compaction and the memory flush --------------------------------------------------------

class MemoryFlush(Model):
    enabled: Bool = True
    soft_threshold_tokens: Int = Field(4000, ge=0)
    soft_threshold: Float | None = Field(None, gt=0, lt=1)
    system_prompt: str = DEFAULT_FLUSH_SYSTEM
    prompt: str = DEFAULT_FLUSH_PROMPT


class Compaction(Model):
    enabled: Bool = True
    reserve_tokens_floor: Int = Field(20000, ge=0)
    keep_recent_tokens: Int = Field(20000, ge=0)
    threshold_ratio: Float | None = Field(None, gt=0, le=1)
    chunk_tokens: Int = Field(30000, ge=1000)
    max_retries: Int = Field(3, ge=1)
    memory_flush: MemoryFlush = MemoryFlush()


# --- context pruning ------------------------------------------------------------------------

class SoftTrim(Model):
    max_chars: Int = Field(4000, ge=0)
    head_chars: Int = Field(1500, ge=0)
    tail_chars: Int = Field(1500, ge=0)


class HardClear(Model):
    enabled: Bool = True
    placeholder: str = "[Old tool result content cleared]"


class ToolGlobs(Model):
    allow: list[str] = []
    deny: list[str] = []


class ContextPruning(Model):
    mode: Literal["off", "cache-ttl", "adaptive", "aggressive"] | None = None
    ttl: str = "5m"
    keep_last_assistants: Int = Field(3, ge=0)
    soft_trim_ratio: Float = Field(0.3, ge=0, le=1)
    hard_clear_ratio: Float = Field(0.5, ge=0, le=1)
    min_prunable_tool_chars: Int = Field(50000, ge=0)
    soft_trim: SoftTrim = SoftTrim()
    hard_clear: HardClear = HardClear()
    tools: ToolGlobs = ToolGlobs()

    @model_validator(mode="after")
    def _check_ttl(self) -> ContextPruning:
        parse_duration(self.ttl)
        return self


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``"5m"``, ``"90s"``, ``"1h"`` or ``"250ms"``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 5m, 1h)")
    value, unit = float(match.group(1)), match.group(2) or "m"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


# --- memory search --------------------------------------------------------------------------

class Batch(Model):
    enabled: Bool = True
    wait: Bool = True
    concurrency: Int = Field(2, ge=1)
    poll_interval_ms: Int = Field(2000, ge=10)
    timeout_minutes: Float = Field(60, gt=0)


class Remote(Model):
    base_url: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = {}
    batch: Batch = Batch()


class Local(Model):
    model_path: str | None = None
    tokenizer_path: str | None = None


class Chunking(Model):
    tokens: Int = Field(400, ge=16)
    overlap: Int = Field(80, ge=0)


class Hybrid(Model):
    enabled: Bool = True
    vector_weight: Float = Field(0.7, ge=0)
    text_weight: Float = Field(0.3, ge=0)
    candidate_multiplier: Int = Field(4, ge=1)

    @model_validator(mode="after")
    def _normalise(self) -> Hybrid:
        total = self.vector_weight + self.text_weight
        if total <= 0:
            raise ValueError("vectorWeight + textWeight must be above 0")
        self.vector_weight, self.text_weight = self.vector_weight / total, self.text_weight / total
        return self


class Query(Model):
    max_results: Int = Field(6, ge=1)
    min_score: Float = Field(0.35, ge=0, le=1)
    hybrid: Hybrid = Hybrid()


class VectorStore(Model):
    enabled: Bool = True
    extension_path: str | None = None


class Store(Model):
    path: str | None = None
    vector: VectorStore = VectorStore()


class Cache(Model):
    enabled: Bool = True
    max_entries: Int = Field(50000, ge=0)


class Sync(Model):
    watch: Bool = True
    watch_debounce_ms: Int = Field(1500, ge=0)
    on_session_start: Bool = True
    on_search: Bool = True


class Experimental(Model):
    session_memory: Bool = False


class MemorySearch(Model):
    enabled: Bool = True
    provider: Literal["auto", "openai", "gemini", "local"] = "auto"
    model: str | None = None
    fallback: Literal["openai", "gemini", "local", "none"] = "local"
    sources: list[Literal["memory", "sessions"]] = ["memory"]
    extra_paths: list[str] = []
    shareable_paths: list[str] = []
    remote: Remote = Remote()
    local: Local = Local()
    chunking: Chunking = Chunking()
    query: Query = Query()
    store: Store = Store()
    cache: Cache = Cache()
    sync: Sync = Sync()
    experimental: Experimental = Experimental()

    @model_validator(mode="after")
    def _check_shareable(self) -> MemorySearch:
        self.shareable_paths = [shareable_path(entry) for entry in self.shareable_paths]
        return self


def shareable_path(entry: str) -> str:
    """A ``shareablePaths`` entry in its normal form: workspace-relative, forward slashes,
    no ``.``/``..`` parts, no trailing slash."""
    parts = [p for p in entry.replace("\\", "/").split("/") if p not in ("", ".")]
    if (not parts or entry.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", entry)
            or ".." in parts):
        raise ValueError(f"shareablePaths entries are files or folders inside the workspace, "
                         f"given relative to it (e.g. \"memory/shared\"), not {entry!r}")
    return "/".join(parts)


# --- tools ----------------------------------------------------------------------------------

class ExecTool(Model):
    enabled: Bool = True
    allow_in_scripts: Bool = False
    timeout_seconds: Float = Field(60, gt=0)


class Tools(Model):
    exec: ExecTool = ExecTool()
    max_output_chars: Int = Field(50000, ge=1000)


# --- agents ---------------------------------------------------------------------------------

class AgentDefaults(Model):
    workspace: str = "~/clawd"
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


class ModelInfo(Model):
    id: str
    context_window: Int | None = Field(None, ge=1000)
    max_tokens: Int | None = Field(None, ge=1)
    cost: ModelCost | None = None


class ProviderConfig(Model):
    api: Literal["openai-completions", "anthropic-messages"] | None = None
    base_url: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = {}
    models: list[ModelInfo] = []
    timeout_seconds: Float = Field(120, gt=0)
    max_retries: Int = Field(3, ge=0)


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


class Session(Model):
    reset: Reset = Reset()


class SessionMemoryHook(Model):
    enabled: Bool = True
    messages: Int = Field(15, ge=1)
    slug_timeout_seconds: Float = Field(15, gt=0)


class Hooks(Model):
    session_memory: SessionMemoryHook = SessionMemoryHook()


class Config(Model):
    """The whole ``clawd.json``."""

    agents: Agents = Agents()
    models: Models = Models()
    session: Session = Session()
    hooks: Hooks = Hooks()

    # where the file was read from: private, so not a key a config file could set
    _source: Path | None = PrivateAttr(None)

    @property
    def source(self) -> Path | None:
        return self._source

    @source.setter
    def source(self, path: Path | None) -> None:
        self._source = path

    def agent_ids(self) -> list[str]:
        ids = [entry.id for entry in self.agents.entries]
        return ids or [DEFAULT_AGENT_ID]

    def default_agent_id(self) -> str:
        for entry in self.agents.entries:
            if entry.default:
                return entry.id
        return self.agents.entries[0].id if self.agents.entries else DEFAULT_AGENT_ID


def state_dir() -> Path:
    """``$CLAWD_HOME``, else ``~/.clawd``."""
    home = os.environ.get("CLAWD_HOME")
    return Path(home).expanduser() if home else Path.home() / ".clawd"


def config_path() -> Path:
    """``$CLAWD_CONFIG``, else ``<state>/clawd.json``."""
    path = os.environ.get("CLAWD_CONFIG")
    return Path(path).expanduser() if path else state_dir() / "clawd.json"


def load_config(path: Path | None = None) -> Config:
    """Read and validate the config; a missing file means all defaults."""
    path = path or config_path()
    if not path.exists():
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_config(text, path)


def parse_config(text: str, path: Path | str = "clawd.json") -> Config:
    """Validate config text (JSON5); errors name the key and the file."""
    import json5

    try:
        # a key given twice would be silently overridden by its last value: refused
        raw = json5.loads(text, allow_duplicate_keys=False) if text.strip() else {}
    except ValueError as exc:
        twice = re.match(r'Duplicate key "(.*)" found', str(exc))
        if twice:
            raise ConfigError(f"{path}: the key {twice.group(1)!r} is given twice in one "
                              f"object (only the last would count); keep one") from None
        raise ConfigError(f"{path}: not valid JSON5: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be an object")
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path)) from None
    ids = [entry.id for entry in config.agents.entries]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ConfigError(f"{path}: agents.list has the id {duplicate!r} twice")
    defaults = [entry.id for entry in config.agents.entries if entry.default]
    if len(defaults) > 1:
        raise ConfigError(f"{path}: agents.list marks more than one agent as default "
                          f"({', '.join(defaults)})")
    config.source = Path(path)
    for agent_id in config.agent_ids():
        resolve_agent(config, agent_id)  # each agent's merged settings are checked now
    return config


def _ignored(settings: AgentDefaults) -> str | None:
    """A key one agent's merged settings would silently ignore (checked after the merge,
    since a default and an agent's override may each hold half of the pair)."""
    memory = settings.memory_search
    remote = memory.remote
    if (memory.provider == "local" and memory.fallback not in ("openai", "gemini")
            and (remote.base_url or remote.api_key or remote.headers)):
        return ("memorySearch.remote is set but provider is \"local\" (and fallback is not "
                "a remote provider), so it would never be used: choose provider \"openai\" "
                "or \"gemini\", or remove remote")
    if ("sessions" in memory.sources) == memory.experimental.session_memory:
        return None
    half = ("memorySearch.experimental.sessionMemory is on but sources lacks \"sessions\""
            if memory.experimental.session_memory else
            "memorySearch.sources has \"sessions\" but experimental.sessionMemory is off")
    return f"{half}; transcripts are indexed only with both, so set both or neither"


def _describe(exc: ValidationError, path: Path | str, root: type[BaseModel] = Config) -> str:
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


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def resolve_agent(config: Config, agent_id: str | None = None) -> tuple[str, AgentDefaults]:
    """The id and merged settings of an agent (the default agent when ``agent_id`` is None)."""
    agent_id = agent_id or config.default_agent_id()
    entry = next((e for e in config.agents.entries if e.id == agent_id), None)
    if entry is None:
        if config.agents.entries or agent_id != DEFAULT_AGENT_ID:
            known = ", ".join(config.agent_ids())
            raise ConfigError(f"unknown agent {agent_id!r} (agents.list has: {known})")
        return agent_id, _checked(config, agent_id, config.agents.defaults)
    base = config.agents.defaults.model_dump()
    override = entry.model_dump(exclude_unset=True, exclude={"id", "name", "default"})
    try:
        settings = AgentDefaults.model_validate(_deep_merge(base, override))
    except ValidationError as exc:
        raise ConfigError(_describe(exc, f"{config.source or 'config'} (agent {agent_id})",
                                    AgentDefaults)) from None
    extra = override.get("memory_search", {}).get("extra_paths")
    if extra is not None:
        # An agent's extraPaths add to the defaults' list (as in OpenClaw), not replace it.
        settings.memory_search.extra_paths = list(dict.fromkeys(
            config.agents.defaults.memory_search.extra_paths + extra))
    if ("workspace" not in override and len(config.agents.entries) > 1
            and agent_id != config.default_agent_id()):
        settings.workspace = own_workspace(settings.workspace, agent_id)
    return agent_id, _checked(config, agent_id, settings)


def own_workspace(workspace: str, agent_id: str) -> str:
    """The workspace of a non-default agent that names none: agents are isolated, so it is
    the default one plus ``-<id>`` (``~/clawd-work``), never the default agent's."""
    return str(Path(workspace).expanduser()) + f"-{agent_id}"


def _checked(config: Config, agent_id: str, settings: AgentDefaults) -> AgentDefaults:
    problem = _ignored(settings)
    if problem:
        where = "agents.defaults" if not config.agents.entries else f"agent {agent_id}"
        raise ConfigError(f"{config.source or 'config'}: {where}: {problem}")
    return settings
