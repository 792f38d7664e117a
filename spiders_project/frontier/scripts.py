"""The frontier's Lua scripts, read from ``lua/*.lua`` and registered once per client."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

LUA_DIR = Path(__file__).with_name("lua")


@cache
def lua_source(name: str) -> str:
    """The text of ``lua/<name>.lua``."""
    return (LUA_DIR / f"{name}.lua").read_text()


class FrontierScripts:
    """``register_script`` objects for one Redis client (sync or asyncio)."""

    def __init__(self, client: Any) -> None:
        self.enqueue = client.register_script(lua_source("enqueue"))
        self.lease = client.register_script(lua_source("lease"))
        self.renew = client.register_script(lua_source("renew"))
        self.requeue = client.register_script(lua_source("requeue"))
        self.expired = client.register_script(lua_source("expired"))
        self.pause_host = client.register_script(lua_source("pause_host"))
        self.gate = client.register_script(lua_source("gate"))
