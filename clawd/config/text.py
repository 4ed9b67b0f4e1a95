"""Edits of the JSON5 config as text, keeping the user's comments, order and layout.

Rebuilding ``clawd.json`` from its parsed data would drop every comment (the starter config
is mostly comments), so ``add_agent`` edits the text instead: a small JSON5 tokenizer finds
``agents.list`` and the new entry is inserted into that array, or, when there is none, a
``list`` member into ``agents`` (an ``agents`` member into the top-level object when even
that is missing), in the layout around it: one member per line or inline, and plain JSON
(quoted keys, no trailing commas) in a file written as plain JSON. The result is parsed
again and must hold the same settings and agents, plus the new one; when it does not,
``add_agent`` returns ``None`` and the caller shows ``agent_snippet`` to paste instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clawd.config import DEFAULT_AGENT_ID, Config, parse_config, resolve_agent
from clawd.core.errors import ConfigError

# Whitespace and comments, punctuation, strings (escapes, line continuations), and the rest
# (numbers, true/false/null, unquoted keys). A config that json5 accepted always tokenizes.
_TOKEN = re.compile(r"""
    (?P<skip>[\s\ufeff]+ | //[^\n\r\u2028\u2029]* | /\*.*?\*/)
  | (?P<punct>[{}\[\]:,])
  | (?P<string>"(?:[^"\\]|\\.)*" | '(?:[^'\\]|\\.)*')
  | (?P<atom>[^\s\ufeff{}\[\]:,"'/]+)
""", re.VERBOSE | re.DOTALL)


def json5_string(value: Path | str) -> str:
    """A JSON5 string literal (double-quoted, escaped as JSON)."""
    return json.dumps(str(value), ensure_ascii=False)


def agent_entries(config: Config, agent_id: str, workspace: Path | None,
                  quoted: bool = False) -> list[str]:
    """The ``agents.list`` entries that add ``agent_id``: with no list yet, the implicit
    default agent gets an entry first, so it stays the default and keeps its sessions.
    ``quoted``: keys in quotes, for a config written as plain JSON."""
    def key(name: str) -> str:
        return json5_string(name) if quoted else name

    entry = f"{{ {key('id')}: {json5_string(agent_id)}"
    entry += f", {key('workspace')}: {json5_string(workspace)} }}" if workspace else " }"
    if config.agents.entries:
        return [entry]
    return [f"{{ {key('id')}: {json5_string(DEFAULT_AGENT_ID)}, {key('default')}: true }}",
            entry]


def agent_snippet(config: Config, agent_id: str, workspace: Path | None) -> str:
    """What to paste by hand to add the agent, as one line."""
    entries = agent_entries(config, agent_id, workspace)
    if config.agents.entries:
        return f"add {entries[0]} to agents.list"
    return f"add list: [{', '.join(entries)}] to agents"


def add_agent(text: str, config: Config, agent_id: str, workspace: Path | None) -> str | None:
    """``text`` (the source of ``config``) with ``agent_id`` added to ``agents.list``, or
    ``None`` when it cannot be inserted without changing anything else."""
    editor = _Editor.of(text)
    if editor is None:
        return None
    entries = agent_entries(config, agent_id, workspace, editor.quoted)
    root = editor.members(0)
    agents = root.get("agents")
    if agents is None:
        edited = editor.add_member(0, ["agents", "list"], entries)
    elif editor.char(agents) != "{":
        return None
    elif (found := editor.members(agents).get("list")) is None:
        edited = editor.add_member(agents, ["list"], entries)
    elif editor.char(found) == "[":
        edited = editor.add_items(found, entries)
    else:
        return None
    return edited if _only_added(config, edited, agent_id) else None


def _only_added(before: Config, text: str, agent_id: str) -> bool:
    """Whether ``text`` holds ``before``'s settings and agents, unchanged (the default one
    too), plus ``agent_id``."""
    try:
        after = parse_config(text, before.source or "clawd.json")  # resolves every agent
    except ConfigError:
        return False
    old = before.agent_ids()
    rest = {"agents": {"entries"}}
    return (after.agent_ids() == [*old, agent_id]
            and after.default_agent_id() == before.default_agent_id()
            and after.model_dump(exclude=rest) == before.model_dump(exclude=rest)
            and all(resolve_agent(after, a)[1].model_dump()
                    == resolve_agent(before, a)[1].model_dump() for a in old))


def literal(value: Any, quoted: bool = False) -> str:
    """``value`` as one line of JSON5: keys bare where they can be (quoted in a file written
    as plain JSON, ``quoted``)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(str(k), quoted)}: {literal(v, quoted)}"
                                for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v, quoted) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _key(name: str, quoted: bool) -> str:
    bare = re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", name) is not None
    return name if bare and not quoted else json5_string(name)


def set_member(text: str, path: list[str], value: Any) -> str | None:
    """``text`` with the member at ``path`` (keys from the top) set to ``value``: replaced
    where it is, else added to the innermost object that exists (the missing keys as nested
    objects, one member a line where that object is laid out so). ``None`` when the path
    goes through a value that is not an object, or the text is not a JSON5 object."""
    editor = _Editor.of(text)
    if editor is None:
        return None
    rendered = literal(value, editor.quoted)
    obj = 0
    for depth, key in enumerate(path):
        found = editor.members(obj).get(key)
        if found is None:
            return editor.add(obj, [_key(k, editor.quoted) for k in path[depth:]], rendered)
        if depth == len(path) - 1:
            start, end = editor.tokens[found][0], editor.tokens[editor.after(found) - 1][1]
            return text[:start] + rendered + text[end:]
        if editor.char(found) != "{":
            return None
        obj = found
    return None


def remove_member(text: str, path: list[str]) -> str | None:
    """``text`` without the member at ``path``, its line(s) taken out whole when it has
    them to itself; ``None`` when there is no such member."""
    editor = _Editor.of(text)
    if editor is None:
        return None
    obj = 0
    for key in path[:-1]:
        found = editor.members(obj).get(key)
        if found is None or editor.char(found) != "{":
            return None
        obj = found
    value = editor.members(obj).get(path[-1])
    if value is None:
        return None
    first, after = value - 2, editor.after(value)
    start, end = editor.tokens[first][0], editor.tokens[after - 1][1]
    if editor.char(after) == ",":
        end = editor.tokens[after][1]
    elif editor.char(first - 1) == ",":  # the last member: its comma before goes
        start = editor.tokens[first - 1][0]
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if not text[line_start:start].strip() and not text[end:line_end].strip():
        return text[:line_start] + text[line_end + 1:]  # its own lines
    return text[:start] + text[end:].lstrip(" ") if editor.char(after) == "," else (
        text[:start] + text[end:])


class _Editor:
    """The tokens of one JSON5 text (``(start, end)``, whitespace and comments left out),
    and insertions into its objects and arrays, each named by its opening token's index."""

    def __init__(self, text: str, tokens: list[tuple[int, int]]):
        self.text, self.tokens = text, tokens
        # a file written as plain JSON (its first key quoted) stays plain JSON
        self.quoted = len(tokens) > 1 and self.char(1) == '"'

    @classmethod
    def of(cls, text: str) -> _Editor | None:
        """The editor of a text whose top level is an object, else ``None``."""
        tokens, pos = [], 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:
                return None
            if match.lastgroup != "skip":
                tokens.append(match.span())
            pos = match.end()
        editor = cls(text, tokens)
        return editor if tokens and editor.char(0) == "{" else None

    def char(self, i: int) -> str:
        return self.text[self.tokens[i][0]]

    def add(self, open_: int, keys: list[str], value: str) -> str:
        """The text with ``keys[0]: { keys[1]: ... value }`` last in the object at ``open_``:
        nested objects one member a line where that object is laid out so, else inline."""
        layout = self._layout(open_)
        if layout is None:
            for key in reversed(keys[1:]):
                value = f"{{ {key}: {value} }}"
            return self._inline(open_, f"{keys[0]}: {value}")
        indent, step = layout
        comma = "" if self.quoted else ","
        member = f"{keys[-1]}: {value}"
        for depth in range(len(keys) - 2, -1, -1):
            inner = indent + step * (depth + 1)
            member = (f"{keys[depth]}: {{\n{inner}{member}{comma}\n"
                      f"{indent + step * depth}}}")
        return self._lines(open_, [indent + member])

    def after(self, i: int) -> int:
        """The index of the token after the value that starts at token ``i``."""
        depth = 0
        while True:
            if self.char(i) in "{[":
                depth += 1
            elif self.char(i) in "}]":
                depth -= 1
            i += 1
            if depth == 0:
                return i

    def members(self, i: int) -> dict[str, int]:
        """The object opening at token ``i``: the first token of each key's value."""
        import json5

        found: dict[str, int] = {}
        i += 1
        while self.char(i) != "}":
            start, end = self.tokens[i]
            key = self.text[start:end]
            found[json5.loads(key) if key[0] in "\"'" else key] = i + 2  # past key and colon
            i = self.after(i + 2)
            if self.char(i) == ",":
                i += 1
        return found

    def add_items(self, open_: int, items: list[str]) -> str:
        """The text with ``items`` appended to the array opening at token ``open_``."""
        layout = self._layout(open_)
        if layout is None:
            return self._inline(open_, ", ".join(items))
        indent, _ = layout
        return self._lines(open_, [indent + item for item in items])

    def add_member(self, open_: int, keys: list[str], items: list[str]) -> str:
        """The text with ``keys[0]: { keys[1]: ... [items] }`` added to the object opening
        at token ``open_``."""
        keys = [json5_string(key) if self.quoted else key for key in keys]
        layout = self._layout(open_)
        if layout is None:
            value = f"[{', '.join(items)}]"
            for key in reversed(keys[1:]):
                value = f"{{ {key}: {value} }}"
            return self._inline(open_, f"{keys[0]}: {value}")
        indent, step = layout
        return self._lines(open_, [indent + self._nested(keys, items, indent, step)])

    def _nested(self, keys: list[str], items: list[str], indent: str, step: str) -> str:
        inner, comma = indent + step, "" if self.quoted else ","
        if len(keys) == 1:
            body = ",\n".join(inner + item for item in items)
            return f"{keys[0]}: [\n{body}{comma}\n{indent}]"
        return (f"{keys[0]}: {{\n{inner}{self._nested(keys[1:], items, inner, step)}{comma}"
                f"\n{indent}}}")

    def _layout(self, open_: int) -> tuple[str, str] | None:
        """For a container laid out one member per line (its closing bracket on a line of
        its own): its members' indent and one level of indentation; ``None`` if inline."""
        close = self.after(open_) - 1
        close_at = self.tokens[close][0]
        outer = self.text[self.text.rfind("\n", 0, close_at) + 1:close_at]
        if outer.strip() or "\n" not in self.text[self.tokens[open_][1]:close_at]:
            return None
        indent = outer + "  "
        if close > open_ + 1:  # follow the first member's indent when it starts its line
            first = self.tokens[open_ + 1][0]
            before = self.text[self.text.rfind("\n", 0, first) + 1:first]
            if not before.strip() and len(before) > len(outer):
                indent = before
        return indent, indent[len(outer):]

    def _lines(self, open_: int, lines: list[str]) -> str:
        """``lines`` as the container's last members, inserted at the start of its closing
        bracket's line: after any comments that end it, so they stay where they were."""
        close = self.after(open_) - 1
        at = self.text.rfind("\n", 0, self.tokens[close][0]) + 1
        comma = "" if self.quoted else ","
        text = self.text[:at] + ",\n".join(lines) + comma + "\n" + self.text[at:]
        if close > open_ + 1 and self.char(close - 1) != ",":  # after the last member
            end = self.tokens[close - 1][1]
            text = text[:end] + "," + text[end:]
        return text

    def _inline(self, open_: int, value: str) -> str:
        """``value`` inserted after the container's last member, on the same line."""
        last = self.after(open_) - 2
        sep = "" if last == open_ else " " if self.char(last) == "," else ", "
        at = self.tokens[last][1]
        return self.text[:at] + sep + value + self.text[at:]
