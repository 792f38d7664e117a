"""settings_doc: docs/SETTINGS.md and deploy/env.example follow settings.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import BaseSettings

from spiders_project import settings_doc
from spiders_project.config import SettingsReader
from spiders_project.settings_doc import EnvVar, parse, render, settings_of

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / "deploy" / "env.example"
# Variables of deploy/ itself (supervisord's config and run-with-env), not settings.
DEPLOY_VARIABLES = {
    "CRAWLER_HOME",
    "CRAWLER_LOG_DIR",
    "CRAWLER_WORKERS",
    "CRAWLER_RENDER_WORKERS",
    "CRAWLER_ENV_FILE",
}

SAMPLE = '''"""A settings module."""

import os

BOT_NAME = "bot"


def _env(name, default):
    return os.environ.get(name, default)


# --- Connections ---------------------------------------------------
# The shared Redis.
# Second line of the same description.
REDIS_URL = _env("REDIS_URL", "redis://localhost:6379/0")
# Two settings, one description.
WAIT_REPLICAS = _env("WAIT_REPLICAS", 1)
WAIT_TIMEOUT = 1.0

UNDESCRIBED = 3
_PRIVATE = 4

# --- Rendering ----
# A dict with an environment variable inside.
LAUNCH: dict[str, object] = {
    # the binary
    "executable_path": _env("CHROMIUM_PATH", "/usr/bin/chromium"),
    "headless": True,
}
# An entry added to a dict setting.
LAUNCH["slow_mo"] = 10
'''


def test_the_parser_finds_sections_groups_and_descriptions():
    sections = parse(SAMPLE)
    assert [s.title for s in sections] == ["The Scrapy project", "Connections", "Rendering"]
    connections = sections[1].groups
    assert [[s.name for s in g.settings] for g in connections] == [
        ["REDIS_URL"],
        ["WAIT_REPLICAS", "WAIT_TIMEOUT"],
        ["UNDESCRIBED"],
    ]
    assert connections[0].description == "The shared Redis. Second line of the same description."
    assert connections[1].description == "Two settings, one description."
    # A blank line above and no comment: no description, never the one before.
    assert connections[2].description == ""
    assert sections[0].groups[0].description == ""


def test_the_parser_keeps_defaults_as_written_and_finds_env_calls():
    by_name = {s.name: s for s in settings_of(parse(SAMPLE))}
    assert "_PRIVATE" not in by_name and "_env" not in by_name
    assert by_name["REDIS_URL"].default == '"redis://localhost:6379/0"'
    assert by_name["REDIS_URL"].env == (EnvVar("REDIS_URL", '"redis://localhost:6379/0"'),)
    assert by_name["WAIT_REPLICAS"].default == "1"
    assert by_name["WAIT_TIMEOUT"].env == ()
    launch = by_name["LAUNCH"]
    assert launch.default.startswith("{\n    # the binary\n")
    assert launch.env == (EnvVar("CHROMIUM_PATH", '"/usr/bin/chromium"'),)
    assert by_name['LAUNCH["slow_mo"]'].default == "10"


def test_the_page_lists_every_setting_its_environment_and_description():
    page = render(parse(SAMPLE))
    assert '| `CHROMIUM_PATH` | `"/usr/bin/chromium"` | `LAUNCH` |' in page
    assert '- **`REDIS_URL`** = `"redis://localhost:6379/0"` · environment\n' in page
    assert "- **`WAIT_REPLICAS`** = `1` · environment<br>\n  **`WAIT_TIMEOUT`** = `1.0`\n" in page
    assert "\n  Two settings, one description.\n" in page
    # A multi-line default is shown as written, comments included, in a code block.
    assert '  ```python\n  {\n      # the binary\n      "executable_path"' in page
    assert "## Rendering" in page and "[Rendering](#rendering)" in page


def test_descriptions_escape_what_markdown_would_hide():
    page = render(parse("# Kept in <spider>:items.\nX = 1\n"))
    assert "Kept in &lt;spider>:items." in page


def test_settings_md_is_fresh():
    """docs/SETTINGS.md is what `make docs` writes from settings.py today."""
    assert settings_doc.SETTINGS_MD.read_text(encoding="utf-8") == settings_doc.generate(), (
        "docs/SETTINGS.md is stale: run make docs"
    )


def test_check_exits_1_with_one_line_when_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "SETTINGS.md"
    stale.write_text("old\n")
    monkeypatch.setattr(settings_doc, "SETTINGS_MD", stale)
    monkeypatch.setattr(settings_doc, "ROOT", tmp_path)
    assert settings_doc.main(["--check"]) == 1
    assert capsys.readouterr().err == "SETTINGS.md is stale: run make docs\n"
    assert stale.read_text() == "old\n"
    assert settings_doc.main([]) == 0
    assert settings_doc.main(["--check"]) == 0
    assert stale.read_text() == settings_doc.generate()


def test_every_setting_of_settings_py_has_a_description():
    sections = parse(settings_doc.SETTINGS_PY.read_text(encoding="utf-8"))
    undescribed = [
        s.name for sec in sections for g in sec.groups if not g.description for s in g.settings
    ]
    assert undescribed == []


def test_env_example_documents_every_environment_setting():
    settings = (ROOT / "spiders_project" / "settings.py").read_text()
    example = (ROOT / "deploy" / "env.example").read_text()
    names = re.findall(r'_env\(\s*"(\w+)",\s*"([^"]*)"', settings)
    assert names
    for name, default in names:
        line = re.search(rf"^#?{name}=(.*)$", example, re.MULTILINE)
        assert line, f"{name} is missing from deploy/env.example"
        assert line.group(1).strip("'") == default, f"{name}: default is {default!r}"


def _typed(name: str, value: Any, like: Any) -> Any:
    """``value`` read as settings read it, by the type of the default ``like``."""
    reader = SettingsReader(BaseSettings({name: value}))
    if isinstance(like, bool):
        return reader.getbool(name)
    if isinstance(like, (int, float)):
        return reader.getfloat(name)
    if isinstance(like, list):
        return [str(v) for v in reader.getlist(name)]
    return reader.getstr(name)


def _env_example_lines() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if match := re.match(r"^#?([A-Z][A-Z0-9_]*)=(.*)$", line):
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def test_env_example_has_every_environment_setting_once_with_its_default():
    """All of them, whatever the default's type; and nothing settings.py does not read."""
    env_vars = settings_doc.env_vars(parse(settings_doc.SETTINGS_PY.read_text(encoding="utf-8")))
    assert len(env_vars) >= 49
    example = _env_example_lines()
    for env, _setting in env_vars:
        assert env.name in example, f"{env.name} is missing from deploy/env.example"
        assert len(example[env.name]) == 1, f"{env.name} is in deploy/env.example twice"
        shown = example[env.name][0].strip("'")
        default = ast.literal_eval(env.default)
        assert _typed(env.name, shown, default) == _typed(env.name, default, default), (
            f"deploy/env.example: {env.name}={shown}, but its default is {env.default}"
        )
    unknown = set(example) - {env.name for env, _ in env_vars} - DEPLOY_VARIABLES
    assert not unknown, f"deploy/env.example names what settings.py never reads: {unknown}"


@pytest.mark.parametrize("name", sorted(DEPLOY_VARIABLES - {"CRAWLER_ENV_FILE"}))
def test_deploy_variables_are_the_ones_supervisord_expands(name):
    assert f"%(ENV_{name})s" in (ROOT / "deploy" / "supervisor" / "crawler.conf").read_text()
