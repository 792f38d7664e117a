"""Callbacks by name: any method of the spider's classes, never its machinery."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider

from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.callbacks import refusal
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.spiders import RedisCrawlSpider


class Base(CrawlSpider):
    name = "b"

    def parse_base(self, response):
        pass


class Shop(Base):
    name = "shop"
    rules = (Rule(LinkExtractor(), callback="parse_item"),)
    not_a_method = "text"

    def parse_item(self, response):
        pass

    async def parse_async(self, response):
        pass

    @property
    def prop(self):
        return 1

    @classmethod
    def klass(cls, response):
        pass


class Ported(RedisCrawlSpider):
    name = "ported"

    def parse_item(self, response):
        pass


class Maps(SitemapSpider):
    name = "maps"


@pytest.mark.parametrize(
    ("spider", "name"),
    [
        (Shop, "parse_item"),
        (Shop, "parse_base"),
        (Shop, "parse_async"),
        (Shop, "_callback"),
        (Shop, "_errback"),
        (Shop, "parse_start_url"),
        (Shop, "parse"),
        (Shop, "_parse"),
        (Ported, "_callback"),
        (Ported, "parse_item"),
        (Maps, "_parse_sitemap"),
    ],
)
def test_methods_of_the_spider_and_its_bases_are_callbacks(spider, name):
    assert refusal(spider, name) is None


@pytest.mark.parametrize(
    ("spider", "name", "why"),
    [
        (Shop, "__init__", "dunder"),
        (Shop, "__class__", "dunder"),
        (Shop, "from_crawler", "machinery"),
        (Shop, "_set_crawler", "machinery"),
        (Shop, "close", "machinery"),
        (Shop, "start", "machinery"),
        (Shop, "start_requests", "machinery"),
        (Shop, "update_settings", "machinery"),
        (Shop, "log", "machinery"),
        (Ported, "setup_redis", "machinery"),
        (Ported, "make_request_from_data", "machinery"),
        (Ported, "spider_idle", "machinery"),
        (Shop, "not_a_method", "not a method"),
        (Shop, "prop", "not a method"),
        (Shop, "klass", "not a method"),
        (Shop, "rules", "not a method"),
        (Shop, "nothing_here", "not a method"),
    ],
)
def test_machinery_dunders_and_non_methods_are_refused(spider, name, why):
    assert why in (refusal(spider, name) or "")


@pytest.mark.parametrize("name", ["close", "from_crawler", "nothing_here", "__init__", "prop"])
def test_an_entry_naming_a_refused_callback_is_rejected_when_read(name):
    queue = JsonPriorityQueue(None, Shop(), "k", serialize)
    with pytest.raises(InvalidEntry):
        queue.decode(b'{"url":"http://e.com/","cb":"%s"}' % name.encode())
    with pytest.raises(InvalidEntry):
        queue.decode(b'{"url":"http://e.com/","eb":"%s"}' % name.encode())


def test_a_crawl_spider_rule_request_round_trips():
    spider = Shop()
    spider._compile_rules()
    queue = JsonPriorityQueue(None, spider, "k", serialize)
    request = Request(
        "http://e.com/p/1",
        callback=spider._callback,
        errback=spider._errback,
        meta={"rule": 0, "link_text": "p1"},
    )
    _, payload = queue.encode(request)
    assert b'"c":"_callback"' in payload
    copy = queue.decode(payload)
    assert copy.callback == spider._callback and copy.errback == spider._errback
    assert copy.meta == {"rule": 0, "link_text": "p1"}


def test_a_refused_callback_is_unstorable_at_enqueue():
    spider = Shop()
    queue = JsonPriorityQueue(None, spider, "k", serialize)
    with pytest.raises(InvalidEntry, match="machinery"):
        queue.encode(Request("http://e.com/", callback=spider.log))
