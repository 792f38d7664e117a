"""The distribution ``spiders-project`` installed as a user installs it: a wheel in a fresh venv.

One wheel is built (``pip wheel``, setuptools in pip's isolated build
environment) from a copy of the files the build reads, so the checkout gets
no ``build/`` or ``*.egg-info``. It goes into a fresh virtualenv without pip's
dependency resolution: a ``.pth`` file lets that virtualenv import the
dependencies already installed where the tests run (``requirements.txt``),
and nothing else of this machine. Commands then run with the checkout on no
path (:meth:`Installed.env`), from a folder outside it.

Used by tests/integration/test_distribution.py and tests/e2e/test_own_project.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import ROOT

PACKAGES = ("spiders_project", "monitor")
# What the build reads: pyproject.toml names README.md as the long description.
BUILD_INPUTS = ("pyproject.toml", "README.md", *PACKAGES)


@dataclass(frozen=True)
class Installed:
    """A fresh virtualenv holding the wheel: its interpreter and where it installs, and
    the folder commands run in unless told otherwise (a user's project)."""

    wheel: Path
    python: Path
    site_packages: Path
    project: Path | None = None

    def env(self, **extra: str) -> dict[str, str]:
        """This process' environment without anything that would reach the checkout
        (PYTHONPATH and friends, SCRAPY_SETTINGS_MODULE, the user's site), plus ``extra``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCRAPY_"))}
        return {**env, "PYTHONNOUSERSITE": "1", **extra}

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``python <args>`` of the virtualenv in ``cwd`` (the project), its output captured."""
        folder = cwd or self.project
        assert folder is not None, "run where? no cwd and no project"
        return subprocess.run(
            [str(self.python), *args],
            cwd=folder,
            env=self.env(**(env or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def pip(*args: str, timeout: float = 300) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def build_wheel(base: Path) -> Path:
    """The checkout's wheel, built from a copy of its build inputs under ``base``."""
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
    return wheel


def fresh_venv(base: Path, wheel: Path) -> Installed:
    """A virtualenv under ``base`` with ``wheel`` installed and this interpreter's
    site-packages importable (a ``.pth`` file) for the dependencies."""
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
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages / "dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    pip("--python", str(python), "install", "--no-deps", "--quiet", str(wheel))
    return Installed(wheel, python, site_packages)


def install_distribution(base: Path) -> Installed:
    """Build the wheel and install it in a fresh virtualenv, both under ``base``."""
    return fresh_venv(base, build_wheel(base))
