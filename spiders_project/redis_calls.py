"""The one Redis call path of a process: every answer classified, retried and counted here.

Workers (asyncio), the db_writer, the monitor and the commands (blocking) all
send their Redis calls through a :class:`RedisCalls` or :class:`SyncRedisCalls`
sharing one :class:`RedisState`. That state is the process' only view of
Redis' health, its only backoff policy and its only source of state-change
log lines. Every error Redis or the network can give is sorted into one of
four kinds (:func:`classify`):

- ``CONNECTION``: connection refused or lost, timeouts. Retried with backoff;
  logged once as ``Redis connection lost ...`` and once as ``Redis reconnected``.
- ``REFUSED_WRITES``: error replies after which the same call succeeds later
  without anyone changing it: OOM (maxmemory with noeviction), READONLY (a
  replica after a failover, or ``REPLICAOF``), MISCONF (snapshots failing),
  LOADING, BUSY (a long script), MASTERDOWN. Retried with the same backoff;
  logged once as ``Redis refuses writes (OOM ...), retrying`` and once as
  ``Redis accepts writes again``. Before this module, these ended the loops
  that met them, and the writes of that tick were dropped.
- ``NOSCRIPT``: the script cache is empty (Redis restarted or flushed it):
  the script is loaded and the call sent again at once.
- ``CALLER``: anything else (WRONGTYPE, a Lua runtime error, a bad argument)
  is a bug or a broken key: logged with the command name and raised to the
  caller, never retried blindly.

Nothing here decides *what* to retry: each caller says whether a call may be
repeated (``retry=True`` loops until Redis takes it) or wants the failure back
as :class:`RedisUnavailable` with the backoff to wait (the write batcher keeps
its ops and tries again next tick).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import redis
import redis.asyncio
from redis.exceptions import (
    BusyLoadingError,
    MasterDownError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
)
from scrapy.settings import BaseSettings

from spiders_project.redis_connection import RedisConfig, mask_url, sync_client

T = TypeVar("T")

# Error reply codes after which Redis takes the same write later by itself.
# UNBLOCKED ends a blocking call when a master turns replica: the call is
# refused for the same passing reason as READONLY.
REFUSED_WRITE_CODES = frozenset(
    {"OOM", "READONLY", "MISCONF", "LOADING", "BUSY", "MASTERDOWN", "UNBLOCKED"}
)

# Error replies that refuse reads too: a read that succeeds proves they passed.
REFUSES_READS_TOO = frozenset({"LOADING", "BUSY", "MASTERDOWN"})

# redis-py rewrites the error of a command inside a pipeline to say which one.
_PIPELINE_PREFIX = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)

# Exceptions that mean the call did not reach Redis, or its answer did not come back.
_CONNECTION_EXCEPTIONS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ConnectionError,
    TimeoutError,
    OSError,
)


# What a call Redis answered proves (RedisState.answered).
READ, WRITE, ALLOW_OOM = "read", "write", "allow-oom write"


class ErrorKind(enum.Enum):
    CONNECTION = "connection"
    REFUSED_WRITES = "refused writes"
    NOSCRIPT = "noscript"
    CALLER = "caller"


def error_text(exc: BaseException) -> str:
    """The error reply as Redis sent it, without redis-py's pipeline prefix."""
    # Errors raised from a transaction can carry more than one arg, and str()
    # of those is a tuple's repr.
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return _PIPELINE_PREFIX.sub("", text, count=1)


def error_code(exc: BaseException) -> str:
    """The error reply's code (``OOM``, ``READONLY``, ``WRONGTYPE``, ...), or ""."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code:
        return code
    # redis-py strips the codes it maps to a class and keeps the others in the text.
    first = error_text(exc).split(" ", 1)[0]
    return first if first.isupper() and first.isalpha() else ""


def classify(exc: BaseException) -> ErrorKind:
    """Which of the four kinds (see the module docstring) ``exc`` is."""
    if isinstance(exc, NoScriptError):
        return ErrorKind.NOSCRIPT
    # Mapped classes first: BusyLoadingError (LOADING) is a ConnectionError subclass.
    if isinstance(exc, ReadOnlyError | OutOfMemoryError | BusyLoadingError | MasterDownError):
        return ErrorKind.REFUSED_WRITES
    if isinstance(exc, redis.ResponseError):
        code = error_code(exc)
        if code in REFUSED_WRITE_CODES:
            return ErrorKind.REFUSED_WRITES
        if code == "EXECABORT":
            # A transaction refused as a whole; redis-py raises the first queued
            # command's error instead when it has one, so this is rare.
            cause = exc.__cause__ or exc.__context__
            return classify(cause) if cause is not None else ErrorKind.REFUSED_WRITES
        return ErrorKind.CALLER
    if isinstance(exc, _CONNECTION_EXCEPTIONS):
        return ErrorKind.CONNECTION
    return ErrorKind.CALLER


def is_retryable(exc: BaseException) -> bool:
    """True for errors after which the same call may succeed later."""
    return classify(exc) in (ErrorKind.CONNECTION, ErrorKind.REFUSED_WRITES)


class RedisUnavailable(Exception):
    """A call failed for a reason that passes (connection, refused writes).

    ``delay`` is the backoff to wait before the next try; ``cause`` the error.
    """

    def __init__(self, cause: BaseException, delay: float) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.delay = delay


class RedisState:
    """Redis' health as this process sees it: one connection state, one backoff.

    Shared by every loop of a process. ``failed()`` returns how long to wait
    before the next try (exponential, capped) and logs only the first failure
    of each kind; ``ok()`` logs each recovery once. ``on_reconnect`` callbacks
    run after a recovery from a connection failure: a cache of what Redis
    holds (the worker's seen-cache) must not outlive a Redis that may have
    lost writes. Thread-safe: the monitor serves scrapes on several threads.
    """

    def __init__(
        self, url: str, backoff: float, backoff_max: float, logger: logging.Logger
    ) -> None:
        if not 0 < backoff <= backoff_max:
            raise ValueError("need 0 < REDIS_RECONNECT_BACKOFF <= REDIS_RECONNECT_BACKOFF_MAX")
        self.url = mask_url(url)
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.logger = logger
        self.connected = True
        self.writable = True
        self.on_reconnect: list[Callable[[], None]] = []
        self._delay = backoff
        self._refusal_code = ""
        self._last_caller_error: str | None = None
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, settings: BaseSettings, logger: logging.Logger) -> RedisState:
        """The state of ``REDIS_URL`` with the REDIS_RECONNECT_BACKOFF(_MAX) policy."""
        config = RedisConfig.from_settings(settings)
        return cls(config.url, config.backoff, config.backoff_max, logger)

    @property
    def healthy(self) -> bool:
        return self.connected and self.writable

    def failed(self, exc: BaseException) -> float:
        """Record a retryable failure; the seconds to wait before trying again."""
        with self._lock:
            if classify(exc) is ErrorKind.REFUSED_WRITES:
                if self.writable:
                    self.writable = False
                    code, text = error_code(exc) or type(exc).__name__, error_text(exc)
                    self._refusal_code = code
                    reason = text if text.startswith(code) else f"{code} {text}"
                    self.logger.warning("Redis refuses writes (%s), retrying", reason)
            elif self.connected:
                self.connected = False
                self.logger.warning(
                    "Redis connection lost (%s: %s), reconnecting to %s",
                    type(exc).__name__,
                    exc,
                    self.url,
                )
            delay = self._delay
            self._delay = min(self._delay * 2, self.backoff_max)
            return delay

    def ok(self) -> None:
        """Record a call Redis answered: log the recoveries, reset the backoff."""
        callbacks: list[Callable[[], None]] = []
        with self._lock:
            if not self.connected:
                self.connected = True
                self.logger.info("Redis reconnected at %s", self.url)
                callbacks = list(self.on_reconnect)
            if not self.writable and self._refusal_code in REFUSES_READS_TOO:
                self._writes_back()  # LOADING, BUSY: an answered read proves they passed
            self._delay = self.backoff
            self._last_caller_error = None
        for callback in callbacks:
            callback()

    def writes_ok(self) -> None:
        """Record a write Redis applied (a read proves nothing about OOM or READONLY)."""
        self.answered(WRITE)

    def answered(self, proof: str) -> None:
        """Record a call Redis answered, and what its success proves (READ, WRITE, ALLOW_OOM).

        An ``allow-oom`` script is still refused on a replica (READONLY) or
        with failing snapshots (MISCONF), so its success ends those states,
        not OOM.
        """
        self.ok()
        if proof == READ:
            return
        with self._lock:
            if not self.writable and (proof == WRITE or self._refusal_code != "OOM"):
                self._writes_back()

    def failure(self, command: str, exc: Exception) -> float:
        """Handle an error of ``command``: the backoff before a retry, or raise it.

        Caller errors (and a NOSCRIPT that reloading did not cure) are logged
        with the command name and raised; passing failures are recorded.
        """
        if classify(exc) in (ErrorKind.CALLER, ErrorKind.NOSCRIPT):
            self.refused(command, exc)
            raise exc
        return self.failed(exc)

    def _writes_back(self) -> None:
        self.writable = True
        self._refusal_code = ""
        self.logger.info("Redis accepts writes again")

    def refused(self, command: str, exc: BaseException) -> None:
        """Log a caller's error (see ``ErrorKind.CALLER``) with the command name.

        Once until a call succeeds or the error changes: a broken key would
        otherwise log a line at every retry or scrape.
        """
        line = f"Redis refused {command}: {type(exc).__name__}: {exc}"
        with self._lock:
            if line == self._last_caller_error:
                return
            self._last_caller_error = line
        self.logger.error("%s", line)


# --- Lua ------------------------------------------------------------------------


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
    """``<directory>/<name>.lua`` as a :class:`LuaScript` (read once per process)."""
    return LuaScript(name, (directory / f"{name}.lua").read_text())


# --- the call paths ---------------------------------------------------------------


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
            try:
                result = await send()
            except Exception as exc:  # noqa: BLE001 - every error is classified
                delay = self.state.failure(name, exc)
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
    requests passes one that raises when it should stop.
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
            try:
                result = send()
            except Exception as exc:  # noqa: BLE001 - every error is classified
                delay = self.state.failure(name, exc)
                if not retry:
                    raise RedisUnavailable(exc, delay) from exc
                self.sleep(delay)
                continue
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
