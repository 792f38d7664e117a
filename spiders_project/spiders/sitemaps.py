"""A seed with ``"sitemap": true``: crawl the pages its sitemap lists, for any spider.

``{"url": "https://shop.example/sitemap_index.xml", "sitemap": true}`` reads
the sitemap or sitemap index at the URL (gzip too, whatever its
Content-Type), following an index to its sitemaps, and enqueues every page
listed, for the spider's ``parse``. A URL that is not a sitemap (the site's
home page, say) gives the ``Sitemap:`` lines of its host's robots.txt
instead, read from the copy the cluster shares (``politeness.robots``).

The pages carry the seed's limits (``seed_scope``: ``max_pages``, ``allow``,
...) and the distributed spider's ``scope`` and ``render``. A sitemap that
cannot be read (bad gzip, not XML, neither ``urlset`` nor ``sitemapindex``),
or a seed with no sitemap at all, gives one log line and stat
``sitemaps/bad``; the rest of the crawl goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from protego import Protego
from scrapy import Request
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap

from spiders_project.config import SettingsReader
from spiders_project.crawl.hosts import host_of
from spiders_project.crawl.meta import SCOPE_META, SITEMAP_META
from spiders_project.politeness.robots import ClusterRobotsTxt, origin_of

logger = logging.getLogger(__name__)

# The spider method that reads sitemap seeds (an allowed frontier callback).
CALLBACK = "_parse_sitemap_seed"
# The meta a listed page takes from its seed.
CARRIED = (SCOPE_META, "scope", "render")
# The sitemap protocol's limit on an uncompressed sitemap.
MAX_SITEMAP_BYTES = 50 * 1024 * 1024


class BadSitemap(ValueError):
    """A response a sitemap seed cannot read."""


@dataclass(frozen=True)
class SitemapConfig:
    """Where a seed that is not a sitemap finds its host's robots.txt, read once and checked."""

    # ROBOTSTXT_OBEY: the copy the cluster shares (politeness.robots); off,
    # nothing shares one, and the seed fetches it itself.
    shared_robots: bool

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SitemapConfig:
        return cls(shared_robots=SettingsReader(settings).getbool("ROBOTSTXT_OBEY"))


def sitemap_of(body: bytes) -> Sitemap | None:
    """The sitemap in ``body`` (gzipped or not); None if it is not XML naming one.

    Raises :class:`BadSitemap` for a gzip stream that cannot be read.
    """
    if body[:2] == b"\x1f\x8b":
        try:
            body = gunzip(body, max_size=MAX_SITEMAP_BYTES)
        except Exception as exc:  # noqa: BLE001 - zlib, EOF and size errors alike
            raise BadSitemap(f"bad gzip ({type(exc).__name__}: {exc})") from None
    head = body[:2048].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"<"):
        return None
    try:
        sitemap = Sitemap(body)
    except Exception:  # noqa: BLE001 - lxml's errors: not a sitemap
        return None
    return sitemap if sitemap.type in ("urlset", "sitemapindex") else None


def carried(meta: dict[str, Any], kind: str | None, url: str) -> dict[str, Any]:
    """The meta a request for ``url`` takes from its sitemap's (``kind``: what
    it is, None for a listed page). A listed page's ``scope`` equal to its own
    host is left out (the distributed spider's default), so its entry stays lean."""
    out = {key: meta[key] for key in CARRIED if key in meta}
    if kind is None and "scope" in out and out["scope"] == host_of(url):
        del out["scope"]
    if kind is not None:
        out[SITEMAP_META] = kind
    return out


async def sitemap_requests(spider: Any, response: Response) -> AsyncIterator[Request]:
    """What a sitemap seed's response leads to: sitemaps, listed pages, or robots' sitemaps."""
    stats = spider.crawler.stats
    callback = getattr(spider, CALLBACK)
    try:
        sitemap = sitemap_of(response.body)
    except BadSitemap as exc:
        _bad(stats, response.url, str(exc))
        return
    if sitemap is None:
        if response.meta.get(SITEMAP_META) == "sitemap":
            _bad(stats, response.url, "not a sitemap or sitemap index")
            return
        urls = await robots_sitemaps(spider, response.url)
        if not urls:
            _bad(stats, response.url, "not a sitemap, and its robots.txt lists none")
            return
        for url in urls:
            yield Request(url, callback=callback, meta=carried(response.meta, "sitemap", url))
        return
    locs = [entry["loc"] for entry in sitemap if entry.get("loc")]
    stats.inc_value("sitemaps/read")
    if sitemap.type == "sitemapindex":
        for loc in locs:
            yield Request(loc, callback=callback, meta=carried(response.meta, "sitemap", loc))
    else:
        stats.inc_value("sitemaps/pages", len(locs))
        for loc in locs:
            yield Request(loc, meta=carried(response.meta, None, loc))


async def robots_sitemaps(spider: Any, url: str) -> list[str]:
    """The ``Sitemap:`` lines of the robots.txt of ``url``'s host, as the cluster shares it."""
    crawler = spider.crawler
    if SitemapConfig.from_settings(crawler.settings).shared_robots:
        return await ClusterRobotsTxt.of(crawler).sitemaps(url)
    # robots.txt is not obeyed, so nothing shares it: read it once here.
    response = await crawler.engine.download_async(
        Request(f"{origin_of(url)}/robots.txt", meta={"dont_obey_robotstxt": True})
    )
    if response.status != 200:
        return []
    return list(Protego.parse(response.body.decode("utf-8", "replace")).sitemaps)


def _bad(stats: Any, url: str, why: str) -> None:
    stats.inc_value("sitemaps/bad")
    logger.warning("Sitemap seed: cannot read %s: %s", url, why)
