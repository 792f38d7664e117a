"""The house's layers, read from the code's own imports (lazy ones included).

Every ``import`` and ``from ... import`` statement anywhere in a module (at
the top, in a function, under ``TYPE_CHECKING``) is an edge, resolved to a
module of ``spiders_project`` or ``monitor``. Two rules hold on that graph:

- no import loop: a loop is a set of modules that cannot be read, tested or
  moved one at a time;
- layers import downward only (README "Layout", docs/CONTRIBUTING.md):
  base modules < runtime/ < frontier/ and the feature packages < the top.
  runtime/ imports no feature and not frontier/; frontier/ imports no
  feature; a feature imports no part of frontier/ or the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("spiders_project", "monitor")

RUNTIME = "spiders_project.runtime"
FRONTIER = "spiders_project.frontier"
FEATURES = tuple(
    f"spiders_project.{name}"
    for name in (
        "politeness",
        "scope",
        "proxies",
        "rendering",
        "item_buffer",
        "dead_letters",
        "node_health",
        "jobs",
        "archive",
        "recrawl",
    )
)
TOP = tuple(
    f"spiders_project.{name}"
    for name in ("spiders", "commands", "extensions", "db_writer", "demo", "templates")
) + ("monitor",)


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


def layer_of(module: str) -> str:
    def inside(prefixes: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    if inside((RUNTIME,)):
        return "runtime"
    if inside((FRONTIER,)):
        return "frontier"
    if inside(FEATURES):
        return "feature"
    if inside(TOP):
        return "top"
    return "base"


# What each layer may import, besides itself.
ALLOWED = {
    "base": {"base"},
    "runtime": {"base", "runtime"},
    "frontier": {"base", "runtime", "frontier"},
    "feature": {"base", "runtime", "feature"},
    "top": {"base", "runtime", "frontier", "feature", "top"},
}


def violations(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(edges.items()):
        layer = layer_of(module)
        for target in sorted(targets):
            if layer_of(target) not in ALLOWED[layer]:
                wrong.append(f"{module} ({layer}) imports {target} ({layer_of(target)})")
            elif module.startswith("monitor") and layer_of(target) not in ("base", "top"):
                wrong.append(f"{module} imports {target}: the monitor reads base modules only")
            elif module.startswith("monitor") is False and target.startswith("monitor"):
                wrong.append(f"{module} imports the monitor ({target})")
    return wrong


def test_there_is_no_import_loop():
    assert loops(graph()) == []


def test_layers_import_downward_only():
    assert violations(graph()) == []


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


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("spiders_project.keys", "base"),
        ("spiders_project.redis_calls.calls", "base"),
        ("spiders_project.runtime.batcher", "runtime"),
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
