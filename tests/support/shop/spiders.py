"""Spiders of the shop (``tests/support/shop/site.py``), written as Scrapy users write them.

``ShopLogic`` is an ordinary CrawlSpider body: rules with callbacks,
``follow``, ``process_links``, ``process_request``, ``cb_kwargs`` and an
errback; a ``scrapy.Item`` filled across two pages through ``cb_kwargs``, an
attrs item through ``meta``, dataclass items and plain dicts, Decimals,
dates and tuples. ``ShopSpider`` runs it on the cluster, ``PlainShopSpider``
in plain Scrapy (``tests/support/shop/plain.py``), so a test can compare
what each stored.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import date
from decimal import Decimal
from typing import Any

import attrs
import scrapy
from scrapy.exceptions import DropItem
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from spiders_project.spiders import RedisCrawlSpider, RedisSitemapSpider, RedisSpider


class ProductItem(scrapy.Item):
    sku = scrapy.Field()
    name = scrapy.Field()
    price = scrapy.Field()
    category = scrapy.Field()
    description = scrapy.Field()
    listed_on = scrapy.Field()
    found = scrapy.Field()
    reviews = scrapy.Field()
    trail = scrapy.Field()


@attrs.define
class SellerItem:
    seller_id: int
    name: str | None = None
    since: date | None = None


@dataclasses.dataclass
class ListingEntry:
    category: str
    page: int
    sku: str
    price: Decimal


ITEM_KEYS = {"ProductItem": ["sku"], "SellerItem": ["seller_id"]}


class ShopPipeline:
    """A user's pipeline: drops seller 0, and marks what the errback yields."""

    def process_item(self, item: Any) -> Any:
        if isinstance(item, SellerItem) and item.seller_id == 0:
            raise DropItem("seller 0 is not wanted")
        if isinstance(item, dict):
            item["checked"] = True
        return item


PIPELINES = {"tests.support.shop.spiders.ShopPipeline": 300}


class ShopLogic:
    """The spider's rules and callbacks, shared by the cluster and plain-Scrapy versions."""

    rules = (
        Rule(LinkExtractor(restrict_css="a.cat"), callback="parse_listing", follow=True),
        Rule(
            LinkExtractor(restrict_css=".pager"),
            callback="parse_listing",
            follow=True,
            process_links="pager_links",
        ),
        Rule(
            LinkExtractor(restrict_css=".product a.detail"),
            callback="parse_product",
            cb_kwargs={"via": "rule"},
            errback="product_missing",
            process_request="mark_product",
            follow=False,
        ),
    )

    def pager_links(self, links: list[Any]) -> list[Any]:
        return [link for link in links if "/c/" in link.url]

    def mark_product(self, request: scrapy.Request, response: Response) -> scrapy.Request:
        request.meta["listed_on"] = response.url
        return request

    def parse_listing(self, response: Response) -> Any:
        category, page = response.url.rstrip("/").split("/")[-2:]
        for block in response.css(".product"):
            yield ListingEntry(
                category=category,
                page=int(page),
                sku=block.attrib["data-sku"],
                price=Decimal(block.css(".price::text").get()),
            )

    def parse_product(self, response: Response, via: str) -> Any:
        sku = response.url.rstrip("/").split("/")[-1]
        item = ProductItem(
            sku=sku,
            name=response.css("h1::text").get(),
            price=Decimal(response.css(".price::text").get()),
            category=sku.split("-")[0],
            description=response.css(".description::text").get(),
            listed_on=response.meta["listed_on"],
            found=date(2026, 1, 2),
        )
        yield response.follow(
            response.css("a.reviews::attr(href)").get(),
            callback=self.parse_reviews,
            cb_kwargs={"item": item, "trail": (via, "reviews")},
        )
        seller = int(response.css("a.seller::attr(href)").get().rsplit("/", 1)[1])
        yield response.follow(
            f"/s/{seller}",
            callback=self.parse_seller,
            meta={"seller": SellerItem(seller_id=seller), "since": date(2020, 1, seller + 1)},
        )

    def parse_reviews(self, response: Response, item: ProductItem, trail: tuple[str, str]) -> Any:
        # The types must come back as they went: the item class, the Decimal, the tuple.
        assert type(item) is ProductItem and type(item["price"]) is Decimal, item
        assert type(trail) is tuple and type(item["found"]) is date, trail
        item["reviews"] = int(response.css(".count::text").get())
        item["trail"] = list(trail)
        yield item

    def parse_seller(self, response: Response) -> Any:
        seller = response.meta["seller"]
        assert type(seller) is SellerItem and type(response.meta["since"]) is date, seller
        seller.name = response.css(".seller-name::text").get()
        seller.since = response.meta["since"]
        yield seller

    def product_missing(self, failure: Any) -> Any:
        yield {"missing": failure.request.url, "status": failure.value.response.status}


class ShopSpider(ShopLogic, RedisCrawlSpider):
    name = "shop"
    custom_settings = {"ITEM_KEYS": ITEM_KEYS, "ITEM_PIPELINES": PIPELINES}


class PlainShopSpider(ShopLogic, CrawlSpider):
    name = "shop_plain"
    custom_settings = {"ITEM_PIPELINES": PIPELINES}


class ShopSitemapSpider(RedisSitemapSpider):
    """Seeded with the sitemap index: every product page the sitemaps list."""

    name = "shop_sitemap"
    sitemap_rules = [("/p/", "parse_product_page")]

    def parse_product_page(self, response: Response) -> Any:
        yield {"sku": response.url.rsplit("/", 1)[1], "name": response.css("h1::text").get()}


class CarelessSpider(RedisSpider):
    """Puts a lock in the meta of one request of each listing page: it cannot be stored."""

    name = "shop_careless"

    def parse(self, response: Response) -> Any:
        for href in response.css("a.cat::attr(href), .pager a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        for i, href in enumerate(response.css(".product a.detail::attr(href)").getall()):
            meta = {"lock": threading.Lock()} if i == 0 else {"position": i}
            yield response.follow(href, callback=self.parse_product, meta=meta)

    def parse_product(self, response: Response) -> Any:
        yield {"sku": response.url.rsplit("/", 1)[1]}
