"""The ``MONITOR_*`` settings, read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings


@dataclass(frozen=True)
class MonitorConfig:
    """Where the exporter listens, what it reports on, how long it waits for Redis."""

    host: str
    port: int
    spiders: tuple[str, ...]
    redis_timeout: float
    worker_retention: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> MonitorConfig:
        config = cls(
            host=settings.get("MONITOR_HOST"),
            port=settings.getint("MONITOR_PORT"),
            spiders=tuple(
                dict.fromkeys(s.strip() for s in settings.getlist("MONITOR_SPIDERS") if s.strip())
            ),
            redis_timeout=settings.getfloat("MONITOR_REDIS_TIMEOUT"),
            worker_retention=settings.getfloat("STATS_WORKER_RETENTION"),
        )
        if not 0 <= config.port <= 65535:
            raise ValueError(f"MONITOR_PORT must be a TCP port, not {config.port}")
        if not config.spiders:
            raise ValueError("MONITOR_SPIDERS names no spider")
        if config.redis_timeout <= 0:
            raise ValueError(f"MONITOR_REDIS_TIMEOUT must be positive, not {config.redis_timeout}")
        return config
