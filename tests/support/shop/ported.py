"""A spider as written for scrapy-redis, untouched: the porting test changes only its import.

Its own seed key (``redis_key``), its own ``make_request_from_data`` and a
smaller seed batch, as scrapy-redis spiders often have.
"""

from __future__ import annotations

import json
from typing import Any

import scrapy
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import Rule
from scrapy_redis.spiders import RedisCrawlSpider


class PortedProduct(scrapy.Item):
    sku = scrapy.Field()
    price = scrapy.Field()
    seen_on = scrapy.Field()


class PortedShopSpider(RedisCrawlSpider):
    name = "shop_ported"
    redis_key = "%(name)s:seeds"
    redis_batch_size = 4
    rules = (
        Rule(LinkExtractor(restrict_css="a.cat, .pager")),
        Rule(
            LinkExtractor(restrict_css=".product a.detail"),
            callback="parse_product",
            process_request="remember_listing",
        ),
    )

    def make_request_from_data(self, data: bytes) -> scrapy.Request:
        seed = json.loads(data)
        return scrapy.Request(seed["start"], dont_filter=True)

    def remember_listing(self, request: scrapy.Request, response: Any) -> scrapy.Request:
        request.meta["item"] = PortedProduct(seen_on=response.url)
        return request

    def parse_product(self, response: Any) -> Any:
        item = response.meta["item"]
        item["sku"] = response.url.rsplit("/", 1)[1]
        item["price"] = response.css(".price::text").get()
        yield item
