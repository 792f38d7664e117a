"""Lua scripts read from ``.lua`` files, one object per file and process."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path


class LuaScript:
    """A script read from a ``.lua`` file, run by SHA (EVALSHA) or by source (EVAL).

    Not bound to a client: the same object serves the asyncio and the
    blocking call path. A script whose shebang line allows it to run out of
    memory (``#!lua flags=allow-oom``) succeeds while Redis refuses writes
    for OOM, so its success proves less than another write's
    (``RedisState.answered``).
    """

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        first_line = source.split("\n", 1)[0]
        self.allow_oom = first_line.startswith("#!") and "allow-oom" in first_line

    def __repr__(self) -> str:
        return f"LuaScript({self.name!r})"


# The package root (spiders_project/): an include with a folder in its name
# is read from below it, so scripts of every folder can share one file.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
INCLUDE = "--!include "


class LuaIncludeError(Exception):
    """A ``--!include`` that cannot be resolved (a file that includes itself)."""


@cache
def load_lua(directory: Path, name: str) -> LuaScript:
    """``<directory>/<name>.lua`` as a :class:`LuaScript` (read once per process).

    Includes are replaced by the file they name (:func:`read_lua`): Redis runs
    one script text, and code that several scripts must run atomically with
    their own (the seen-set, the script clock) is written once.
    """
    return LuaScript(name, without_comments(read_lua(directory / f"{name}.lua")))


def without_comments(source: str) -> str:
    """``source`` with each line that is only a comment emptied, its newline kept.

    The headers that say what a script's KEYS and ARGV are stay in the
    files, not in what Redis gets: a script sent by source inside MULTI (EVAL,
    so a NOSCRIPT cannot fail one command of a transaction: the dead letters'
    requeue) is read and hashed (SHA1) whole by Redis at every call, and the
    scripts' comments are often the larger part of their text. Line
    numbers stay as in the files, so Redis' errors still point at the right
    line. A shebang (``#!lua``) is not a comment and stays.
    """
    return "".join(
        "\n" if line.lstrip().startswith("--") else line
        for line in source.splitlines(keepends=True)
    )


def read_lua(path: Path, root: Path = PACKAGE_ROOT) -> str:
    """The text of ``path`` with every ``--!include`` line replaced by a file's text.

    - ``--!include other.lua``: a file of the including file's folder;
    - ``--!include redis_access/lua/clock.lua``: a name with a folder is below
      ``root`` (the package), for a file that scripts of several folders share.

    Includes nest, and each file goes into a script once: a script may include
    the clock and a file that includes it too, without defining its functions
    twice. A file that includes itself, directly or not, raises
    :class:`LuaIncludeError`.
    """
    path = path.resolve()
    return _read(path, root, included={path}, within=(path,))


def _read(path: Path, root: Path, included: set[Path], within: tuple[Path, ...]) -> str:
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith(INCLUDE):
            name = line[len(INCLUDE) :].strip()
            target = ((root if "/" in name else path.parent) / name).resolve()
            if target in within:
                chain = " -> ".join(p.name for p in (*within, target))
                raise LuaIncludeError(f"{path}: includes itself ({chain})")
            if target in included:
                continue
            included.add(target)
            line = _read(target, root, included, (*within, target))
        lines.append(line)
    return "".join(lines)
