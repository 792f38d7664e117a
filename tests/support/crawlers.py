"""Crawlers built from the project's settings, for tests of one component.

``scrapy.utils.test.get_crawler`` starts from Scrapy's defaults alone, so a
component that reads a project setting (FRONTIER_LEASE_TIMEOUT, say) would
see None there, which no real worker ever does. These crawlers start from
``spiders_project.settings``, as ``scrapy crawl`` does, with the test's
overrides on top, and never install a reactor.
"""

from __future__ import annotations

from typing import Any

from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.utils.test import get_crawler

from spiders_project.config import load_settings

NEVER_CONNECTS = "redis://127.0.0.1:9/0"  # the discard port: a client that must not be used


def project_crawler(spidercls: type[Spider], overrides: dict[str, Any] | None = None) -> Crawler:
    """A crawler with the project's settings and ``overrides``, as ``scrapy crawl -s`` gives."""
    settings = {**load_settings(overrides).copy_to_dict(), "TWISTED_REACTOR_ENABLED": False}
    return get_crawler(spidercls, settings)
