"""Politeness settings beyond the host delays (``delays.HostPoliteness``): read once, checked.

One typed config for the politeness middlewares, so a bad value stops a
worker at start with one line naming it (``scrapy crawl`` reads it before
anything starts) instead of failing inside the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class PacingConfig:
    """What SitePacingMiddleware, the navigation turns and ClusterRobotsTxt read."""

    retry_after_max: float  # RETRY_AFTER_MAX: the longest pause a Retry-After gets (s)
    navigation_guard: float  # NAVIGATION_GUARD: extra spacing of rendered navigations (s)
    robots_ttl: float  # ROBOTSTXT_TTL: how long a fetched robots.txt is kept (s)
    robots_error_ttl: float  # ROBOTSTXT_ERROR_TTL: how long a failed fetch counts (s)
    download_timeout: float  # DOWNLOAD_TIMEOUT: bounds the robots.txt fetch lock

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PacingConfig:
        read = SettingsReader(settings)
        return cls(
            retry_after_max=read.getfloat("RETRY_AFTER_MAX", minimum=0),
            navigation_guard=read.getfloat("NAVIGATION_GUARD", minimum=0),
            robots_ttl=read.getfloat("ROBOTSTXT_TTL", above=0),
            robots_error_ttl=read.getfloat("ROBOTSTXT_ERROR_TTL", above=0),
            download_timeout=read.getfloat("DOWNLOAD_TIMEOUT", above=0),
        )

    @property
    def robots_lock_ms(self) -> int:
        """One worker fetches an origin's robots.txt; the others wait at most this
        long for it: the fetch's own timeout plus 30 s."""
        return round((self.download_timeout + 30) * 1000)
