"""What Redis refused inside one tick's EXEC, and how long the batcher waits to send it again.

EXEC answers each command of a transaction on its own, so one refused command
(a key of the wrong type) fails its kind's ops alone while the rest is applied;
the write batcher (``batcher.py``) keeps those ops and sends them again. Refused
writes (OOM, READONLY) and a lost connection are the shared state's to back
off from and log; a NOSCRIPT (Redis lost its script cache) is sent again at
once, after the batcher has loaded the scripts (``transaction.BY_SHA``); any
other refusal is a caller's error, retried after the longest backoff and
logged once until it passes.
"""

from __future__ import annotations

import logging
from typing import Any

from spiders_project.frontier.write_behind.ops import ACK
from spiders_project.frontier.write_behind.transaction import Span
from spiders_project.redis_access import ErrorKind, RedisState, classify


class Refusals:
    """Reads the replies of a tick's EXEC; remembers the refusal it logged last."""

    def __init__(self, logger: logging.Logger) -> None:
        # The batcher's, so that these lines read as its own.
        self._logger = logger
        # The command Redis refused last (a caller's error), logged once until it passes.
        self._refusal: str | None = None

    def failed_kinds(
        self, spans: list[Span], results: list[Any], state: RedisState
    ) -> tuple[set[str], float]:
        """The op kinds whose commands Redis refused inside EXEC, and the wait before resending.

        Logs a refused command once (until it passes); refused writes (OOM,
        READONLY) go through the shared state, which logs them once too.
        """
        failed: set[str] = set()
        delay = 0.0
        refusal: str | None = None
        for kind, first, end, name in spans:
            errors = [r for r in results[first:end] if isinstance(r, Exception)]
            if not errors:
                continue
            failed.add(kind)
            exc = errors[0]
            if all(classify(e) is ErrorKind.NOSCRIPT for e in errors):
                # Its scripts are gone from Redis' cache (transaction.BY_SHA):
                # the batcher loads them and sends these ops again at once.
                continue
            passing = (ErrorKind.REFUSED_WRITES, ErrorKind.CONNECTION, ErrorKind.NOPERM)
            if classify(exc) in passing:
                # A NOPERM is the state's too: logged once with the command, counted.
                delay = max(delay, state.failed(exc, name))
                continue
            refusal = f"{name}: {type(exc).__name__}: {exc}"
            if refusal != self._refusal:
                self._logger.error("Redis refused %s; keeping those writes and retrying", refusal)
            delay = max(delay, state.backoff_max)
        if self._refusal is not None and refusal is None:
            self._logger.info("Redis took the writes it had refused (%s)", self._refusal)
        self._refusal = refusal
        if not delay:
            # Acks alone (ack.lua) are taken even out of memory: only a
            # tick that wrote something proves Redis accepts writes again.
            if any(kind != ACK for kind, _, _, _ in spans):
                state.writes_ok()
            else:
                state.ok()
        return failed, delay
