"""One log line per Redis connection state change, and the backoff between tries."""

from __future__ import annotations

import logging

from spiders_project.redis_connection import mask_url


class ConnectionState:
    """Shared by every loop of a process that talks to the same Redis.

    ``failed()`` returns how long to wait before the next try (exponential,
    capped) and logs only the first failure; ``ok()`` logs the recovery once.
    """

    def __init__(
        self, url: str, backoff: float, backoff_max: float, logger: logging.Logger
    ) -> None:
        self.url = mask_url(url)
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.logger = logger
        self.connected = True
        self._delay = backoff

    def failed(self, exc: BaseException) -> float:
        if self.connected:
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
        if not self.connected:
            self.connected = True
            self.logger.info("Redis reconnected at %s", self.url)
        self._delay = self.backoff
