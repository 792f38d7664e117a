"""The frontier's Lua scripts, read once from ``lua/*.lua``.

They are :class:`~spiders_project.redis_access.LuaScript` objects, not bound
to a client: workers run them through their asyncio call path (EVALSHA, with
NOSCRIPT handled there), the batcher by SHA inside MULTI too (NOSCRIPT
handled by it: ``transaction.BY_SHA``), and the commands
and tests through the blocking one.
"""

from __future__ import annotations

from pathlib import Path

from spiders_project.redis_access import LuaScript, load_lua

LUA_DIR = Path(__file__).with_name("lua")


def lua_source(name: str) -> str:
    """The text of ``lua/<name>.lua``."""
    return load_lua(LUA_DIR, name).source


class FrontierScripts:
    """Every frontier script, by name."""

    def __init__(self) -> None:
        self.enqueue: LuaScript = load_lua(LUA_DIR, "enqueue")
        self.lease = load_lua(LUA_DIR, "lease")
        self.renew = load_lua(LUA_DIR, "renew")
        self.requeue = load_lua(LUA_DIR, "requeue")
        self.expired = load_lua(LUA_DIR, "expired")
        self.reconcile = load_lua(LUA_DIR, "reconcile")
        self.reject_host = load_lua(LUA_DIR, "reject_host")
        self.ack = load_lua(LUA_DIR, "ack")
        self.seen_add = load_lua(LUA_DIR, "seen_add")
        self.seen_migrate = load_lua(LUA_DIR, "seen_migrate")
