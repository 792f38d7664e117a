"""Cluster-wide politeness: which host a request belongs to, and its delay.

The frontier, not each worker's downloader, spaces the fetches of one host:
the lease script hands out one request of a delayed host per turn and moves
the host's next turn forward, so N workers together respect the delay.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.settings import BaseSettings


def host_of(url: str) -> str:
    """The politeness and scope unit of a URL: lower-case ``host[:port]``."""
    return urlsplit(url).netloc.lower()


class HostPoliteness:
    """Delay per host: the per-host override if any, else the default, plus a guard.

    The guard absorbs the few milliseconds between a lease and the request
    leaving the worker, so fetches measured at the site stay at least the
    configured delay apart.
    """

    def __init__(self, default: float, overrides: dict[str, float], guard: float) -> None:
        self.default_ms = round(default * 1000)
        self.overrides_ms = {h.lower(): round(d * 1000) for h, d in overrides.items()}
        self.guard_ms = round(guard * 1000)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> HostPoliteness:
        return cls(
            settings.getfloat("DOWNLOAD_DELAY"),
            {h: float(d) for h, d in settings.getdict("HOST_DOWNLOAD_DELAYS").items()},
            settings.getfloat("POLITENESS_GUARD"),
        )

    def delay_ms(self, host: str) -> int:
        delay = self.overrides_ms.get(host, self.default_ms)
        return delay + self.guard_ms if delay > 0 else 0
