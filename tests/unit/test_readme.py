"""README.md stays a front page: short, and its layout names every package."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250


def _layout_block() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Layout") :]
    start = section.index("```\n") + 4
    return section[start : section.index("```", start)].splitlines()


def test_the_readme_stays_short():
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_the_layout_names_every_package_and_root_module_and_no_ellipsis():
    block = _layout_block()
    named = {line.split()[0] for line in block if line.strip()}
    package = ROOT / "spiders_project"
    wanted = {f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    wanted |= {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    assert wanted - named == set()
    assert {"spiders_project/", "monitor/", "deploy/", "tests/", "docs/"} <= named
    assert not any("..." in line for line in block)
