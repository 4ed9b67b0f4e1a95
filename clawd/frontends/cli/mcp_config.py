"""``clawd mcp add | remove | enable | disable | import``: the ``mcp.servers`` of the config
file, changed in place, its comments, order and layout kept (``config.text``).

``add NAME -- COMMAND [ARGS...]`` (with ``--env K=V``) or ``add NAME --url URL`` (with
``--header K=V``) adds a server; ``remove`` takes it out; ``enable`` and ``disable`` set its
``enabled``. ``import FILE`` adds the servers of a Claude Desktop or Claude Code config (its
``mcpServers`` block, or a file that is only that block): ``"type": "stdio"`` or none with a
``command``; ``"http"``, ``"streamable-http"``, ``"sse"`` or none with a ``url`` (a URL that
speaks only the legacy SSE transport is found out at its start); a name already configured
is said and skipped. A name that is not
a server name (``my.server``) is made one (``my-server``). ``disabled: true`` becomes
``enabled: false``; Cline's ``autoApprove``/``alwaysAllow`` become ``autoApprove``.

Every edit is parsed again and must give the servers it meant to and change nothing else;
the file is swapped in whole (written beside it, then renamed over it), keeping its
permissions (a new file is 0600: headers and env hold keys).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from clawd.core.errors import ClawdError, ConfigError

SSE_TYPES = ("sse",)
HTTP_TYPES = ("http", "streamable-http", "streamableHttp", "streamable_http")


def add_parsers(command: Any, msub: Any) -> None:
    add = command(msub, "add", "add a server: NAME -- COMMAND [ARGS...], or NAME --url URL")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--url", help="a remote server (streamable HTTP)")
    add.add_argument("--header", action="append", default=[], metavar="K=V",
                     help="a header for a --url server (repeatable)")
    add.add_argument("--env", action="append", default=[], metavar="K=V",
                     help="an environment variable for a command (repeatable; "
                     "K=${K} passes clawd's own)")
    add.add_argument("argv", nargs="*", metavar="-- COMMAND [ARGS...]")
    for name, what in (("remove", "take a server out of the config"),
                       ("enable", "start a server again (enabled: true)"),
                       ("disable", "keep a server in the config, not started (enabled: false)")):
        command(msub, name, what).add_argument("name", metavar="NAME")
    imported = command(msub, "import", "add the servers of a Claude Desktop or Claude Code "
                       "config (its mcpServers)")
    imported.add_argument("file", metavar="FILE")


def cmd_edit(args: argparse.Namespace) -> int:
    from clawd.config import config_path, load_config

    path = config_path()
    config = load_config(path)
    servers = config.mcp.servers
    action, name = args.mcp_command, str(getattr(args, "name", ""))
    if action == "import":
        entries, notes = from_client_config(Path(args.file).expanduser(), set(servers))
        for note in notes:
            print(f"· {note}")
        if not entries:
            print("nothing to import")
            return 0
        _write(path, entries, remove=None)
        print(f"added {', '.join(entries)} to mcp.servers in {path}")
        return 0
    if action == "add":
        if server_name(name) != name:
            raise ConfigError(f"{name!r} is not a server name (letters, digits, - and single "
                              f"_, at most 32; it starts the names of its tools): "
                              f"{server_name(name)!r} would do")
        if name in servers:
            raise ConfigError(f"mcp.servers.{name} is already configured (clawd mcp remove "
                              f"{name} first)")
        _write(path, {name: _added(args)}, remove=None)
        print(f"added {name} to mcp.servers in {path}")
        return 0
    if name not in servers:
        raise ConfigError(f"no MCP server {name!r}" + (
            "; the servers are " + ", ".join(servers) if servers else ""))
    if action == "remove":
        _write(path, {}, remove=name)
        print(f"removed {name} from mcp.servers in {path}")
    else:
        _write(path, {}, remove=None, enabled=(name, action == "enable"))
        print(f"{name} is {action}d")
    return 0


def _pairs(values: list[str], what: str) -> dict[str, str]:
    found = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} {value!r}: write it as KEY=VALUE")
        found[key.strip()] = rest
    return found


def _added(args: argparse.Namespace) -> dict[str, Any]:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if (args.url is None) == (not argv):
        raise ConfigError("clawd mcp add NAME -- COMMAND [ARGS...], or clawd mcp add NAME "
                          "--url URL [--header K=V]: give one of the two")
    if args.url is not None:
        if args.env:
            raise ConfigError("--env is for a command; a --url server takes --header")
        entry: dict[str, Any] = {"url": args.url}
        if args.header:
            entry["headers"] = _pairs(args.header, "--header")
        return entry
    if args.header:
        raise ConfigError("--header is for a --url server; a command takes --env")
    entry = {"command": argv[0]}
    if argv[1:]:
        entry["args"] = argv[1:]
    if args.env:
        entry["env"] = _pairs(args.env, "--env")
    return entry


def server_name(name: str) -> str:
    """``name`` made a server name: other characters as ``-``, at most 32."""
    from clawd.config.mcp import SERVER_NAME

    made = re.sub(r"[^A-Za-z0-9_-]", "-", name.strip())
    made = re.sub(r"_{2,}", "_", made).strip("-_")[:32] or "server"
    return made if re.match(SERVER_NAME, made) else "s" + made[:31]


def from_client_config(path: Path, taken: set[str]) -> tuple[dict[str, dict[str, Any]],
                                                             list[str]]:
    """The servers of a Claude Desktop or Claude Code config as clawd's entries, and a
    line for each one skipped or renamed."""
    import json5

    try:
        data = json5.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ClawdError(f"{path}: cannot read it: {exc}") from None
    block = data.get("mcpServers", data) if isinstance(data, dict) else None
    if not isinstance(block, dict):
        raise ClawdError(f"{path}: no mcpServers block")
    entries: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for original, raw in block.items():
        name = server_name(str(original))
        if not isinstance(raw, dict):
            notes.append(f"{original}: not a server entry, skipped")
            continue
        if name in taken or name in entries:
            notes.append(f"{original}: mcp.servers.{name} is already configured, skipped")
            continue
        kind = str(raw.get("type") or raw.get("transport") or "").strip()
        entry: dict[str, Any] = {}
        if raw.get("url") and (kind in HTTP_TYPES or kind in SSE_TYPES or not kind):
            entry["url"] = raw["url"]
            if raw.get("headers"):
                entry["headers"] = {str(k): str(v) for k, v in raw["headers"].items()}
        elif raw.get("command") and kind in ("stdio", ""):
            entry["command"] = str(raw["command"])
            for key in ("args",):
                if raw.get(key):
                    entry[key] = [str(a) for a in raw[key]]
            if raw.get("env"):
                entry["env"] = {str(k): str(v) for k, v in raw["env"].items()}
            if raw.get("cwd"):
                entry["cwd"] = str(raw["cwd"])
        else:
            notes.append(f"{original}: neither a command nor a url (type {kind or 'none'}), "
                         f"skipped")
            continue
        if raw.get("disabled") is True:
            entry["enabled"] = False
        approved = raw.get("autoApprove") or raw.get("alwaysAllow")
        if isinstance(approved, list) and approved:
            entry["autoApprove"] = [str(t) for t in approved]
        if name != original:
            notes.append(f"{original}: added as {name} (a server name starts its tools' names)")
        entries[name] = entry
    return entries, notes


def _write(path: Path, added: dict[str, dict[str, Any]], *, remove: str | None,
           enabled: tuple[str, bool] | None = None) -> None:
    """Apply the edit to the file's text, check it, and swap the file in."""
    from clawd.config import parse_config
    from clawd.config.text import remove_member, set_member

    original = path.read_text(encoding="utf-8") if path.exists() else "{\n}\n"
    before = parse_config(original, path)
    text: str | None = original
    for name, entry in added.items():
        text = set_member(text, ["mcp", "servers", name], entry) if text else None
    if remove is not None and text is not None:
        text = remove_member(text, ["mcp", "servers", remove])
    if enabled is not None and text is not None:
        text = set_member(text, ["mcp", "servers", enabled[0], "enabled"], enabled[1])
    expected = before.model_dump(by_alias=True, exclude_none=True)["mcp"]["servers"]
    expected.update({name: parse_config(json.dumps({"mcp": {"servers": {name: entry}}}))
                     .mcp.servers[name].model_dump(by_alias=True, exclude_none=True)
                     for name, entry in added.items()})
    if remove is not None:
        expected.pop(remove, None)
    if enabled is not None:
        expected[enabled[0]]["enabled"] = enabled[1]
    if text is None or not _holds(before, text, path, expected):
        raise ClawdError(f"{path}: clawd cannot make this change without rewriting the file; "
                         f"edit mcp.servers by hand (docs/mcp.md)")
    _swap(path, text)


def _holds(before: Any, text: str, path: Path, servers: dict[str, Any]) -> bool:
    """Whether ``text`` holds ``before``'s settings, its servers now ``servers``."""
    from clawd.config import parse_config

    try:
        after = parse_config(text, path)
    except ConfigError:
        return False
    dump = after.model_dump(by_alias=True, exclude_none=True)
    old = before.model_dump(by_alias=True, exclude_none=True)
    return dump["mcp"]["servers"] == servers and {k: v for k, v in dump.items()
                                                   if k != "mcp"} == {
        k: v for k, v in old.items() if k != "mcp"}


def _swap(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_name(f".{path.name}.clawd-edit")
    fresh.write_text(text, encoding="utf-8")
    os.chmod(fresh, mode)
    os.replace(fresh, path)
