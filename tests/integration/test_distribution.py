"""The distribution ``spiders-project``: a wheel of the checkout works without the checkout.

One wheel is built (``pip wheel``, setuptools in pip's isolated build
environment) from a copy of the files the build reads, so the checkout gets
no ``build/`` or ``*.egg-info``. It goes into a fresh virtualenv without pip's
dependency resolution: a ``.pth`` file lets that virtualenv import the
dependencies already installed where this test runs (``requirements.txt``),
and nothing else of this machine. Everything then runs from a folder outside
the checkout, with the checkout on no path: a ``scrapy startproject`` project
of someone else's, which finds our commands through the distribution's entry
points only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

# The files besides modules the packages open at run time.
DATA_SUFFIXES = (".lua", ".sql", ".tmpl")
PACKAGES = ("spiders_project", "monitor")
# What the build reads: pyproject.toml names README.md as the long description.
BUILD_INPUTS = ("pyproject.toml", "README.md", *PACKAGES)
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
)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    site_packages: Path
    project: Path

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``python <args>`` of the fresh virtualenv, in the user's project folder."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCRAPY_"))}
        env["PYTHONNOUSERSITE"] = "1"
        return subprocess.run(
            [str(self.python), *args],
            cwd=cwd or self.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def checkout_data_files() -> set[str]:
    """Every data file of the packages in the checkout, as a wheel names it."""
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.suffix in DATA_SUFFIXES and "__pycache__" not in path.parts
    }


def pip(*args: str, timeout: float = 300) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("distribution")
    source = base / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    pip("wheel", "--no-deps", "--quiet", str(source), "--wheel-dir", str(base / "dist"))
    (wheel,) = (base / "dist").glob("spiders_project-*.whl")

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies: the site-packages of the interpreter running this test.
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages / "dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    pip("--python", str(python), "install", "--no-deps", "--quiet", str(wheel))

    project = base / "elsewhere"
    project.mkdir()
    installation = Installed(wheel, python, site_packages, project / "someones_project")
    done = installation.run("-m", "scrapy", "startproject", "someones_project", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    return installation


def test_the_wheel_holds_every_module_and_data_file_of_both_packages(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    data = checkout_data_files()
    assert {f for f in data if f.endswith(".lua")} and {f for f in data if f.endswith(".tmpl")}
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
