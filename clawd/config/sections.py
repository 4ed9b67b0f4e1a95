"""The building blocks of the config and the sections of one agent's settings.

``Model`` is the base of every section: camelCase keys, unknown keys rejected. Values are not
guessed at: a boolean is ``true`` or ``false`` (not ``"yes"`` or ``1``) and a number is a JSON5
number (not ``"4096"`` or ``true``) — the ``Bool``, ``Int`` and ``Float`` field types. The
sections here (compaction and the memory flush, context pruning, memory search, tools) are
what ``agents.defaults`` and each ``agents.list`` entry hold; ``config.schema`` puts them
into the whole tree.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

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


def _base_url(value: Any) -> Any:
    """An endpoint must say how to reach it: ``127.0.0.1:8080/v1`` would only fail later,
    after retries, as "connection error"."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.split("/")[0]:
        hint = f"http://{text}" if not sep else "http://HOST:PORT/v1"
        raise ValueError(f"{_json5(value)} is not an http:// or https:// URL (did you mean "
                         f"{_json5(hint)}?)")
    return text


def _json5(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# Config scalars: a boolean must be true or false (not "yes", "true" or 1) and a number a
# JSON5 number (not a quoted one, not true); whole floats such as 1e3 still fit an int.
Bool = Annotated[bool, BeforeValidator(_boolean)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
BaseUrl = Annotated[str, BeforeValidator(_base_url)]  # http(s)://host[:port][/path]


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
    base_url: BaseUrl | None = None
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


class TemporalDecay(Model):
    """Dated notes (daily logs, session files) lose score with age: times
    0.5 ** (age in days / halfLifeDays); MEMORY.md and undated notes never do."""

    enabled: Bool = False
    half_life_days: Float = Field(30, gt=0)


class Mmr(Model):
    """Results picked for relevance and difference from those already picked (MMR):
    ``lambda`` 1 is the plain ranking, lower trades relevance for diversity."""

    enabled: Bool = False
    lambda_: Float = Field(0.7, ge=0, le=1)


class Query(Model):
    max_results: Int = Field(6, ge=1)
    min_score: Float = Field(0.35, ge=0, le=1)
    hybrid: Hybrid = Hybrid()
    temporal_decay: TemporalDecay = TemporalDecay()
    mmr: Mmr = Mmr()


class RecallSettings(Model):
    """Automatic recall: before each user turn, memory search runs on the user's message and
    its best hits reach the model with the message (``clawd.loop.recall``)."""

    enabled: Bool = True
    max_results: Int = Field(3, ge=1, le=20)
    min_score: Float | None = Field(None, ge=0, le=1)  # None: ``query.minScore``
    max_chars: Int = Field(1500, ge=200)


class VectorStore(Model):
    enabled: Bool = True
    extension_path: str | None = None


class IndexStoreSettings(Model):
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
    recall: RecallSettings = RecallSettings()
    # Replies end with "Source: path#Lx-Ly" naming the notes they used (the system prompt
    # and the recall block ask for it); results and recall blocks carry citations anyway.
    citations: Bool = False
    store: IndexStoreSettings = IndexStoreSettings()
    cache: Cache = Cache()
    sync: Sync = Sync()
    experimental: Experimental = Experimental()

    @model_validator(mode="after")
    def _check_paths(self) -> MemorySearch:
        self.shareable_paths = [shareable_path(entry) for entry in self.shareable_paths]
        # " notes/ " copied from a list with its spaces means notes/; an empty entry, nothing
        self.extra_paths = [e.strip() for e in self.extra_paths if e.strip()]
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

