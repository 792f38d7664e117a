"""The worker's component lists: one literal dict each, no shared order, the tables as documented.

Scrapy sorts a component dict merged over its own ``*_BASE`` by order, and two
components with the same order keep the order of the merged dict, which
nobody chose. So each list is built in one place (the add-on's
``spiders_project/addon/components.py``, which every project's settings,
this checkout's included, get through ``ADDONS``), no order of ours is
another's or one of Scrapy's, and docs/ARCHITECTURE.md's tables ("The
worker's components") are the lists a worker of this checkout runs with,
Scrapy's components included, row for row.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import BaseSettings, Settings, default_settings
from scrapy.utils.conf import build_component_list

from spiders_project import settings as project
from spiders_project.addon import Addon, components
from spiders_project.addon.checks import identity
from spiders_project.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PY = ROOT / "spiders_project" / "settings.py"
COMPONENTS_PY = ROOT / "spiders_project" / "addon" / "components.py"
ARCHITECTURE_MD = ROOT / "docs" / "ARCHITECTURE.md"

# Each ordered list, with the dicts merged into it (in that order): the
# add-on's, and for the frontier steps the project's FRONTIER_STEPS.
ORDERED: dict[str, tuple[str, ...]] = {
    "FRONTIER_STEPS": ("FRONTIER_STEPS_BASE", "FRONTIER_STEPS"),
    "DOWNLOADER_MIDDLEWARES": ("DOWNLOADER_MIDDLEWARES",),
    "SPIDER_MIDDLEWARES": ("SPIDER_MIDDLEWARES",),
    "ITEM_PIPELINES": ("ITEM_PIPELINES",),
    "EXTENSIONS": ("EXTENSIONS",),
}
# Keyed by URL scheme, not ordered: its table lists the schemes alphabetically.
HANDLERS = "DOWNLOAD_HANDLERS"
COMPONENT_DICTS = (*(d for dicts in ORDERED.values() for d in dicts), HANDLERS)

# The line right above each table: which setting it shows.
MARKER = re.compile(r"^<!-- tests/unit/test_components\.py: (?P<name>[A-Z_]+) -->$")
OFF = "off"
SCRAPY = "Scrapy"


def _home(name: str) -> Path:
    """The module that builds component dict ``name``: the project's own FRONTIER_STEPS
    is settings.py's, every other one the add-on's."""
    return SETTINGS_PY if name == "FRONTIER_STEPS" else COMPONENTS_PY


# --- helpers (each used on the real files, and on broken copies to show it fails) -----
def ours(name: str) -> dict[str, int | None]:
    """The cluster's entries of ordered list ``name``, as components.py (and, for
    FRONTIER_STEPS, settings.py) writes them."""
    merged: dict[str, int | None] = {}
    for setting in ORDERED[name]:
        home = project if _home(setting) == SETTINGS_PY else components
        merged.update(getattr(home, setting))
    return merged


def worker_settings(overrides: dict[str, Any] | None = None) -> Settings:
    """This checkout's settings as a crawler has them once its add-on ran."""
    settings = load_settings(overrides)
    Addon().update_settings(settings)
    return settings


def merged_list(settings: BaseSettings, name: str) -> list[tuple[str, str]]:
    """(order, dotted path) of each component of ``name`` that is on, in Scrapy's order."""
    merged = settings.get_component_priority_dict_with_base(name)
    return [(str(merged[key]), identity(key)) for key in build_component_list(merged)]


def scrapys(name: str) -> dict[str, Any]:
    """Scrapy's own ``<name>_BASE`` (empty for a list Scrapy does not have)."""
    return dict(getattr(default_settings, f"{name}_BASE", {}))


def order_problems(own: dict[str, int | None], base: dict[str, Any]) -> list[str]:
    """Each order of ``own`` shared with another of ``own``, or with one of ``base`` still on."""
    problems = []
    counts = Counter(order for order in own.values() if order is not None)
    for order, count in sorted(counts.items()):
        if count > 1:
            sharing = sorted(path for path, o in own.items() if o == order)
            problems.append(f"{order} is the order of {', '.join(sharing)}")
    scrapy_on = {path: o for path, o in base.items() if own.get(path, o) is not None}
    for path, order in own.items():
        if order is None or path in base:
            continue
        clashes = sorted(p for p, o in scrapy_on.items() if o == order)
        if clashes:
            problems.append(f"{path} at {order} ties with Scrapy's {', '.join(clashes)}")
    return problems


def tables(markdown: str) -> dict[str, list[list[str]]]:
    """Each marked table's body rows, as cells, by the setting its marker names."""
    found: dict[str, list[list[str]]] = {}
    lines = markdown.splitlines()
    for index, line in enumerate(lines):
        match = MARKER.match(line.strip())
        if match is None:
            continue
        name = match.group("name")
        assert name not in found, f"docs/ARCHITECTURE.md has two tables of {name}"
        rows = []
        for row in lines[index + 3 :]:  # after the header and its |---| line
            if not row.startswith("|"):
                break
            rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
        found[name] = rows
    return found


def _path(cell: str) -> str:
    return cell.strip("`")


def _package(path: str) -> str:
    """What the table's package column says for ``path``."""
    if path.startswith("scrapy."):
        return SCRAPY
    return path.split(".")[1] if path.startswith("spiders_project.") else path


def _shape_problems(rows: list[list[str]]) -> list[str]:
    problems = []
    for row in rows:
        if len(row) != 4:
            problems.append(f"row {row} has {len(row)} cells, not 4")
        elif row[2] != _package(_path(row[1])):
            problems.append(f"{row[1]}: package {row[2]!r}, not {_package(_path(row[1]))!r}")
        elif not row[3]:
            problems.append(f"{row[1]}: says nothing of what it does")
    return problems


def table_problems(rows: list[list[str]], name: str, settings: BaseSettings) -> list[str]:
    """How the rows of ordered list ``name``'s table differ from the merged list."""
    problems = _shape_problems(rows)
    if problems:
        return problems
    expected = merged_list(settings, name)
    shown = [(row[0], _path(row[1])) for row in rows if row[0] != OFF]
    if shown != expected:
        problems.append(f"{name}: the table says {shown}, the settings {expected}")
    off = {path for path, order in ours(name).items() if order is None}
    shown_off = {_path(row[1]) for row in rows if row[0] == OFF}
    if shown_off != off:
        problems.append(f"{name}: the table switches off {shown_off}, the settings {off}")
    problems += [f"{path} is off but not Scrapy's" for path in off if path not in scrapys(name)]
    return problems


def handler_problems(rows: list[list[str]], settings: BaseSettings) -> list[str]:
    problems = _shape_problems(rows)
    merged = {scheme: path for scheme, path in settings.getwithbase(HANDLERS).items() if path}
    expected = sorted(merged.items())
    shown = [(row[0], _path(row[1])) for row in rows if len(row) == 4]
    if shown != expected:
        problems.append(f"{HANDLERS}: the table says {shown}, the settings {expected}")
    return problems


def _assignments(tree: ast.Module, name: str) -> list[ast.stmt]:
    """Every top-level statement of a module that sets or changes ``name``."""
    found = []
    for stmt in tree.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if isinstance(base, ast.Name) and base.id == name:
                found.append(stmt)
        for node in ast.walk(stmt):  # NAME.update(...), NAME.setdefault(...), ...
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == name
            ):
                found.append(stmt)
    return found


# --- the cluster's lists ---------------------------------------------------------------
@pytest.mark.parametrize("name", COMPONENT_DICTS)
def test_each_component_dict_is_one_literal_in_order_with_a_comment_per_entry(name):
    source = _home(name).read_text(encoding="utf-8")
    lines = source.splitlines()
    statements = _assignments(ast.parse(source), name)
    assert len(statements) == 1, f"{name} is built in {len(statements)} places of {_home(name)}"
    (statement,) = statements
    assert isinstance(statement, (ast.Assign, ast.AnnAssign))
    assert isinstance(statement.value, ast.Dict), f"{name} is not one dict literal"
    for key in statement.value.keys:
        assert isinstance(key, ast.Constant), f"{name}: a key that is not written out"
        above = lines[key.lineno - 2].strip()
        assert above.startswith("#"), f"{name}[{key.value!r}] has no comment of its own"
    if name != HANDLERS:
        orders = [v.value for v in statement.value.values if isinstance(v, ast.Constant)]
        assert len(orders) == len(statement.value.values), f"{name}: an order not written out"
        numbers = [order for order in orders if order is not None]
        assert numbers == sorted(numbers), f"{name} is not written in its order: {numbers}"


@pytest.mark.parametrize("name", [n for n in COMPONENT_DICTS if _home(n) == COMPONENTS_PY])
def test_there_is_one_list_settings_py_builds_none_and_names_the_addon(name):
    tree = ast.parse(SETTINGS_PY.read_text(encoding="utf-8"))
    assert _assignments(tree, name) == []
    assert project.ADDONS == {"spiders_project.Addon": 0}


@pytest.mark.parametrize("name", ORDERED)
def test_no_two_components_share_an_order_ours_or_scrapys(name):
    assert order_problems(ours(name), scrapys(name)) == []


def test_a_shared_order_is_found():
    base = scrapys("DOWNLOADER_MIDDLEWARES")
    node_health = "spiders_project.node_health.middleware.NodeHealthMiddleware"
    assert order_problems({node_health: 590}, base) == [
        f"{node_health} at 590 ties with Scrapy's "
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
    ]
    assert order_problems({"a.A": 7, "b.B": 7, "c.C": 8}, {}) == ["7 is the order of a.A, b.B"]
    # Scrapy's switched off: its order is free for the one that replaces it.
    robots = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
    assert order_problems({robots: None, "x.Robots": 100}, base) == []


# --- docs/ARCHITECTURE.md ----------------------------------------------------------------
def test_architecture_has_one_table_per_component_dict():
    assert set(tables(ARCHITECTURE_MD.read_text(encoding="utf-8"))) == {*ORDERED, HANDLERS}


@pytest.mark.parametrize("name", ORDERED)
def test_architecture_table_is_the_merged_list(name):
    rows = tables(ARCHITECTURE_MD.read_text(encoding="utf-8"))[name]
    assert table_problems(rows, name, worker_settings()) == []


def test_architecture_download_handlers_table():
    rows = tables(ARCHITECTURE_MD.read_text(encoding="utf-8"))[HANDLERS]
    assert handler_problems(rows, worker_settings()) == []


def test_a_table_that_drifted_is_found():
    settings = worker_settings()
    rows = tables(ARCHITECTURE_MD.read_text(encoding="utf-8"))["DOWNLOADER_MIDDLEWARES"]
    assert table_problems(rows, "DOWNLOADER_MIDDLEWARES", settings) == []
    swapped = [*rows[:2], rows[3], rows[2], *rows[4:]]
    assert table_problems(swapped, "DOWNLOADER_MIDDLEWARES", settings) != []
    renumbered = [[("596" if r[0] == "595" else r[0]), *r[1:]] for r in rows]
    assert table_problems(renumbered, "DOWNLOADER_MIDDLEWARES", settings) != []
    wrong_package = [[r[0], r[1], "politeness", r[3]] for r in rows]
    assert table_problems(wrong_package, "DOWNLOADER_MIDDLEWARES", settings)[0].endswith(
        "package 'politeness', not 'Scrapy'"
    )
    not_off = [r for r in rows if r[0] != OFF]
    assert table_problems(not_off, "DOWNLOADER_MIDDLEWARES", settings) != []
    # A project's entry changes the merged list: it fails against the same table.
    moved = worker_settings(
        {"DOWNLOADER_MIDDLEWARES": {"scrapy.downloadermiddlewares.stats.DownloaderStats": 999}}
    )
    assert table_problems(rows, "DOWNLOADER_MIDDLEWARES", moved) != []
