"""The distribution ``spiders-project``: a wheel of the checkout works without the checkout.

The wheel is installed in a fresh virtualenv as tests/support/distribution.py
does it (the dependencies through a ``.pth`` file, nothing else of this
machine). Everything then runs from a folder outside the checkout, with the
checkout on no path: a ``scrapy startproject`` project of someone else's,
which finds our commands through the distribution's entry points only.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.distribution import PACKAGES, Installed, install_distribution
from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

# The files besides modules the packages open at run time.
DATA_SUFFIXES = (".lua", ".sql", ".tmpl", ".html", ".js", ".css")
# The commands a project gets by installing the distribution (pyproject.toml's
# [project.entry-points."scrapy.commands"]).
COMMANDS = (
    "jobs",
    "crawlstatus",
    "deadletters",
    "dupefilter",
    "crawlmove",
    "frontier",
    "warc",
    "redis-acl",
    "crawl",
    "genspider",
)


def checkout_data_files() -> set[str]:
    """Every data file of the packages in the checkout, as a wheel names it."""
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.suffix in DATA_SUFFIXES and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("distribution")
    installation = install_distribution(base)
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    done = installation.run("-m", "scrapy", "startproject", "someones_project", cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    return replace(installation, project=elsewhere / "someones_project")


def test_the_wheel_holds_every_module_and_data_file_of_both_packages(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    data = checkout_data_files()
    assert {f for f in data if f.endswith(".lua")} and {f for f in data if f.endswith(".tmpl")}
    assert {f for f in data if f.startswith("monitor/console/templates/")}
    assert data - names == set()
    modules = {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    assert modules - names == set()
    # Nothing else of the checkout (tests, tools) is installed.
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == set(PACKAGES)


def test_the_packages_come_from_the_fresh_virtualenv_not_the_checkout(
    installed: Installed,
) -> None:
    done = installed.run(
        "-c",
        "import sys, monitor, spiders_project\n"
        "from pathlib import Path\n"
        "print(spiders_project.__file__)\n"
        "print(monitor.__file__)\n"
        "print(*[p for p in sys.path if (Path(p or '.') / 'spiders_project').exists()])\n",
    )
    assert done.returncode == 0, done.stderr
    spiders_file, monitor_file, holders = done.stdout.splitlines()
    assert Path(spiders_file).is_relative_to(installed.site_packages)
    assert Path(monitor_file).is_relative_to(installed.site_packages)
    # The checkout is on no path, not even behind the installed copy.
    assert holders.split() == [str(installed.site_packages)]


def test_the_declared_dependencies_accept_the_pinned_ones(installed: Installed) -> None:
    """requirements.txt's versions (installed here) satisfy pyproject.toml's ranges."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(installed.python), "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def scrapy_help(installed: Installed) -> str:
    done = installed.run("-m", "scrapy", "-h")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "active project: someones_project" in done.stdout, done.stdout
    return done.stdout


@pytest.mark.parametrize(
    "command",
    COMMANDS,
)
def test_scrapy_lists_the_command_in_another_project(scrapy_help: str, command: str) -> None:
    listed = {line.split()[0] for line in scrapy_help.splitlines() if line.startswith("  ")}
    assert command in listed, scrapy_help


def test_a_command_runs_in_another_project(installed: Installed) -> None:
    done = installed.run("-m", "scrapy", "crawlstatus", "--help")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "crawlstatus" in done.stdout


def test_every_lua_script_loads_from_the_installed_package(installed: Installed) -> None:
    """Includes too: a script of one folder includes redis_access/lua/clock.lua."""
    done = installed.run(
        "-c",
        "import spiders_project.frontier.scripts as s\n"
        "from pathlib import Path\n"
        "from spiders_project.redis_access import load_lua\n"
        "scripts = s.FrontierScripts()\n"
        "print(s.LUA_DIR)\n"
        "print(scripts.enqueue.sha)\n"
        "root = Path(s.__file__).parents[1]\n"
        "for path in sorted(root.rglob('lua/*.lua')):\n"
        "    assert load_lua(path.parent, path.stem).source.strip(), path\n"
        "print(len(list(root.rglob('lua/*.lua'))))\n",
    )
    assert done.returncode == 0, done.stderr
    lua_dir, sha, count = done.stdout.split()
    assert Path(lua_dir).is_relative_to(installed.site_packages)
    assert len(sha) == 40
    assert int(count) == len([f for f in checkout_data_files() if f.endswith(".lua")])
