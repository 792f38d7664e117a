"""``RedisCrawlSpider`` and ``RedisSitemapSpider``: Scrapy's rule-based spiders, fed from Redis.

Both read seeds as :class:`~.base.RedisSpider` does. Everything else is
Scrapy's own CrawlSpider or SitemapSpider: their requests name their
callbacks (``_callback``, ``_errback``, ``_parse_sitemap``, the rule
callbacks) by method name, which the frontier accepts for any method of the
spider's classes (``frontier/codec/callbacks.py``).

scrapy-redis' ``RedisCrawlSpider`` is ``RedisMixin`` + ``CrawlSpider``; this
one is our ``RedisSpider`` (which replaces the mixin's seed reading) +
``CrawlSpider``, so a ported spider changes only its import line.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.spiders import CrawlSpider, SitemapSpider

from spiders_project.scope.seeds import Seed
from spiders_project.spiders.base import RedisSpider


class RedisCrawlSpider(RedisSpider, CrawlSpider):
    """A CrawlSpider: seeds go to ``parse_start_url`` and the rules, as start URLs do.

    Rules with callbacks, ``follow``, ``process_links``, ``process_request``,
    ``cb_kwargs`` and errbacks all work as in Scrapy.
    """


class RedisSitemapSpider(RedisSpider, SitemapSpider):
    """A SitemapSpider whose seeds are sitemap URLs (a sitemap, a sitemap index or robots.txt).

    ``lpush <name>:start_urls https://shop.example/sitemap.xml``; the pages
    listed go to the callbacks of ``sitemap_rules``; ``sitemap_follow`` and
    ``sitemap_alternate_links`` work as in Scrapy. ``sitemap_urls`` on the
    class is not read: seeds come from Redis, once for the whole cluster.
    """

    def make_request_from_seed(self, seed: Seed) -> Request:
        request = super().make_request_from_seed(seed)
        return request.replace(callback=self._parse_sitemap)
