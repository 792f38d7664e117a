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


@cache
def load_lua(directory: Path, name: str) -> LuaScript:
    """``<directory>/<name>.lua`` as a :class:`LuaScript` (read once per process).

    A line ``--!include <other>.lua`` is replaced by that file of the same
    directory: Redis runs one script text, and code that several scripts
    must run atomically with their own (the seen-set) is written once.
    """
    return LuaScript(name, _read(directory, f"{name}.lua"))


def _read(directory: Path, filename: str) -> str:
    lines = []
    for line in (directory / filename).read_text().splitlines(keepends=True):
        if line.startswith(INCLUDE):
            line = _read(directory, line[len(INCLUDE) :].strip())
        lines.append(line)
    return "".join(lines)


INCLUDE = "--!include "
