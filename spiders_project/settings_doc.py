"""docs/SETTINGS.md, generated from settings.py: ``python -m spiders_project.settings_doc``.

settings.py is the one place of every default and its description, so the
reference page is derived from its text, never written by hand: a setting's
description is the comment block right above it, its section the last
``# --- Name ---`` line before it, and its environment variable the
``_env("NAME", default)`` call in its value. The module is read as text with
``ast`` (never imported), so the page shows each default as it is written and
does not depend on this machine's environment.

A setting with no comment of its own that directly follows another one (no
blank line between) shares that one's description: ``REDIS_WAIT_REPLICAS``
and ``REDIS_WAIT_TIMEOUT`` are described together.

``--check`` writes nothing and exits 1 with one line when docs/SETTINGS.md is
not what this would write (tests/unit/test_settings_doc.py runs the same
comparison).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_PY = ROOT / "spiders_project" / "settings.py"
SETTINGS_MD = ROOT / "docs" / "SETTINGS.md"

# "# --- Connections -----": the name between the dashes.
SECTION = re.compile(r"^# -{3}\s*(?P<title>.*?)\s*-*\s*$")
# Settings are UPPER_CASE; _PRIVATE helpers and imports are not settings.
SETTING_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# Before the first section header: Scrapy's own project names.
FIRST_SECTION = "The Scrapy project"


@dataclass(frozen=True)
class EnvVar:
    """One ``_env("NAME", default)`` call: the variable and its default's source."""

    name: str
    default: str


@dataclass(frozen=True)
class Setting:
    """One top-level assignment of settings.py, as written."""

    name: str
    default: str
    env: tuple[EnvVar, ...]
    line: int


@dataclass
class Group:
    """Settings that share one description (the comment block above the first)."""

    description: str
    settings: list[Setting] = field(default_factory=list)


@dataclass
class Section:
    title: str
    groups: list[Group] = field(default_factory=list)


def _env_calls(node: ast.AST, source: str) -> tuple[EnvVar, ...]:
    """Every ``_env("NAME", default)`` inside ``node``, in source order."""
    found = []
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id == "_env"
            and len(sub.args) == 2
            and isinstance(sub.args[0], ast.Constant)
            and isinstance(sub.args[0].value, str)
        ):
            default = ast.get_source_segment(source, sub.args[1]) or ast.unparse(sub.args[1])
            found.append((sub.lineno, sub.col_offset, EnvVar(sub.args[0].value, default)))
    return tuple(env for *_, env in sorted(found, key=lambda f: (f[0], f[1])))


def _target_name(target: ast.expr) -> str | None:
    """``NAME`` or ``NAME["key"]`` (an entry added to a dict setting), else None."""
    if isinstance(target, ast.Name) and SETTING_NAME.match(target.id):
        return target.id
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and SETTING_NAME.match(target.value.id)
        and isinstance(target.slice, ast.Constant)
    ):
        return f"{target.value.id}[{target.slice.value!r}]".replace("'", '"')
    return None


def _setting(stmt: ast.stmt, source: str) -> Setting | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None
    name = _target_name(target)
    if name is None:
        return None
    env = _env_calls(value, source)
    shown = value
    # NAME = _env("NAME", default): the default is the call's second argument.
    if isinstance(value, ast.Call) and len(env) == 1 and value.args:
        shown = value.args[1]
    default = ast.get_source_segment(source, shown) or ast.unparse(shown)
    return Setting(name, default, env, stmt.lineno)


def _comment_above(lines: list[str], first_line: int) -> str:
    """The comment lines directly above 1-based ``first_line``, joined as one paragraph."""
    texts: list[str] = []
    index = first_line - 2
    while index >= 0:
        text = lines[index].strip()
        if not text.startswith("#") or SECTION.match(text):
            break
        texts.append(text[1:].strip())
        index -= 1
    return " ".join(reversed(texts)).strip()


def parse(source: str) -> list[Section]:
    """The sections of a settings module's text, each with its groups of settings."""
    lines = source.splitlines()
    tree = ast.parse(source)
    headers = {
        number: match.group("title")
        for number, text in enumerate(lines, start=1)
        if (match := SECTION.match(text.strip()))
    }
    sections = [Section(FIRST_SECTION)]
    previous_end = -1
    for stmt in tree.body:
        for number in sorted(n for n in headers if previous_end < n < stmt.lineno):
            sections.append(Section(headers[number]))
        setting = _setting(stmt, source)
        end = stmt.end_lineno or stmt.lineno
        if setting is None:
            previous_end = end
            continue
        description = _comment_above(lines, stmt.lineno)
        groups = sections[-1].groups
        follows = bool(groups) and groups[-1].settings[-1].line <= previous_end
        if not description and follows and previous_end == stmt.lineno - 1:
            groups[-1].settings.append(setting)
        else:
            groups.append(Group(description, [setting]))
        previous_end = end
    return [section for section in sections if section.groups]


def settings_of(sections: list[Section]) -> list[Setting]:
    return [s for section in sections for group in section.groups for s in group.settings]


def env_vars(sections: list[Section]) -> list[tuple[EnvVar, Setting]]:
    """Every environment variable, with the setting whose value reads it."""
    return [(env, s) for s in settings_of(sections) for env in s.env]


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _code(text: str) -> str:
    """Inline code that survives a backtick and a table's pipe in the value."""
    fence = "``" if "`" in text else "`"
    padded = f" {text} " if "`" in text else text
    return f"{fence}{padded}{fence}".replace("|", "\\|")


def _render_setting(setting: Setting) -> list[str]:
    """``**`NAME`** = `default` · environment``; a multi-line default as a code block."""
    env = ""
    if len(setting.env) == 1 and setting.env[0].name == setting.name:
        env = " · environment"
    elif setting.env:
        named = ", ".join(f"`{e.name}` (default {_code(e.default)})" for e in setting.env)
        env = f" · environment {named}"
    if "\n" not in setting.default:
        return [f"**`{setting.name}`** = {_code(setting.default)}{env}"]
    # The source's own indentation of continuation lines is kept as it is.
    return [
        f"**`{setting.name}`**{env} =",
        "",
        "```python",
        *setting.default.splitlines(),
        "```",
        "",
    ]


def _render_group(group: Group) -> list[str]:
    """One list item: the settings, one a line, then their description."""
    lines: list[str] = []
    for setting in group.settings:
        if lines and lines[-1]:
            lines[-1] += "<br>"
        lines += _render_setting(setting)
    lines = ["- " + lines[0], *(f"  {line}".rstrip() for line in lines[1:])]
    if group.description:
        if lines[-1]:
            lines.append("")
        # "<spider>:items" would be an HTML tag to a Markdown renderer.
        lines.append("  " + group.description.replace("<", "&lt;"))
    return lines


def render(sections: list[Section]) -> str:
    """The whole page, deterministic for a given settings.py text."""
    out = [
        "# Settings",
        "",
        "<!-- Generated from spiders_project/settings.py by `make docs`"
        " (python -m spiders_project.settings_doc); do not edit by hand. -->",
        "",
        "Every setting of the project, with its default as written in",
        "[`spiders_project/settings.py`](../spiders_project/settings.py) and the comment",
        "that describes it there. Any of them can be overridden for one process with",
        "`scrapy crawl distributed -s NAME=VALUE` (or `--set NAME=VALUE` for the db_writer",
        "and the monitor). Those marked *environment* are also read from the environment",
        "variable of the same name, as text parsed where the setting is read;",
        "[`deploy/env.example`](../deploy/env.example) lists them for a node's env file.",
        "",
        "These are also the defaults of `spiders_project.Addon`: a Scrapy project whose",
        'settings.py says `ADDONS = {"spiders_project.Addon": 0}` gets every one of them',
        "but the project's own names (The Scrapy project, below, and `ADDONS`), and its",
        "crawls, db_writer and monitor read them ([SPIDERS.md](SPIDERS.md#your-own-project)).",
        "Which value wins, lowest first:",
        "",
        "1. Scrapy's own default;",
        "2. the default here (the add-on's, Scrapy's priority `addon`);",
        "3. the project's settings.py (`project`);",
        "4. the environment variable of the setting's own name, when it is set (a setting",
        "   marked *environment*; between `project` and `spider`), so a node's env file",
        "   wins over a settings.py line;",
        "5. a spider's `custom_settings` (`spider`);",
        "6. `-s NAME=VALUE` (`cmdline`).",
        "",
        "Component lists are not values that win: the cluster's `DOWNLOADER_MIDDLEWARES`,",
        "`SPIDER_MIDDLEWARES`, `ITEM_PIPELINES`, `EXTENSIONS` and `DOWNLOAD_HANDLERS`",
        "([ARCHITECTURE.md](ARCHITECTURE.md#the-workers-components)) are merged into the",
        "project's and the spider's, which add to them and switch one off only by naming",
        "it with `None`.",
        "",
        "Sections: " + ", ".join(f"[{s.title}](#{_anchor(s.title)})" for s in sections) + ".",
        "",
        "## Environment variables",
        "",
        "| Variable | Default | Setting |",
        "|---|---|---|",
    ]
    for env, setting in env_vars(sections):
        out.append(f"| `{env.name}` | {_code(env.default)} | `{setting.name}` |")
    for section in sections:
        out += ["", f"## {section.title}", ""]
        for group in section.groups:
            out += [*_render_group(group), ""]
        while out[-1] == "":
            out.pop()
    return "\n".join(out) + "\n"


def generate(settings_py: Path = SETTINGS_PY) -> str:
    return render(parse(settings_py.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spiders_project.settings_doc",
        description="Write docs/SETTINGS.md from spiders_project/settings.py.",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if docs/SETTINGS.md is stale"
    )
    args = parser.parse_args(argv)
    text = generate()
    current = SETTINGS_MD.read_text(encoding="utf-8") if SETTINGS_MD.exists() else None
    if args.check:
        if current != text:
            print(f"{SETTINGS_MD.relative_to(ROOT)} is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SETTINGS_MD.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
