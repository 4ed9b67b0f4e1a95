"""The shape of the package: layers imported only downward, no import circles between
modules or between packages, modules of at most 400 lines unless one job needs more, ruff
clean.

Every module belongs to one layer (``LAYERS``: its package) and imports only from its own
layer or those below, ``TYPE_CHECKING`` imports included: a type a lower layer needs from a
higher one is a seam in the wrong place. The circle checks count every import of a
``clawd`` module: module-level, function-level and those under ``if TYPE_CHECKING:`` (a
type-only import still ties two modules together: neither can be read, moved or tested
without the other). A circle is two modules that each need the other, which is how a layer
stops being one. Packages must not form circles either, even inside one layer: a package is
each package directly under ``clawd`` (``clawd.context``, ``clawd.guards``, ...), except that
each sub-package of ``clawd.frontends`` (``clawd.frontends.cli``, ``clawd.frontends.gateway``)
is one of its own, and the modules directly in ``clawd.frontends`` form ``clawd.frontends``.

The size limit is a prompt to look for a second job in a long module, not a reason to cut
one job in two: a module with one job may pass it when it is named in ``OVERSIZED`` with
what that job is. A module is never split only to get under the limit, and a class is never
cut into partial base classes that lean on each other's private methods: parts are objects
the module holds.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "clawd"
MAX_LINES = 400

# The layers, lowest first: a module may import from its own layer and those below it.
LAYERS: dict[str, int] = {
    "clawd": 0,  # the package itself: its version
    "clawd.core": 1, "clawd.config": 1,
    "clawd.workspace": 2, "clawd.sessions": 2, "clawd.providers": 2, "clawd.memory": 2,
    "clawd.automation": 2,
    "clawd.context": 3, "clawd.tools": 3, "clawd.guards": 3, "clawd.storage": 3,
    "clawd.mcp": 3,
    "clawd.loop": 4, "clawd.scheduler": 4,
    # what the front ends share: the slash commands and ``Chat``, the renderers, the
    # composition root, the turn queue (``frontends.hub``)
    "clawd.frontends": 5,
    # the channels: a service the gateway hosts and the command line administers (a
    # channel's turns run through the hub, as the gateway's do)
    "clawd.channels": 6,
    # the gateway, which hosts the channels
    "clawd.frontends.gateway": 7,
    # the command line, which starts the gateway (``clawd serve``) and works every store
    "clawd.frontends.cli": 8, "clawd.__main__": 8,
}

# Circles still being taken apart, each with the reason it is left for now: a circle of
# modules lying wholly inside one of these packages, or a circle of packages all among one
# of these groups, is not (yet) a failure. An allowance ends with its circle: once none is
# left inside it, the test says to take it off.
CIRCLES_STILL_ALLOWED: dict[tuple[str, ...], str] = {}

# Modules past ``MAX_LINES`` that do one job, each with that job: splitting them would
# only scatter it. An entry goes once its module is back under the limit.
OVERSIZED: dict[str, str] = {
    "clawd/memory/index.py": "one agent's memory index: when a sync runs, the search over "
                             "it and its status, one object the front ends and tools hold",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _all_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, ``TYPE_CHECKING`` ones included."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def import_graph() -> dict[str, set[str]]:
    """Module name -> the clawd modules it imports: anywhere in it, those it imports for
    type checking only included."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _all_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from clawd.x import y`` imports the module clawd.x.y when there is one
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def package_of(module: str, modules: Iterable[str]) -> str:
    """The package a module counts in for the package circles: the package directly under
    ``clawd`` it lies in; inside ``clawd.frontends``, its sub-package when it is in one
    (a name other modules lie inside). ``clawd`` and ``clawd.__main__`` are their own."""
    parts = module.split(".")
    if parts[:2] == ["clawd", "frontends"] and len(parts) > 2:
        inner = ".".join(parts[:3])
        if any(other.startswith(inner + ".") for other in modules):
            return inner
    return ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package name -> the other packages its modules import (``package_of``)."""
    found: dict[str, set[str]] = {package_of(name, graph): set() for name in graph}
    for name, targets in graph.items():
        package = package_of(name, graph)
        found[package].update(other for other in (package_of(t, graph) for t in targets)
                              if other != package)
    return found


def _allows(group: tuple[str, ...], circle: list[str]) -> bool:
    """Whether an allowance covers a circle: one package, a circle of modules inside it;
    several, a circle of packages among them."""
    if len(group) == 1:
        return all(member.startswith(group[0] + ".") for member in circle)
    return set(circle) <= set(group)


def unallowed(found: list[list[str]], *, packages: bool) -> list[list[str]]:
    """The circles (of packages, or of modules) no allowance covers."""
    groups = [g for g in CIRCLES_STILL_ALLOWED if (len(g) > 1) == packages]
    return [c for c in found if not any(_allows(g, c) for g in groups)]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def test_the_checker_sees_a_circle_and_counts_type_checking_imports():
    code = ("from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from clawd import b\n"
            "def f():\n    from clawd.c import thing\n")
    imports = _all_imports(ast.parse(code))
    assert [getattr(node, "module", None) for node in imports] == ["typing", "clawd", "clawd.c"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def layer_of(module: str) -> int | None:
    """The layer of a module: that of the longest ``LAYERS`` name it is or is inside."""
    found = [name for name in LAYERS if module == name
             or name != "clawd" and module.startswith(name + ".")]
    return LAYERS[max(found, key=len)] if found else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a higher layer, as ``a (layer) -> b (layer)``."""
    wrong = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if (layer_of(target) or 0) > (layer_of(name) or 0):
                wrong.append(f"{name} ({layer_of(name)}) -> {target} ({layer_of(target)})")
    return wrong


def test_every_module_is_in_a_layer():
    assert [name for name in _modules() if layer_of(name) is None] == []


def test_imports_go_down_the_layers_type_checking_ones_too():
    assert upward_imports(import_graph()) == []


def test_the_layer_checker_sees_an_upward_import():
    assert upward_imports({"clawd.core.tokens": {"clawd.loop.session"},
                           "clawd.loop.session": {"clawd.core.tokens"}}) == [
        "clawd.core.tokens (1) -> clawd.loop.session (4)"]
    assert layer_of("clawd.memory.index") == 2 and layer_of("clawd.nowhere") is None


# The stores' own classes: above the storage layer, only ``storage.interface.AgentStorage``
# (and the Protocols under it) is known, so a second backend is a drop-in.
STORE_CLASSES = {"DiskFiles", "DiskBackups", "SessionStore", "Transcript", "FileStorage"}
ABOVE_THE_STORES = ("clawd.loop", "clawd.context", "clawd.tools", "clawd.frontends")


def store_class_imports() -> list[str]:
    """Each import of a store class above the storage layer, and each use of a transcript
    by its path there (``sessions_dir``, an entry's ``sessionFile`` read)."""
    found = []
    for name, path in _modules().items():
        if not name.startswith(ABOVE_THE_STORES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _all_imports(tree):
            names = {alias.name for alias in node.names}
            if isinstance(node, ast.ImportFrom) and names & STORE_CLASSES:
                found.append(f"{name}: {', '.join(sorted(names & STORE_CLASSES))}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("sessions_dir",
                                                                  "sessionFile"):
                found.append(f"{name}: .{node.attr}")
            read = (node.slice if isinstance(node, ast.Subscript) else node.args[0]
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get" and node.args else None)
            if isinstance(read, ast.Constant) and read.value == "sessionFile":
                found.append(f"{name}: reads 'sessionFile'")
    return found


def test_nothing_above_the_stores_names_a_store_class_or_a_transcript_path():
    assert store_class_imports() == []


def test_every_folder_of_modules_is_a_package():
    """``packages.find`` ships a folder only as a package: one without ``__init__.py``
    would be left out of a wheel."""
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders
                  if not (f / "__init__.py").exists()) == []


def test_no_import_circles_type_checking_ones_too():
    assert unallowed(circles(import_graph()), packages=False) == []


def test_no_package_circles():
    assert unallowed(circles(package_graph(import_graph())), packages=True) == []


def test_every_circle_allowance_still_has_its_circle():
    graph = import_graph()
    found = circles(graph) + circles(package_graph(graph))
    assert [group for group in CIRCLES_STILL_ALLOWED
            if not any(_allows(group, circle) for circle in found)] == []


def test_the_checker_sees_a_package_circle():
    graph = {"clawd.context.flush": {"clawd.guards.text"}, "clawd.guards.text": set(),
             "clawd.guards.junk_notes": {"clawd.context.facts", "clawd.guards.text"},
             "clawd.context.facts": set()}
    assert package_graph(graph) == {"clawd.context": {"clawd.guards"},
                                    "clawd.guards": {"clawd.context"}}
    assert circles(package_graph(graph)) == [["clawd.context", "clawd.guards"]]
    # inside clawd.frontends each sub-package is a package, the modules beside them another
    graph = {"clawd.frontends.repl": {"clawd.frontends.cli.chat"},
             "clawd.frontends.cli.chat": {"clawd.frontends.commands"},
             "clawd.frontends.commands": {"clawd.loop.session"}, "clawd.loop.session": set()}
    assert circles(package_graph(graph)) == [["clawd.frontends", "clawd.frontends.cli"]]
    del graph["clawd.frontends.repl"]
    assert circles(package_graph(graph)) == []


def test_no_module_over_400_lines_but_those_with_one_job():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8")
                                                    .splitlines())
             for path in _modules().values()}
    over = {path: lines for path, lines in sizes.items()
            if lines > MAX_LINES and path not in OVERSIZED}
    assert over == {}, "past the limit: split off a second job, or name the one job in " \
                       "OVERSIZED"
    # an allowance ends once its module is back under the limit (or gone)
    assert {path for path in OVERSIZED if sizes.get(path, 0) <= MAX_LINES} == set()
    assert all(reason.strip() for reason in OVERSIZED.values())


@pytest.mark.slow  # ruff as a process, over the whole tree
@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[test]' brings it)")
def test_ruff_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "clawd", "scripts", "tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
