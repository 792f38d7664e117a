"""Lua scripts read from files (redis_access/lua.py): includes from the same folder and
from below the package root, each file once per script."""

from __future__ import annotations

from pathlib import Path

import pytest

from spiders_project.redis_access.lua import (
    INCLUDE,
    PACKAGE_ROOT,
    LuaIncludeError,
    LuaScript,
    load_lua,
    read_lua,
    without_comments,
)

CLOCK = "redis_access/lua/clock.lua"
# The scripts that read the time through the shared clock (the seen-set's
# scripts through seen.lua as well).
CLOCK_USERS = [
    ("politeness", "gate"),
    ("politeness", "pause_host"),
    ("proxies", "ban"),
    ("proxies", "banned"),
    ("frontier", "ack"),
    ("frontier", "enqueue"),
    ("frontier", "expired"),
    ("frontier", "lease"),
    ("frontier", "renew"),
    ("frontier", "requeue"),
    ("frontier", "seen_add"),
    ("frontier", "seen_migrate"),
]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_from_the_same_folder(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "lib.lua", "local x = 1\n")
    script = _write(tmp_path / "a" / "main.lua", "-- head\n--!include lib.lua\nreturn x\n")
    assert read_lua(script, tmp_path) == "-- head\nlocal x = 1\nreturn x\n"


def test_include_from_another_folder_below_the_root(tmp_path: Path) -> None:
    _write(tmp_path / "shared" / "lua" / "clock.lua", "local function f() end\n")
    one = _write(tmp_path / "one" / "lua" / "a.lua", "--!include shared/lua/clock.lua\nf()\n")
    two = _write(tmp_path / "two" / "lua" / "b.lua", "--!include shared/lua/clock.lua\n")
    assert read_lua(one, tmp_path) == "local function f() end\nf()\n"
    assert read_lua(two, tmp_path) == "local function f() end\n"


def test_includes_nest_and_each_file_goes_in_once(tmp_path: Path) -> None:
    _write(tmp_path / "shared" / "clock.lua", "-- clock\n")
    _write(tmp_path / "a" / "seen.lua", "--!include shared/clock.lua\n-- seen\n")
    script = _write(
        tmp_path / "a" / "main.lua",
        "--!include shared/clock.lua\n--!include seen.lua\n--!include seen.lua\n-- main\n",
    )
    assert read_lua(script, tmp_path) == "-- clock\n-- seen\n-- main\n"


def test_a_file_that_includes_itself_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "one.lua", "--!include two.lua\n")
    _write(tmp_path / "a" / "two.lua", "--!include b/three.lua\n")
    _write(tmp_path / "b" / "three.lua", "--!include a/one.lua\n")
    with pytest.raises(LuaIncludeError, match="one.lua -> two.lua -> three.lua -> one.lua"):
        read_lua(tmp_path / "a" / "one.lua", tmp_path)


def test_a_missing_include_is_an_error(tmp_path: Path) -> None:
    script = _write(tmp_path / "a" / "main.lua", "--!include shared/none.lua\n")
    with pytest.raises(FileNotFoundError):
        read_lua(script, tmp_path)


def test_the_include_line_marks_only_a_line_start(tmp_path: Path) -> None:
    text = "-- see ``--!include seen.lua``\nreturn 1\n"
    assert read_lua(_write(tmp_path / "main.lua", text), tmp_path) == text


@pytest.mark.parametrize(("folder", "name"), CLOCK_USERS)
def test_every_clock_user_gets_the_shared_clock_once(folder: str, name: str) -> None:
    script = load_lua(PACKAGE_ROOT / folder / "lua", name)
    clock = without_comments((PACKAGE_ROOT / CLOCK).read_text())
    assert script.source.count(clock) == 1
    assert script.source.count("local function now_ms(") == 1
    assert "redis.call('TIME')" not in script.source.replace(clock, "")


def test_every_script_of_the_package_resolves_its_includes() -> None:
    scripts = sorted(PACKAGE_ROOT.glob("*/lua/*.lua"))
    assert len(scripts) > 20
    for path in scripts:
        source = load_lua(path.parent, path.stem).source
        assert not any(line.startswith(INCLUDE) for line in source.splitlines()), path
        # Redis reads the shebang (flags) on the first line only.
        first = path.read_text().split("\n", 1)[0]
        if first.startswith("#!"):
            assert source.split("\n", 1)[0] == first, path
        # Comments go, lines stay: Redis' errors name the file's line numbers.
        assert source.count("\n") == read_lua(path).count("\n"), path


def test_comment_lines_are_emptied_and_code_shebang_and_strings_kept() -> None:
    text = "#!lua flags=allow-oom\n-- KEYS[1] x\n  -- indented\nlocal a = '--not' -- tail\nreturn a"
    assert (
        without_comments(text) == "#!lua flags=allow-oom\n\n\nlocal a = '--not' -- tail\nreturn a"
    )


def test_allow_oom_comes_from_the_shebang_line() -> None:
    assert LuaScript("a", "#!lua flags=allow-oom\nreturn 1\n").allow_oom
    assert not LuaScript("b", "-- allow-oom\nreturn 1\n").allow_oom
