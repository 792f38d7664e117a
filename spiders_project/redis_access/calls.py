"""The two call paths: asyncio (workers) and blocking (db_writer, monitor, commands).

Both send one round trip at a time through ``send()`` callables and hand
every error to the process' :class:`~spiders_project.redis_access.state.RedisState`,
which says whether to wait and retry or to raise.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.exceptions import NoScriptError
from scrapy.settings import BaseSettings

from spiders_project.redis_access.connection import sync_client
from spiders_project.redis_access.errors import RedisUnavailable
from spiders_project.redis_access.lua import LuaScript
from spiders_project.redis_access.state import ALLOW_OOM, READ, WRITE, RedisState

T = TypeVar("T")


def _writes(script: LuaScript) -> bool | str:
    return ALLOW_OOM if script.allow_oom else True


def _proof(writes: bool | str) -> str:
    """What a call's success proves: ``writes`` is True, False or ALLOW_OOM."""
    if isinstance(writes, str):
        return writes
    return WRITE if writes else READ


class RedisCalls:
    """The asyncio call path of a worker: one client, one state, one round-trip counter."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        state: RedisState,
        count: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.state = state
        self._count = count

    def round_trip(self) -> None:
        if self._count is not None:
            self._count()

    async def call(
        self,
        name: str,
        send: Callable[[], Awaitable[T]],
        *,
        retry: bool = True,
        writes: bool | str = True,
        deadline: float | None = None,
    ) -> T:
        """Await ``send()`` (one round trip, named ``name`` in logs), handling every error.

        ``retry=True`` retries passing failures with backoff until Redis
        answers (or ``deadline``, a ``loop.time()``, is passed: then
        :class:`RedisUnavailable` is raised); ``retry=False`` raises it at once.
        Caller errors are logged and raised as they are. ``writes`` says what a
        success proves: True (writes are accepted), False (a read: nothing about
        writes) or ALLOW_OOM (an ``allow-oom`` script: all but OOM passed).
        """
        loop = asyncio.get_running_loop()
        while True:
            self.round_trip()
            sent = self.state.epoch
            try:
                result = await send()
            except Exception as exc:  # noqa: BLE001 - every error is classified
                delay = self.state.failure(name, exc, sent)
                if not retry or (deadline is not None and loop.time() + delay > deadline):
                    raise RedisUnavailable(exc, delay) from exc
                await asyncio.sleep(delay)
                continue
            self.state.answered(_proof(writes))
            return result

    async def command(
        self, *args: Any, retry: bool = True, writes: bool = True, deadline: float | None = None
    ) -> Any:
        """One Redis command (``calls.command("LLEN", key)``), with errors handled as ``call``."""
        return await self.call(
            str(args[0]),
            lambda: self.client.execute_command(*args),
            retry=retry,
            writes=writes,
            deadline=deadline,
        )

    async def pipelined(
        self, name: str, commands: Sequence[Sequence[Any]], *, retry: bool = True
    ) -> list[Any]:
        """Read-only ``commands`` in one round trip (no transaction), errors handled as ``call``."""

        async def send() -> list[Any]:
            async with self.client.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                return await pipe.execute()

        return await self.call(name, send, retry=retry, writes=False)

    async def script(
        self,
        script: LuaScript,
        keys: list[Any],
        args: list[Any],
        *,
        retry: bool = True,
        deadline: float | None = None,
    ) -> Any:
        """Run ``script`` by SHA; on NOSCRIPT load it and run it again at once."""

        async def send() -> Any:
            try:
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                self.round_trip()
                await self.client.script_load(script.source)
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)

        return await self.call(
            f"script {script.name}", send, retry=retry, writes=_writes(script), deadline=deadline
        )


class SyncRedisCalls:
    """The blocking call path (db_writer, monitor, commands), same rules as :class:`RedisCalls`.

    ``sleep(seconds)`` waits between retries; a process that must notice stop
    requests passes one that raises when it should stop. Threads may share it
    (the db_writer's writer per spider): the client's pool gives each its own
    connection, and a lock keeps the shared state's changes, and their log
    lines, one at a time.
    """

    def __init__(
        self,
        client: redis.Redis,
        state: RedisState,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.state = state
        self.sleep = sleep
        self._state_lock = threading.Lock()

    def call(
        self,
        name: str,
        send: Callable[[], T],
        *,
        retry: bool = True,
        writes: bool | str = True,
    ) -> T:
        """``send()`` with errors handled as :meth:`RedisCalls.call` does."""
        while True:
            sent = self.state.epoch
            try:
                result = send()
            except Exception as exc:  # noqa: BLE001 - every error is classified
                with self._state_lock:
                    delay = self.state.failure(name, exc, sent)
                if not retry:
                    raise RedisUnavailable(exc, delay) from exc
                self.sleep(delay)
                continue
            with self._state_lock:
                self.state.answered(_proof(writes))
            return result

    def command(self, *args: Any, retry: bool = True, writes: bool = True) -> Any:
        """One Redis command (``calls.command("LLEN", key)``), with errors handled as ``call``."""
        return self.call(
            str(args[0]),
            lambda: self.client.execute_command(*args),
            retry=retry,
            writes=writes,
        )

    def pipelined(
        self, name: str, commands: Sequence[Sequence[Any]], *, retry: bool = True
    ) -> list[Any]:
        """Read-only ``commands`` in one round trip (no transaction), errors handled as ``call``."""

        def send() -> list[Any]:
            with self.client.pipeline(transaction=False) as pipe:
                for command in commands:
                    pipe.execute_command(*command)
                return pipe.execute()

        return self.call(name, send, retry=retry, writes=False)

    def script(
        self, script: LuaScript, keys: list[Any], args: list[Any], *, retry: bool = True
    ) -> Any:
        """Run ``script`` by SHA; on NOSCRIPT load it and run it again at once."""

        def send() -> Any:
            try:
                return self.client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                self.client.script_load(script.source)
                return self.client.evalsha(script.sha, len(keys), *keys, *args)

        return self.call(f"script {script.name}", send, retry=retry, writes=_writes(script))


def one_shot_calls(settings: BaseSettings, logger: logging.Logger) -> SyncRedisCalls:
    """The call path of a one-shot command (``scrapy crawlstatus``, ``deadletters``).

    Its state logs nowhere: the command says itself, in one line, why Redis
    did not do what it asked; the state's lines (``..., retrying``), written
    for long-running processes, would only contradict it, and Scrapy
    configures no logging for commands, so Python would print them bare.
    """
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return SyncRedisCalls(sync_client(settings), RedisState.from_settings(settings, logger))
