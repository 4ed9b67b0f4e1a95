"""Typed configuration: ``clawd.json`` (JSON5) validated once at load.

Every key has the camelCase name docs/configuration.md gives it, and a default; an unknown
or mistyped key is a ``ConfigError`` naming the key path and the file, and the valid key of
that level it is closest to (``did you mean 'model'?``). Values are not guessed at: a
boolean is ``true`` or ``false`` (not ``"yes"`` or ``1``) and a number is a JSON5 number
(not ``"4096"`` or ``true``) — the ``Bool``, ``Int`` and ``Float`` field types.
``agents.list[]`` entries override ``agents.defaults`` key by key (deep merge);
``resolve_agent`` returns the merged settings of one agent. ``state_dir()`` and
``config_path()`` honour ``CLAWD_HOME`` and ``CLAWD_CONFIG``.

This module is the config's public face: it finds, reads and parses the file, and every
name of the config a caller needs is importable from here. The parts live beside it:
``sections`` (scalar types and one agent's sections), ``schema`` (the whole tree),
``errors`` (one-line errors, "did you mean"), ``agents`` (merging an agent's settings) and
``text`` (editing the file as text).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import ValidationError

from clawd.config.agents import own_workspace, resolve_agent
from clawd.config.errors import describe
from clawd.config.gateway import Gateway
from clawd.config.schema import (
    DEFAULT_AGENT_ID,
    DEFAULT_IDLE_MINUTES,
    DEFAULT_MODEL,
    AgentDefaults,
    AgentEntry,
    Agents,
    Config,
    Hooks,
    ModelCost,
    ModelInfo,
    Models,
    ProviderConfig,
    Reset,
    SessionMemoryHook,
    SessionSettings,
)
from clawd.config.sections import (
    DEFAULT_FLUSH_PROMPT,
    DEFAULT_FLUSH_SYSTEM,
    Batch,
    Bool,
    Cache,
    Chunking,
    Compaction,
    ContextPruning,
    ExecTool,
    Experimental,
    Float,
    HardClear,
    Hybrid,
    IndexStoreSettings,
    Int,
    Local,
    MemoryFlush,
    MemorySearch,
    Mmr,
    Model,
    Query,
    RecallSettings,
    Remote,
    SoftTrim,
    Sync,
    TemporalDecay,
    ToolGlobs,
    Tools,
    VectorStore,
    parse_duration,
    shareable_path,
)
from clawd.core.errors import ConfigError
from clawd.core.paths import state_dir

__all__ = [
    "DEFAULT_AGENT_ID", "DEFAULT_FLUSH_PROMPT", "DEFAULT_FLUSH_SYSTEM", "DEFAULT_IDLE_MINUTES",
    "DEFAULT_MODEL", "AgentDefaults", "AgentEntry", "Agents", "Batch", "Bool", "Cache",
    "Chunking", "Compaction", "Config", "ContextPruning", "ExecTool", "Experimental", "Float",
    "Gateway", "HardClear", "Hooks", "Hybrid", "IndexStoreSettings", "Int", "Local",
    "MemoryFlush", "MemorySearch", "Mmr", "Model", "ModelCost", "ModelInfo", "Models",
    "ProviderConfig", "Query", "RecallSettings", "Remote", "Reset", "SessionMemoryHook",
    "SessionSettings", "SoftTrim", "Sync", "TemporalDecay", "ToolGlobs", "Tools",
    "VectorStore", "config_path", "load_config", "own_workspace", "parse_config",
    "parse_duration", "resolve_agent", "shareable_path", "state_dir",
]


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


def json5_error(exc: ValueError, source: str | None = None) -> str:
    """The parser's message with its place said plainly: ``<string>:2 Unexpected end of
    input at column 11`` becomes ``line 2, column 11: unexpected end of input``. Given the
    ``source`` text, an error a comma at that place gets past (``a: 1`` then ``b: 2`` on the
    next line) says so: ``(is a comma missing between it and the entry before?)``."""
    text = str(exc)
    found = _error_place(text)
    if not found:
        return text
    line, what, column = found.groups()
    place = f"line {line}" + (f", column {column}" if column else "")
    said = f"{place}: {what[:1].lower()}{what[1:]}"
    if source is not None and column and _comma_gets_past(source, int(line), int(column)):
        said += " (is a comma missing between it and the entry before?)"
    return said


def _error_place(message: str) -> re.Match[str] | None:
    return re.match(r"<string>:(\d+) (.*?)(?: at column (\d+))?$", message, re.S)


def _offset(text: str, line: int, column: int) -> int:
    """The index in ``text`` of the parser's 1-based line and column."""
    lines = text.split("\n")
    return sum(len(before) + 1 for before in lines[:line - 1]) + column - 1


def _comma_gets_past(text: str, line: int, column: int, depth: int = 3) -> bool:
    """Whether the entry parsing stopped at (a key or a value) is one a comma before it gets
    past: with the comma the text parses, stops on a later line, or stops where one more
    comma gets past (two missing). ``{a b: 1}`` and ``{a: 1\n b 2}`` stop in the entry: no
    hint."""
    import json5

    at = _offset(text, line, column)
    if depth == 0 or not 0 < at < len(text) or not re.match(r"[\w\"'{\[+\-.$]", text[at]):
        return False
    patched = f"{text[:at]},{text[at:]}"
    try:
        json5.loads(patched, allow_duplicate_keys=False)
    except ValueError as exc:
        found = _error_place(str(exc))
        if not (found and found.group(3)):
            return True  # past the syntax: a key given twice
        again, column_again = int(found.group(1)), int(found.group(3))
        return again > line or _comma_gets_past(patched, again, column_again, depth - 1)
    return True


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
        raise ConfigError(f"{path}: not valid JSON5: {json5_error(exc, text)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be an object")
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe(exc, path)) from None
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
