"""The house's layers, read from the code's own imports (lazy ones included).

Every ``import`` and ``from ... import`` statement anywhere in a module (at
the top, in a function, under ``TYPE_CHECKING``) is an edge, resolved to a
module of ``spiders_project`` or ``monitor``. The rules on that graph:

- no import loop between modules: a loop is a set of modules that cannot be
  read, tested or moved one at a time;
- no import loop between packages either (a folder right under
  spiders_project/): three packages in a ring are one concern that no reader
  can take apart, even when no two files import each other;
- floors import downward only (README "Layout", docs/CONTRIBUTING.md, FLOORS
  below): base < redis_access < read_model, plumbing < frontier < the
  features < the top (spiders, commands, worker, db_writer, monitor);
- a Lua ``--!include`` is an import and follows the same floors.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spiders_project", "monitor")

# The house's floors, bottom up: a module imports its own floor and those below.
# A package is a folder right under spiders_project/ (or monitor/); a module at
# the root of spiders_project/ stands for itself.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        ("spiders_project", "config", "settings", "settings_doc", "items")
        + ("keys", "crawl", "insides", "addon"),
    ),
    ("redis", ("redis_access",)),
    ("shared", ("read_model", "plumbing", "process")),
    ("frontier", ("frontier",)),
    (
        "feature",
        (
            "politeness",
            "scope",
            "proxies",
            "cookies",
            "rendering",
            "item_buffer",
            "dead_letters",
            "node_health",
            "jobs",
            "archive",
            "recrawl",
        ),
    ),
    ("top", ("spiders", "commands", "worker", "db_writer", "demo", "templates", "monitor")),
)
FLOOR_NAMES = [name for name, _ in FLOORS]
# The monitor reads the read model: it may import these floors' packages only ...
MONITOR_READS = {"base", "redis", "shared"}
# ... but for its doors: the console's actions go through the feature code the
# commands call, its archive page reads the archive, and the jobs' finish rule
# runs with the operator's connection when no worker is left to
# (monitor/job_looks.py). Only these modules.
MONITOR_DOORS = {
    "monitor.console.actions": {"jobs", "politeness", "dead_letters", "rendering", "frontier"},
    "monitor.console.archive": {"archive"},
    "monitor.job_looks": {"jobs"},
}


def modules() -> dict[str, Path]:
    """Every module of the product, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The product modules that ``name`` imports, wherever the import stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            # "from package import module" imports that module; "from module
            # import name", the module.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def package_of(module: str) -> str:
    """The package a module belongs to: the folder right under the product's root,
    or the module itself at the root of spiders_project/."""
    parts = module.split(".")
    if parts[0] == "monitor":
        return "monitor"
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> str:
    package = package_of(module)
    for name, packages in FLOORS:
        if package in packages:
            return name
    raise AssertionError(f"{module}: its package {package} is on no floor of FLOORS")


def violations(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(edges.items()):
        layer = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if FLOOR_NAMES.index(there) > FLOOR_NAMES.index(layer):
                wrong.append(f"{module} ({layer}) imports {target} ({there})")
            elif module.startswith("monitor") and not (
                there in MONITOR_READS
                or target.startswith("monitor")
                or package_of(target) in MONITOR_DOORS.get(module, ())
            ):
                wrong.append(f"{module} imports {target}: the monitor reads the read model only")
            elif not module.startswith("monitor") and target.startswith("monitor"):
                wrong.append(f"{module} imports the monitor ({target})")
    return wrong


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph folded onto packages: an arrow where any module of one
    imports any module of the other."""
    folded: dict[str, set[str]] = {}
    for module, targets in edges.items():
        for target in targets:
            if package_of(module) != package_of(target):
                folded.setdefault(package_of(module), set()).add(package_of(target))
    return folded


INCLUDE = "--!include "


def lua_includes() -> dict[str, set[str]]:
    """Each Lua file's ``--!include`` lines, as package-relative paths (the rule of
    ``redis_access/lua.py``: a bare name is in the including file's folder, a
    name with a folder is below spiders_project/)."""
    root = ROOT / "spiders_project"
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.lua"):
        here = path.relative_to(root).as_posix()
        for line in path.read_text().splitlines():
            if line.startswith(INCLUDE):
                name = line[len(INCLUDE) :].strip()
                target = (
                    name if "/" in name else f"{path.parent.relative_to(root).as_posix()}/{name}"
                )
                assert (root / target).is_file(), f"{here} includes {name}, which is not there"
                found.setdefault(here, set()).add(target)
    return found


def lua_violations(includes: dict[str, set[str]]) -> list[str]:
    """An include is an import: it runs downward only, as the Python does."""
    wrong = []
    for here, targets in sorted(includes.items()):
        module = "spiders_project." + here.rpartition("/")[0].replace("/", ".")
        for target in sorted(targets):
            other = "spiders_project." + target.rpartition("/")[0].replace("/", ".")
            if FLOOR_NAMES.index(layer_of(other)) > FLOOR_NAMES.index(layer_of(module)):
                wrong.append(f"{here} ({layer_of(module)}) includes {target} ({layer_of(other)})")
    return wrong


def test_there_is_no_import_loop():
    assert loops(graph()) == []


def test_there_is_no_import_loop_between_packages():
    """A loop of packages (proxies -> politeness -> dead_letters -> proxies) is
    one even when no two files import each other."""
    assert loops(package_edges(graph())) == []


def test_layers_import_downward_only():
    assert violations(graph()) == []


def test_lua_includes_run_downward_only():
    includes = lua_includes()
    assert includes, "no --!include found: the walk is broken"
    assert lua_violations(includes) == []


def test_every_package_is_on_a_floor():
    for module in modules():
        layer_of(module)


def test_the_graph_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The walk finds an import inside a function and a relative one, so a lazy
    import cannot hide a loop from the test above."""
    package = tmp_path / "spiders_project"
    (package / "frontier").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "frontier" / "__init__.py").write_text("")
    (package / "frontier" / "a.py").write_text(
        "def f():\n    from spiders_project.spiders import b\n"
    )
    (package / "spiders").mkdir()
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "b.py").write_text("from ..frontier import a\n")
    (tmp_path / "monitor").mkdir()
    (tmp_path / "monitor" / "__init__.py").write_text("")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    edges = graph()
    assert edges["spiders_project.frontier.a"] == {"spiders_project.spiders.b"}
    assert edges["spiders_project.spiders.b"] == {"spiders_project.frontier.a"}
    assert loops(edges) == [["spiders_project.frontier.a", "spiders_project.spiders.b"]]
    assert violations(edges) == [
        "spiders_project.frontier.a (frontier) imports spiders_project.spiders.b (top)"
    ]


def test_a_package_loop_without_a_file_loop_is_found():
    """Three packages in a ring, no two files importing each other: the file
    graph has no loop, the package graph has one."""
    edges = {
        "spiders_project.proxies.middleware": {"spiders_project.politeness.bans"},
        "spiders_project.politeness.retries": {"spiders_project.dead_letters.middleware"},
        "spiders_project.dead_letters.middleware": {"spiders_project.proxies.config"},
        "spiders_project.politeness.bans": set(),
        "spiders_project.proxies.config": set(),
    }
    assert loops(edges) == []
    assert loops(package_edges(edges)) == [["dead_letters", "politeness", "proxies"]]


def test_an_include_up_a_floor_is_found():
    assert lua_violations({"frontier/lua/a.lua": {"jobs/lua/b.lua"}}) == [
        "frontier/lua/a.lua (frontier) includes jobs/lua/b.lua (feature)"
    ]
    assert lua_violations({"jobs/lua/b.lua": {"frontier/lua/a.lua"}}) == []


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("spiders_project.keys", "base"),
        ("spiders_project.redis_access.calls", "redis"),
        ("spiders_project.read_model.contract", "shared"),
        ("spiders_project.frontier.write_behind.batcher", "frontier"),
        ("spiders_project.frontier.scheduler", "frontier"),
        ("spiders_project.politeness.delays", "feature"),
        ("spiders_project.dead_letters.letters", "feature"),
        ("spiders_project.spiders.base", "top"),
        ("monitor.collector", "top"),
    ],
)
def test_each_package_has_its_layer(module, layer):
    assert layer_of(module) == layer


# settings.py is the one defaults module: a commented line per setting.
LONG_ALLOWED = {"spiders_project.settings"}
MAX_LINES = 400


def test_no_module_passes_400_lines():
    """A module past about 400 lines holds more than one purpose: split it by
    responsibility (docs/CONTRIBUTING.md)."""
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert {name: n for name, n in long.items() if name not in LONG_ALLOWED} == {}
