"""Redis' health as one process sees it: one connection state, one backoff policy."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from spiders_project.redis_access.connection import RedisConfig, mask_url
from spiders_project.redis_access.errors import (
    REFUSES_READS_TOO,
    ErrorKind,
    classify,
    error_code,
    error_text,
)

# What a call Redis answered proves (RedisState.answered).
READ, WRITE, ALLOW_OOM = "read", "write", "allow-oom write"


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
        # The user REDIS_URL logs in as, for the NOPERM line.
        username = urlsplit(url).username if "://" in url else None
        self.user = repr(username or "default")
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.logger = logger
        self.connected = True
        self.writable = True
        # Counts the recoveries from a connection failure. A call notes it when
        # sent: one sent before the last recovery (during a partition, its TCP
        # retry due after the heal) that times out afterwards is stale news,
        # not a new loss, so it logs no second "lost"/"reconnected" pair.
        self.epoch = 0
        self.on_reconnect: list[Callable[[], None]] = []
        # Called with the command's name at every NOPERM (a worker counts
        # them in the stat ``redis/noperm``); ``noperm`` counts them here.
        self.on_noperm: list[Callable[[str], None]] = []
        self.noperm = 0
        # Called with the reply's code (OOM, READONLY, NOREPLICAS, ...) at every
        # refused write (a worker counts them in ``redis/writes_refused/<code>``).
        self.on_refused_writes: list[Callable[[str], None]] = []
        self._denied: set[str] = set()
        self._delay = backoff
        self._refusal_code = ""
        self._last_caller_error: str | None = None
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, settings: BaseSettings, logger: logging.Logger) -> RedisState:
        """The state of ``REDIS_URL`` with the REDIS_RECONNECT_BACKOFF(_MAX) policy."""
        config = RedisConfig.from_settings(settings)
        return cls(config.where, config.backoff, config.backoff_max, logger)

    def failed(self, exc: BaseException, command: str = "", since: int | None = None) -> float:
        """Record a retryable failure of ``command``; the seconds to wait before trying again.

        ``since`` is the ``epoch`` when the call was sent, if known: a
        connection failure of a call sent before the last recovery does not
        mark the connection lost again.
        """
        with self._lock:
            kind = classify(exc)
            if kind is ErrorKind.NOPERM:
                self._no_permission(command, exc)
            elif kind is ErrorKind.REFUSED_WRITES:
                code = error_code(exc) or type(exc).__name__
                if self.writable:
                    self.writable = False
                    text = error_text(exc)
                    self._refusal_code = code
                    reason = text if text.startswith(code) else f"{code} {text}"
                    self.logger.warning("Redis refuses writes (%s), retrying", reason)
                for callback in self.on_refused_writes:
                    callback(code)
            elif self.connected and (since is None or since == self.epoch):
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

    def _no_permission(self, command: str, exc: BaseException) -> None:
        """A NOPERM: logged once per command (the ACL rarely changes alone), always counted."""
        self.noperm += 1
        name = command or "a command"
        if name not in self._denied:
            self._denied.add(name)
            self.logger.error(
                "Redis user %s may not run %s (%s: %s); retrying until the ACL allows it"
                " (scrapy redis-acl)",
                self.user,
                name,
                type(exc).__name__,
                error_text(exc),
            )
        for callback in self.on_noperm:
            callback(name)

    def ok(self) -> None:
        """Record a call Redis answered: log the recoveries, reset the backoff."""
        callbacks: list[Callable[[], None]] = []
        with self._lock:
            if not self.connected:
                self.connected = True
                self.epoch += 1
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

    def failure(self, command: str, exc: Exception, since: int | None = None) -> float:
        """Handle an error of ``command``: the backoff before a retry, or raise it.

        Caller errors (and a NOSCRIPT that reloading did not cure) are logged
        with the command name and raised; passing failures are recorded.
        """
        if classify(exc) in (ErrorKind.CALLER, ErrorKind.NOSCRIPT):
            self.refused(command, exc)
            raise exc
        return self.failed(exc, command, since)

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
