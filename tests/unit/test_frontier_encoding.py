"""The frontier's fast paths give what Scrapy's slow ones give (see docs/BENCHMARKS.md)."""

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest

from spiders_project.frontier.dupefilter import SentFingerprints
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


def test_sent_fingerprints_are_bounded_and_keep_the_latest():
    sent = SentFingerprints(4)
    for i in range(9):
        sent.add(bytes([i]))
    assert len(sent) <= 4
    assert bytes([8]) in sent and bytes([7]) in sent
    assert bytes([0]) not in sent


def test_sent_fingerprints_of_size_zero_remember_nothing():
    sent = SentFingerprints(0)
    sent.add(b"x")
    assert b"x" not in sent and len(sent) == 0


def test_sent_fingerprints_with_recrawl_after_hold_none_longer_than_it():
    now = [0.0]
    sent = SentFingerprints(1000, max_age=10, clock=lambda: now[0])
    sent.add(b"a")
    now[0] = 4.9
    assert b"a" in sent
    sent.add(b"b")
    now[0] = 5.0  # a turn: a and b move to the old generation
    assert b"a" in sent and b"b" in sent
    sent.add(b"c")
    now[0] = 10.0  # another: a and b (added at most 10 s ago) go
    assert b"a" not in sent and b"b" not in sent and b"c" in sent
    now[0] = 30.0  # long idle: everything goes at once
    assert b"c" not in sent and len(sent) == 0
