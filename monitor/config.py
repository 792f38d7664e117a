"""The ``MONITOR_*`` settings, read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


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
        read = SettingsReader(settings)
        port = read.getint("MONITOR_PORT", minimum=0)
        read.check(port <= 65535, "MONITOR_PORT", "must be a TCP port (0-65535)")
        spiders = tuple(
            dict.fromkeys(s.strip() for s in read.getlist("MONITOR_SPIDERS") if s.strip())
        )
        read.check(bool(spiders), "MONITOR_SPIDERS", "names no spider")
        return cls(
            host=read.getstr("MONITOR_HOST"),
            port=port,
            spiders=spiders,
            redis_timeout=read.getfloat("MONITOR_REDIS_TIMEOUT", above=0),
            worker_retention=read.getfloat("STATS_WORKER_RETENTION", above=0),
        )
