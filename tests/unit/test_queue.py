"""The queue's fast encoding gives what Scrapy's slow one gives (see docs/BENCHMARKS.md)."""

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest

from spiders_project.frontier.queue import JsonPriorityQueue


class _Spider(Spider):
    name = "t"

    def parse(self, response):
        pass

    def failed(self, failure):
        pass


class _AliasSpider(_Spider):
    alias = _Spider.failed


@pytest.fixture
def spider():
    return _Spider()


@pytest.fixture
def queue(spider):
    return JsonPriorityQueue(None, spider, "t:requests")


def test_encoding_matches_scrapy_to_dict(spider, queue):
    requests = [
        Request("http://example.com/a", callback=spider.parse, meta={"d": 1}, priority=3),
        Request("http://example.com/b"),
        Request("http://example.com/c", errback=spider.failed, dont_filter=True),
        FormRequest("http://example.com/f", formdata={"a": "b"}, callback=spider.parse),
        Request(
            "http://example.com/h",
            headers={"X": "1"},
            cookies={"c": "d"},
            cb_kwargs={"k": 1},
            flags=["f"],
        ),
    ]
    for request in requests:
        assert queue._to_dict(request) == request.to_dict(spider=spider)


def test_an_alias_resolves_to_the_same_method():
    spider = _AliasSpider()
    queue = JsonPriorityQueue(None, spider, "t:requests")
    request = Request("http://example.com/", callback=spider.alias)
    decoded = queue.decode(queue.encode(request)[1])
    assert decoded.callback.__func__ is _Spider.failed


def test_callbacks_that_are_not_spider_methods_go_through_scrapy(spider, queue):
    with pytest.raises(ValueError):
        queue._to_dict(Request("http://example.com/", callback=lambda r: None))
    other = _Spider()
    request = Request("http://example.com/", callback=other.parse)
    assert queue._to_dict(request) == request.to_dict(spider=spider)
